#include "controller/reconcilers/internal/pending_estimate.h"

#include <algorithm>

namespace sbx::controller::reconcilers_internal {

std::optional<PendingEstimate::Looks> PendingEstimate::Next() const {
  std::optional<std::chrono::milliseconds> shortest_sighting;
  std::chrono::milliseconds longest_miss{0};
  for (const Evidence& e : window_) {
    if (e.running) {
      shortest_sighting = std::min(shortest_sighting.value_or(e.after), e.after);
    } else {
      longest_miss = std::max(longest_miss, e.after);
    }
  }
  if (!shortest_sighting) {
    return std::nullopt;
  }
  Looks looks{.probe = std::nullopt, .aim = *shortest_sighting};
  if (*shortest_sighting - longest_miss > kTolerance) {
    looks.probe = longest_miss + (*shortest_sighting - longest_miss) / 2;
  }
  return looks;
}

void PendingEstimate::Sighted(std::chrono::milliseconds after) { Add({after, true}); }

void PendingEstimate::Missed(std::chrono::milliseconds after) {
  // What this miss contradicts is no longer true: PENDING now takes longer than those sightings.
  std::erase_if(window_, [&](const Evidence& e) { return e.running && e.after <= after; });
  Add({after, false});
}

void PendingEstimate::Add(Evidence e) {
  window_.push_back(e);
  while (window_.size() > kWindow) {
    window_.pop_front();
  }
}

}  // namespace sbx::controller::reconcilers_internal
