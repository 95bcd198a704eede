// PeriodicResync: the Source that enqueues every object in the store once per `period`
// (±10% jitter, so many controllers or many objects do not beat in phase). A safety net for
// level-based reconcile: drift in the live world that no store write announces (a sandbox
// stopped behind our back, a lost executor) is noticed within one period even if no other source
// reports it. The first pass runs one jittered period after Run starts (StoreWatch does the
// initial list). Waits on the Clock, so FakeClock drives it in tests.
//
// Thread-safety: Run is called by one thread; passes() from any. Ownership: `store` and `clock`
// must outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/engine/source.h"
#include "controller/engine/store_watch.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct PeriodicResyncOptions {
  std::chrono::milliseconds period{std::chrono::minutes(5)};
  double jitter = 0.1;
  SourceErrorFn on_error;   // optional
  Backoff::Uniform random;  // null = seeded PRNG
};

class PeriodicResync final : public Source {
 public:
  PeriodicResync(Store& store, Clock& clock, PeriodicResyncOptions options = {});

  std::string_view name() const override { return "resync"; }
  void Run(Enqueuer& out, std::stop_token stop) override;

  // Completed passes (successful or not).
  int64_t passes() const { return passes_.load(); }

 private:
  Store& store_;
  Clock& clock_;
  const PeriodicResyncOptions options_;
  const Backoff jitter_;
  std::atomic<int64_t> passes_{0};
};

}  // namespace sbx::controller
