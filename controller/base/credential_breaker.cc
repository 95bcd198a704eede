#include "controller/base/credential_breaker.h"

namespace sbx::controller {

CredentialBreaker::CredentialBreaker(Clock& clock, BackoffPolicy policy)
    : clock_(clock), backoff_(policy) {}

std::optional<api::Status> CredentialBreaker::Check() const {
  std::lock_guard lock(mu_);
  if (open_until_ && clock_.Steady() < *open_until_) {
    // The same status each time: a condition written from it does not change.
    return last_;
  }
  return std::nullopt;
}

void CredentialBreaker::Rejected(const api::Status& status) {
  std::lock_guard lock(mu_);
  ++rejections_;
  last_ = status;
  open_until_ = clock_.Steady() + backoff_.Delay(rejections_);
}

void CredentialBreaker::Accepted() {
  std::lock_guard lock(mu_);
  rejections_ = 0;
  open_until_.reset();
}

}  // namespace sbx::controller
