#include "controller/engine/periodic_resync.h"

namespace sbx::controller {

PeriodicResync::PeriodicResync(Store& store, Clock& clock, PeriodicResyncOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      jitter_(BackoffPolicy{}, options_.random) {}

void PeriodicResync::Run(Enqueuer& out, std::stop_token stop) {
  if (options_.period.count() <= 0) {
    return;  // resync disabled
  }
  while (clock_.SleepFor(jitter_.Jittered(options_.period, options_.jitter), stop)) {
    api::Status status = EnqueueAllObjects(store_, out);
    if (!status.ok() && options_.on_error) {
      // The next pass is the retry: a resync that fails once costs one period, nothing more.
      options_.on_error(name(), status.Annotate("resync"));
    }
    ++passes_;
  }
}

}  // namespace sbx::controller
