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

EndpointPacing::EndpointPacing(Clock& clock, double rate_per_second, double burst, AimdPolicy aimd)
    : workspace_(clock, rate_per_second, burst, aimd) {
  for (std::optional<TokenBucket>& bucket : classes_) {
    bucket.emplace(clock, rate_per_second, burst, aimd);
  }
}

std::optional<EndpointPacing::Permit> EndpointPacing::Take(EndpointClass c, std::stop_token stop) {
  // The class first: a class held by its 429s waits without taking the workspace's tokens from
  // the classes that may go on.
  std::optional<TokenBucket::Permit> of_class = Of(c).Take(stop);
  if (!of_class) {
    return std::nullopt;
  }
  std::optional<TokenBucket::Permit> of_workspace = workspace_.Take(stop);
  if (!of_workspace) {
    return std::nullopt;
  }
  return Permit{c, *of_class, *of_workspace};
}

std::optional<EndpointPacing::Permit> EndpointPacing::TryTake(EndpointClass c) {
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
  return Permit{c, *of_class, *of_workspace};
}

void EndpointPacing::Succeeded(const Permit& permit) {
  Of(permit.endpoint_class).Succeeded(permit.of_class);
  workspace_.Succeeded(permit.of_workspace);
}

void EndpointPacing::Throttled(std::chrono::milliseconds delay, const Permit& permit) {
  Of(permit.endpoint_class).Throttled(delay, permit.of_class);
}

double EndpointPacing::rate() const { return workspace_.rate(); }

double EndpointPacing::rate(EndpointClass c) const { return Of(c).rate(); }

double EndpointPacing::max_rate() const { return workspace_.max_rate(); }

int64_t EndpointPacing::cuts() const {
  int64_t total = 0;
  for (const std::optional<TokenBucket>& bucket : classes_) {
    total += bucket->cuts();
  }
  return total;
}

}  // namespace sbx::controller
