#include "controller/base/inline_wait.h"

#include <utility>

namespace sbx::controller {
namespace {

// The current thread's scope (see the header: a per-thread context, not shared state).
thread_local std::optional<std::chrono::milliseconds> current_limit;
thread_local std::string current_owner;
thread_local bool deferrals_ended = false;

}  // namespace

std::optional<std::chrono::milliseconds> InlineWaitLimit() { return current_limit; }

const std::string& InlineWaitOwner() { return current_owner; }

bool MayDeferPacing() { return !current_owner.empty() && !deferrals_ended; }

void EndPacingDeferrals() { deferrals_ended = true; }

ScopedInlineWaitLimit::ScopedInlineWaitLimit(std::chrono::milliseconds limit, std::string owner)
    : previous_(current_limit),
      previous_owner_(std::exchange(current_owner, std::move(owner))),
      previous_ended_(std::exchange(deferrals_ended, false)) {
  current_limit = limit;
}

ScopedInlineWaitLimit::~ScopedInlineWaitLimit() {
  current_limit = previous_;
  current_owner = std::move(previous_owner_);
  deferrals_ended = previous_ended_;
}

ScopedInlinePacing::ScopedInlinePacing() : previous_owner_(std::exchange(current_owner, {})) {}

ScopedInlinePacing::~ScopedInlinePacing() { current_owner = std::move(previous_owner_); }

}  // namespace sbx::controller
