#include "controller/base/endpoint_pacing.h"

namespace sbx::controller {

std::string_view EndpointClassName(EndpointClass c) {
  switch (c) {
    case EndpointClass::kRead:
      return "read";
    case EndpointClass::kCreate:
      return "create";
    case EndpointClass::kCommand:
      return "command";
    case EndpointClass::kWrite:
      return "write";
  }
  return "unknown";
}

EndpointPacing::EndpointPacing(Clock& clock, double rate_per_second, double burst, AimdPolicy aimd,
                               std::chrono::milliseconds starve_limit)
    : clock_(clock), starve_limit_(starve_limit), workspace_(clock, rate_per_second, burst, aimd) {
  for (std::optional<TokenBucket>& bucket : classes_) {
    bucket.emplace(clock, rate_per_second, burst, aimd);
  }
}

std::optional<EndpointPacing::Permit> EndpointPacing::Take(EndpointClass c, std::stop_token stop) {
  const Clock::SteadyTime start = clock_.Steady();
  // The class first: a class held by its 429s waits without taking the workspace's tokens from
  // the classes that may go on. Either wait ends early (nullopt) when `stop` is requested.
  std::optional<Permit> permit;
  if (std::optional<TokenBucket::Permit> of_class = Of(c).Take(stop)) {
    if (std::optional<TokenBucket::Permit> of_workspace = workspace_.Take(stop)) {
      permit = Permit{c, *of_class, *of_workspace};
    }
  }
  waited_us_ +=
      std::chrono::duration_cast<std::chrono::microseconds>(clock_.Steady() - start).count();
  return permit;
}

std::optional<EndpointPacing::Permit> EndpointPacing::TryTake(EndpointClass c) {
  if (Starving()) {
    return std::nullopt;
  }
  // The class first, as Take; a class token taken when the workspace has none is lost, which
  // costs at most the one token.
  std::optional<TokenBucket::Permit> of_class = Of(c).TryTake();
  if (!of_class) {
    return std::nullopt;
  }
  std::optional<TokenBucket::Permit> of_workspace = workspace_.TryTake();
  if (!of_workspace) {
    return std::nullopt;
  }
  return Permit{c, *of_class, *of_workspace, /*routine=*/true};
}

void EndpointPacing::Succeeded(const Permit& permit) {
  Of(permit.endpoint_class).Succeeded(permit.of_class);
  workspace_.Succeeded(permit.of_workspace);
  if (!permit.routine) {
    std::lock_guard lock(mu_);
    starved_since_[static_cast<size_t>(permit.endpoint_class)].reset();
  }
}

void EndpointPacing::Throttled(std::chrono::milliseconds delay, const Permit& permit) {
  Of(permit.endpoint_class).Throttled(delay, permit.of_class);
  if (!permit.routine) {
    const Clock::SteadyTime now = clock_.Steady();
    std::lock_guard lock(mu_);
    std::optional<Clock::SteadyTime>& since =
        starved_since_[static_cast<size_t>(permit.endpoint_class)];
    if (!since || now - *since >= starve_limit_) {
      since = now;  // a mark left by a call that was never retried does not count
    }
  }
}

bool EndpointPacing::Starving() const {
  const Clock::SteadyTime now = clock_.Steady();
  std::lock_guard lock(mu_);
  for (const std::optional<Clock::SteadyTime>& since : starved_since_) {
    if (since && now - *since < starve_limit_) {
      return true;
    }
  }
  return false;
}

double EndpointPacing::rate() const { return workspace_.rate(); }

double EndpointPacing::rate(EndpointClass c) const { return Of(c).rate(); }

double EndpointPacing::max_rate() const { return workspace_.max_rate(); }

std::chrono::milliseconds EndpointPacing::waited() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::microseconds(waited_us_.load()));
}

int64_t EndpointPacing::cuts() const {
  int64_t total = 0;
  for (const std::optional<TokenBucket>& bucket : classes_) {
    total += bucket->cuts();
  }
  return total;
}

}  // namespace sbx::controller
