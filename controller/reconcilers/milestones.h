// Milestones: the steps of an object's way to Ready, told as they happen to an optional
// observer, to find where the time of a convergence goes (bench/converge.sh reads them from
// sbxd's debug log as "timeline" lines and reports per-step medians).
//
//   Sandbox:      create_sent → created → running_observed (first pass that sees RUNNING)
//   AgentWorker:  session_created → launch_sent → launch_answered → connected_seen → ready
//                 ("ready": Ready turned True in this pass, just before its status write)
//
// The observer runs on the reconciling thread and must be cheap and thread-safe; null: none.
#pragma once

#include <functional>
#include <string_view>

#include "api/resources.h"

namespace sbx::controller {

using MilestoneFn = std::function<void(const api::ObjectKey& object, std::string_view step)>;

inline void Milestone(const MilestoneFn& fn, const api::ObjectKey& object, std::string_view step) {
  if (fn) {
    fn(object, step);
  }
}

}  // namespace sbx::controller
