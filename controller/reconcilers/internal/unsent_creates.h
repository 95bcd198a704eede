// UnsentCreates: the creates whose intent row is in the store but which were never sent, because
// their wait for a pacing token went back to the work queue (EndpointPacing::TakeOrDefer, issue
// #30). An intent row normally means "a create may have reached the API, look before creating
// again" (a GET of the sandbox, a LIST of the sessions); for these the reconciler knows it did
// not, so the pass that comes back for its token sends the create as its first call and not
// that lookup (measured: the lookup took the returning pass's place in line and its token, one
// extra call and one more trip through the queue per sandbox). Memory only: after a restart every
// intent is looked up, as before. Shared by the Sandbox reconciler and SessionLifecycle.
// Thread-safe.
#pragma once

#include <mutex>
#include <set>
#include <string>

#include "api/status.h"
#include "controller/base/classify_error.h"

namespace sbx::controller::reconcilers_internal {

class UnsentCreates {
 public:
  // After the create call for `id` returned `sent`: remembered as unsent only when the call
  // gave its pacing wait back (nothing went out); forgotten otherwise.
  void Record(const std::string& id, const api::Status& sent) {
    std::lock_guard lock(mu_);
    if (IsPacingDeferred(sent)) {
      ids_.insert(id);
    } else {
      ids_.erase(id);
    }
  }
  // Whether the last create for `id` was never sent.
  bool Unsent(const std::string& id) const {
    std::lock_guard lock(mu_);
    return ids_.contains(id);
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> ids_;  // Guarded by mu_.
};

}  // namespace sbx::controller::reconcilers_internal
