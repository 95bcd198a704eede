// What a Notifier sends for one notification (DESIGN §8.3), built from the outbox row alone:
//
//   webhook  application/json
//            {"type":"Warning","reason":"TaskFailed","object":{"kind":"AgentTask",
//             "namespace":"team-a","name":"nightly","uid":"…"},"message":"…",
//             "time":"2026-12-06T12:00:00Z","task":{"phase":"Failed","worker":"pool-a-0",
//             "usage":{…},"durationSeconds":42}}            ("task" only for an AgentTask)
//   slack    {"text":"[Warning] TaskFailed agenttask team-a/nightly: … (phase Failed, worker
//             pool-a-0, 42s, 1200 tokens)"}
//
// Nothing else goes in: the message comes from a status the ScrubbingStore scrubbed, and a
// payload names no secret reference or value. Stateless functions; thread-safe.
#pragma once

#include <string>

#include "controller/store/store.h"

namespace sbx::controller::notify {

std::string WebhookPayload(const Store::Notification& n);
std::string SlackPayload(const Store::Notification& n);

}  // namespace sbx::controller::notify
