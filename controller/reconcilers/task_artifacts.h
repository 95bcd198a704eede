// The files a finished AgentTask collects (spec.collect, DESIGN §7.1): each path is read from
// the task's sandbox with exec-sync (scripts/collect_file.sh: at most maxBytes, base64), scrubbed
// of known secret values, stored with its sha256 (Store::PutArtifact), at most
// kMaxTaskArtifactBytes per task. Read from the sandbox sbx created, never from the Sandbox's
// spec as it reads now: its author may have pointed it at a sandbox sbx never created while the
// task ran (#24).
//
// Thread-safe as the Store and the clouds are.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/store/store.h"

namespace sbx::controller {

// What each collect path gave (its size and digest, or why not), in spec order. `directory`:
// where the paths are relative to. `scrub`: applied to each file first (null: stored as read).
// `note`: a line for the task's log (a file that had secrets replaced).
std::vector<api::ArtifactStatus> CollectArtifacts(
    Store& store, CloudClients& clouds, const api::Object& task, const api::Object& sandbox,
    const std::string& directory, const std::function<std::string(std::string_view)>& scrub,
    const std::function<void(std::string)>& note, std::stop_token stop);

}  // namespace sbx::controller
