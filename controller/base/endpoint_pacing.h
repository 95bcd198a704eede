// EndpointPacing: how sbx paces the requests of one workspace to one API: the workspace's rate
// (one TokenBucket: Workspace limits.requestsPerSecond for Databricks, --openai-requests-per-
// second for OpenAI, rising up to its maximum while calls wait) caps every call, and each
// endpoint class has a TokenBucket of its own that a 429 on that class cuts and holds (AIMD,
// token_bucket.h).
//
// Only congestion slows anyone down (issue #25):
//   - Succeeded(permit): the server answered below 500 without throttling; both buckets may rise.
//   - Throttled(delay, permit): a 429 (the APIs' rate-limit answer). The class's rate is cut and
//     its callers are held for `delay` (the Retry-After); other classes go on at their rates.
//   - A 5xx, with or without Retry-After, is not congestion: the caller tells the pacing
//     nothing, and only that call's retry waits (http::RetryingCaller).
//
// Why classes, and which (measured, bench/README.md "Degraded cloud"): one endpoint's random
// 429s (the chaos suite's 10% on one endpoint until the end) cut the one shared rate of the
// workspace again and again, so reads and creates waited behind exec-sync's limit. Each class
// gets the requests whose limits the services set apart: creating a sandbox or session
// (kCreate), running a command (kCommand: exec-sync), reading (kRead: GET, LIST) and the other
// writes (kWrite: start, stop, update, delete, events). A workspace-wide limit still shows as
// 429s in every class, and each cuts its own rate until the sum fits.
//
// A needed call on a reconcile thread does not sleep for its token there (TakeOrDefer, issue
// #30): when others are in line or no token is left, it takes a place in line (TokenBucket::
// Claim: places spaced at the rate) and, unless that place is within kInlinePacingWait, gives
// the wait back to the work queue the way a retry's wait is (inline_wait.h). Its key comes back
// at its place and takes a token then, like any caller: nothing is reserved, so callers that
// come back late never go out together above the rate and burst (a first design reserved the
// tokens, went into debt for them, and sent the late ones at once: 429s, cut rates, and the
// 1,000-worker convergence did not finish; bench/README.md). The thread meanwhile serves objects
// that need another API, another class, or none.
//
// Thread-safe; the Clock must outlive it.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "controller/base/clock.h"
#include "controller/base/token_bucket.h"

namespace sbx::controller {

enum class EndpointClass { kRead = 0, kCreate, kCommand, kWrite };
inline constexpr int kEndpointClasses = 4;
std::string_view EndpointClassName(EndpointClass c);  // "read", "create", "command", "write"

class EndpointPacing {
 public:
  // rate <= 0: unlimited (nothing waits, nothing adapts). `aimd` applies to every bucket.
  EndpointPacing(Clock& clock, double rate_per_second, double burst, AimdPolicy aimd = {},
                 std::chrono::milliseconds starve_limit = std::chrono::seconds(30));

  struct Permit {
    EndpointClass endpoint_class = EndpointClass::kRead;
    TokenBucket::Permit of_class;
    TokenBucket::Permit of_workspace;
    bool routine = false;  // taken by TryTake
  };
  // Blocks until both the class and the workspace have a token, or `stop` (→ nullopt). It takes
  // no place in line: a caller that holds its thread anyway (outside a reconcile, a pass's later
  // call, the LIST sweep) competes for the next token; a caller sent away that finds its token
  // taken so takes a new place (TakeOrDefer).
  std::optional<Permit> Take(EndpointClass c, std::stop_token stop = {});
  // Non-blocking: a token of the class and of the workspace, if both are available now and no
  // class starves. For routine calls (a probe or a status check on its cadence), which must
  // never queue in front of the work that brings objects up: under throttling they are skipped
  // rather than waited for (issue #25).
  std::optional<Permit> TryTake(EndpointClass c);
  bool TryAcquire(EndpointClass c) { return TryTake(c).has_value(); }

