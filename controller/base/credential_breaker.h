// CredentialBreaker: remembers that a service rejected our credentials (HTTP 401), so that every
// call with those credentials fails at once, WITHOUT a request, until a cool-down has passed —
// 30 s, doubling up to 10 min while the service keeps rejecting them. One bad token in a
// Workspace with a hundred Sandboxes then costs one call per cool-down, not a hundred per
// reconcile round (DESIGN §3: a failing object cannot hot-loop).
//
// Each API client owns one (a client is built per workspace and rebuilt when its credentials
// change, so a rotated secret starts with a closed breaker). After the cool-down one call goes
// through; if it is rejected again the cool-down doubles, any other answer closes the breaker.
//
// Thread-safe. The Clock must outlive it.
#pragma once

#include <mutex>
#include <optional>

#include "api/status.h"
#include "controller/base/backoff.h"
#include "controller/base/clock.h"

namespace sbx::controller {

class CredentialBreaker {
 public:
  explicit CredentialBreaker(Clock& clock, BackoffPolicy policy = {std::chrono::seconds(30),
                                                                   std::chrono::minutes(10), 0.0});

  // The rejection to return instead of sending, while cooling down; nullopt when a call may go.
  std::optional<api::Status> Check() const;
  // The service answered 401 with `status`.
  void Rejected(const api::Status& status);
  // The service answered anything but 401.
  void Accepted();

 private:
  Clock& clock_;
  const Backoff backoff_;
  mutable std::mutex mu_;
  int rejections_ = 0;                           // Guarded by mu_.
  std::optional<Clock::SteadyTime> open_until_;  // Guarded by mu_.
  api::Status last_;                             // Guarded by mu_.
};

}  // namespace sbx::controller
