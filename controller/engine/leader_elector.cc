#include "controller/engine/leader_elector.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace sbx::controller {

LeaderElector::LeaderElector(Store& store, Clock& clock, Options options)
    : store_(store), clock_(clock), options_(std::move(options)) {
  if (options_.identity.empty()) {
    options_.identity = DefaultIdentity();
  }
  if (options_.lease_name.empty() || options_.renew_interval.count() <= 0 ||
      options_.renew_interval >= options_.lease_duration || options_.retry_interval.count() <= 0) {
    std::fprintf(stderr,
                 "LeaderElector: need a lease name and 0 < renew_interval < lease_duration, "
                 "retry_interval > 0\n");
    std::abort();
  }
}

std::string LeaderElector::DefaultIdentity() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') {
    std::snprintf(host, sizeof host, "unknown-host");
  }
  return std::string(host) + "-" + std::to_string(getpid());
}

StatusOr<bool> LeaderElector::TryAcquire() {
  const Clock::SteadyTime attempt_at = clock_.Steady();  // as in WaitUntilLeader
  ASSIGN_OR_RETURN(const bool held, store_.TryAcquireLease(options_.lease_name, options_.identity,
                                                           options_.lease_duration));
  if (held) {
    last_renewal_ = attempt_at;
    leader_.store(true);
  }
  return held;
}

bool LeaderElector::WaitUntilLeader(std::stop_token stop) {
  while (!stop.stop_requested()) {
    // The store stamps the expiry from its own clock at the call, which is no earlier than
    // this: counting from here keeps our idea of the deadline on the safe side.
    const Clock::SteadyTime attempt_at = clock_.Steady();
    StatusOr<bool> held =
        store_.TryAcquireLease(options_.lease_name, options_.identity, options_.lease_duration);
    if (held.ok() && *held) {
      last_renewal_ = attempt_at;
      leader_.store(true);
      return true;
    }
    if (!held.ok() && options_.on_store_error) {
      options_.on_store_error("acquire", held.status());
    }
    if (!clock_.SleepFor(options_.retry_interval, stop)) {
      return false;
    }
  }
  return false;
}

void LeaderElector::RunRenewals(std::stop_token stop, std::function<void()> on_lost) {
  auto lose = [&] {
    leader_.store(false);
    if (on_lost) {
      on_lost();
    }
  };
  Clock::SteadyTime next = last_renewal_ + options_.renew_interval;
  while (clock_.SleepUntil(next, stop)) {
    const Clock::SteadyTime attempt_at = clock_.Steady();
    StatusOr<bool> held =
        store_.TryAcquireLease(options_.lease_name, options_.identity, options_.lease_duration);
    if (held.ok()) {
      if (!*held) {
        lose();  // someone else holds it: our lease expired in the store's eyes
        return;
      }
      last_renewal_ = attempt_at;
      next = attempt_at + options_.renew_interval;
      continue;
    }
    if (options_.on_store_error) {
      options_.on_store_error("renew", held.status());
    }
    const Clock::SteadyTime deadline = last_renewal_ + options_.lease_duration;
    const Clock::SteadyTime now = clock_.Steady();
    if (now >= deadline) {
      lose();
      return;
    }
    // Retry sooner than a normal renewal, and once more right at the deadline.
    next = std::min(now + std::min(options_.retry_interval, options_.renew_interval), deadline);
  }
}

void LeaderElector::Release() {
  if (!leader_.exchange(false)) {
    return;
  }
  const api::Status s = store_.ReleaseLease(options_.lease_name, options_.identity);
  if (!s.ok() && options_.on_store_error) {
    options_.on_store_error("release", s);
  }
}

}  // namespace sbx::controller