  // A place in line this near is waited for here: cheaper than a pass through the work queue.
  static constexpr std::chrono::milliseconds kInlinePacingWait{20};
  // How long past its place a caller's place is remembered for it to come back to.
  static constexpr std::chrono::seconds kClaimGrace{30};
  struct Taken {
    std::optional<Permit> permit;
    // No permit: come back after this long (> 0), or 0: `stop` was requested.
    std::chrono::milliseconds come_back{0};
  };
  // A needed call's token. Where a pacing wait may be given back (MayDeferPacing(): the first
  // paced call of a reconcile of InlineWaitOwner()): a token now if the caller comes back for
  // its place, or if nobody is in line and one is left; else a place in line (Claim of the
  // class and of the
  // workspace, the later) — slept for here when within kInlinePacingWait, otherwise returned as
  // the wait. A caller woken before its place keeps it and is told the rest of the wait.
  // Elsewhere, Take.
  Taken TakeOrDefer(EndpointClass c, std::stop_token stop = {});
  // A needed call of a reconcile failed and its retry goes back to the work queue for `wait`
  // (RetryingCaller): it keeps a place for then, so that it is not sent to the end of the line
  // on top of its wait (measured: a 503 late in a convergence cost its object the whole line);
  // the line is moved back by one place for the token it will take. Where the line reaches past
  // `wait`, that place at its end is the retry's: back at its time it would take the token of
  // another caller's place, who would go to the end of the line instead (measured, 10% 503s at
  // N = 100: one object sent to the end four times; bench/README.md "Degraded cloud"). The place
  // serves the first paced call of the pass that comes back, of whatever class (a create's
  // retry comes back with the GET that looks for the sandbox first). The retry still comes back
  // at `wait`: told then that its place is later (TakeOrDefer), it goes back for it as a pacing
  // wait, to the front of the work queue when due (WorkQueue::AddAtItsPlace), where a retry
  // requeued straight for its place would come back behind the ready keys and lose its token
  // (measured: faulty median 15.96 s against 13.84 s). Outside a reconcile, nothing.
  void KeepPlace(EndpointClass c, std::chrono::milliseconds wait);
  // How far ahead the workspace's places in line reach: the wait of a needed call made now.
  std::chrono::milliseconds Backlog() const;

  void Succeeded(const Permit& permit);
  // A 429 on `permit`'s class: cuts that class's rate and holds its callers for `delay`; a
  // needed call's 429 starves the class.
  void Throttled(std::chrono::milliseconds delay, const Permit& permit);
  // Whether a needed call of some class waits out a 429 now (routine calls are not sent).
  bool Starving() const;

  double rate() const;                 // the workspace's rate now
  double rate(EndpointClass c) const;  // the class's rate now
  double max_rate() const;             // the most the workspace's rate may rise to
  int64_t cuts() const;                // rate cuts, over all classes
  // Time needed calls spent in Take waiting for their tokens, summed over callers: what the
  // rate limit cost the work (sbx_api_pacing_wait_seconds_total).
  std::chrono::milliseconds waited() const;
  // Waits given back (TakeOrDefer) and their total length: sbx_api_pacing_deferrals_total and
  // sbx_api_pacing_deferred_seconds_total.
  int64_t deferrals() const { return deferrals_.load(); }
  std::chrono::milliseconds deferred() const;

 private:
  // A token of the class and of the workspace if both have one now (no Starving check).
  std::optional<Permit> TryTakeNeeded(EndpointClass c, bool pressed);

  TokenBucket& Of(EndpointClass c) { return *classes_[static_cast<size_t>(c)]; }
  const TokenBucket& Of(EndpointClass c) const { return *classes_[static_cast<size_t>(c)]; }

  Clock& clock_;
  const std::chrono::milliseconds starve_limit_;
  TokenBucket workspace_;
  std::array<std::optional<TokenBucket>, kEndpointClasses> classes_;
  mutable std::mutex mu_;
  // Since when each class's needed calls have been answered 429 without a success since.
  std::array<std::optional<Clock::SteadyTime>, kEndpointClasses> starved_since_;  // Guarded by mu_.
  std::atomic<int64_t> waited_us_{0};
  std::atomic<int64_t> deferrals_{0};
  std::atomic<int64_t> deferred_us_{0};
  std::mutex claims_mu_;
  // The places in line of the callers sent away, by owner: a place is the owner's whatever the
  // class of the call it comes back with (a create's retry comes back with the GET that looks
  // for the create's sandbox first). Guarded by claims_mu_.
  std::map<std::string, Clock::SteadyTime> claims_;
};

}  // namespace sbx::controller
