#include "controller/base/inline_wait.h"

namespace sbx::controller {
namespace {

// The current thread's limit (see the header: a per-thread context, not shared state).
thread_local std::optional<std::chrono::milliseconds> current_limit;

}  // namespace

std::optional<std::chrono::milliseconds> InlineWaitLimit() { return current_limit; }

ScopedInlineWaitLimit::ScopedInlineWaitLimit(std::chrono::milliseconds limit)
    : previous_(current_limit) {
  current_limit = limit;
}

ScopedInlineWaitLimit::~ScopedInlineWaitLimit() { current_limit = previous_; }

}  // namespace sbx::controller
