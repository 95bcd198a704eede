// What an AgentWorker's executor and agent were made with, as fingerprints recorded in its
// status (executorSpecHash, agentHash): a change of the spec is seen as a change of the
// fingerprint, across restarts. Secret references enter by name, never by value. Private to
// reconcilers/.
#pragma once

#include <string>

#include "api/resources.h"

namespace sbx::controller::reconcilers_internal {

// The executor's command, arguments, environment (values and secret references), API key
// reference and workspace directory.
std::string ExecutorSpecHash(const api::AgentWorkerSpec& spec);

// The agent's model and instructions.
std::string AgentHash(const api::AgentSpec& agent);

}  // namespace sbx::controller::reconcilers_internal
