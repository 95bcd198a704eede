#include "controller/base/endpoint_pacing.h"

#include <algorithm>

#include "controller/base/inline_wait.h"

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

EndpointPacing::Taken EndpointPacing::TakeOrDefer(EndpointClass c, std::stop_token stop) {
  if (!MayDeferPacing()) {
    return {Take(c, stop)};
  }
  // Whatever comes of this call, the pass's later paced calls wait inline: a give-back after a
  // call was sent would send that call again on every return (inline_wait.h).
  EndPacingDeferrals();
  using std::chrono::ceil;
  using std::chrono::milliseconds;
  const Clock::SteadyTime now = clock_.Steady();
  const std::string& owner = InlineWaitOwner();
  bool returning = false;
  {
    std::lock_guard lock(claims_mu_);
    if (auto it = claims_.find(owner); it != claims_.end()) {
      if (it->second - now > kInlinePacingWait) {
        return {std::nullopt, ceil<milliseconds>(it->second - now)};  // woken early: same place
      }
      claims_.erase(it);
      returning = true;
    }
  }
  // One who comes back for its place, or one with nobody in line before it: a token if there is
  // one now (demand pressed on the rate when the caller was sent away for it).
  if (returning || !(Of(c).Claimed() || workspace_.Claimed())) {
    if (std::optional<Permit> permit = TryTakeNeeded(c, returning)) {
      return {permit};
    }
  }
  // Back at its place and its token taken (by a caller outside the line: the LIST sweep, a
  // pass's later call): a new place, at the end of the line, which takes up the token that was
  // missing. Measured (#30, N = 1,000): waiting on the thread for the next token instead (up to
  // 100 ms) chained, since that token was the next place's, whose owner then waited for the one
  // after: 224 s of the four threads' time went to those waits, and the work that needed no
  // token (the sessions, the connection checks) queued behind them. 116.98 s → 105.91 s.
  const Clock::SteadyTime at = std::max(Of(c).Claim(), workspace_.Claim());
  if (at - now <= kInlinePacingWait) {
    if (at > now && !clock_.SleepUntil(at, stop)) {
      return {};
    }
    return {Take(c, stop)};
  }
  const milliseconds wait = ceil<milliseconds>(at - now);
  {
    std::lock_guard lock(claims_mu_);
    // The places of callers that did not come back (deleted, or their pass went another way).
    std::erase_if(claims_, [&](const auto& claim) { return claim.second + kClaimGrace < now; });
    claims_[owner] = at;
  }
  ++deferrals_;
  deferred_us_ += std::chrono::duration_cast<std::chrono::microseconds>(wait).count();
  return {std::nullopt, wait};
}

std::optional<EndpointPacing::Permit> EndpointPacing::TryTakeNeeded(EndpointClass c, bool pressed) {
  // The class first, as Take; a class token taken when the workspace has none is lost, which
  // costs at most the one token.
  std::optional<TokenBucket::Permit> of_class = Of(c).TryTake(pressed);
  if (!of_class) {
    return std::nullopt;
  }
  std::optional<TokenBucket::Permit> of_workspace = workspace_.TryTake(pressed);
  if (!of_workspace) {
    return std::nullopt;
  }
  return Permit{c, *of_class, *of_workspace};
}

std::optional<EndpointPacing::Permit> EndpointPacing::TryTake(EndpointClass c) {
  // A routine call never goes before a needed one: not while a class starves, nor while
  // callers sent away come back for the tokens.
  if (Starving() || Of(c).Claimed() || workspace_.Claimed()) {
    return std::nullopt;
  }
  std::optional<Permit> permit = TryTakeNeeded(c, /*pressed=*/false);
  if (permit) {
    permit->routine = true;
    EndPacingDeferrals();  // sent: a later wait of the same pass must not send it again
  }
  return permit;
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

void EndpointPacing::KeepPlace(EndpointClass c, std::chrono::milliseconds wait) {
  if (InlineWaitOwner().empty()) {
    return;
  }
  // The token it will take comes out of the line's. Its place is when it is due, or the end of
  // the line if that is later: back inside the line, it would take the token of another
  // caller's place (see the header).
  const Clock::SteadyTime place =
      std::max({clock_.Steady() + wait, Of(c).Claim(), workspace_.Claim()});
  std::lock_guard lock(claims_mu_);
  claims_[InlineWaitOwner()] = place;
}

std::chrono::milliseconds EndpointPacing::Backlog() const {
  return std::chrono::ceil<std::chrono::milliseconds>(workspace_.Backlog());
}

std::chrono::milliseconds EndpointPacing::deferred() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::microseconds(deferred_us_.load()));
}

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
