#include "controller/cloud/http/retrying_caller.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "controller/base/classify_error.h"
#include "controller/base/inline_wait.h"
#include "controller/cloud/http/redact.h"

namespace sbx::controller::http {

using api::Status;
using api::StatusOr;
using std::chrono::milliseconds;

namespace {

bool IsSuccess(int http_status) { return http_status >= 200 && http_status < 300; }

}  // namespace

RetryingCaller::RetryingCaller(RetryingCallerOptions options, const ErrorTable& errors,
                               Credentials& credentials, EndpointPacing& pacing, Clock& clock,
                               HttpTransport& transport, StreamingTransport* streaming)
    : options_(std::move(options)),
      errors_(errors),
      credentials_(credentials),
      pacing_(pacing),
      clock_(clock),
      transport_(transport),
      streaming_(streaming),
      backoff_(options_.retry.backoff, options_.jitter) {}

AttemptFailure RetryingCaller::Classify(const Call& call, const HttpResponse& response, bool guard,
                                        const std::string& authorization,
                                        const EndpointPacing::Permit& permit) {
  AttemptFailure failure = errors_.FromResponse(response, clock_.Now());
  const std::optional<milliseconds> hint = failure.status.retry_after();
  if (response.status == 429) {
    // The server's limit: cut this workspace's rate for the endpoint class, and one caller's
    // Retry-After holds every caller of the class.
    pacing_.Throttled(std::min(hint.value_or(milliseconds(0)), options_.retry.max_retry_after),
                      permit);
  } else if (response.status < 500) {
    pacing_.Succeeded(permit);  // answered (a 404 too): the rate was not too high
  }
  // A 5xx (a 503 with Retry-After too) is the server failing, not congestion: it moves no rate
  // and holds no other caller; only this call's retry waits (Loop).
  failure.status = RedactAuthorization(failure.status.Annotate(call.what), authorization);
  if (response.status == 401) {
    credentials_.Invalidate();
    if (guard) {
      breaker_.Rejected(failure.status);
    }
  } else if (guard) {
    breaker_.Accepted();
  }
  return failure;
}

template <typename Exchange>
StatusOr<HttpResponse> RetryingCaller::Loop(const Call& call, bool guard, Exchange exchange,
                                            std::stop_token stop) {
  const std::string& what = call.what;
  if (guard) {
    if (std::optional<Status> rejected = breaker_.Check()) {
      return Status(rejected->code(), what + ": not sent, " + options_.credentials_noun +
                                          " rejected recently: " + rejected->message());
    }
  }
  const Clock::SteadyTime start = clock_.Steady();
  for (int attempt = 1;; ++attempt) {
    if (stop.stop_requested()) {
      return api::CancelledError(what + ": cancelled");
    }
    std::optional<EndpointPacing::Permit> permit;
    if (call.routine) {
      permit = pacing_.TryTake(call.endpoint_class);
    } else {
      EndpointPacing::Taken taken = pacing_.TakeOrDefer(call.endpoint_class, stop);
      if (!taken.permit && taken.come_back.count() > 0) {
        // A reconcile worker's thread: the wait for the token goes back to the queue, as a
        // retry's does; the reconcile has its place in line until then.
        return PacingDeferred(what + ": not sent yet, the " +
                                  std::string(EndpointClassName(call.endpoint_class)) +
                                  " calls are paced",
                              taken.come_back);
      }
      permit = taken.permit;
    }
    if (!permit && call.routine) {
      return api::ResourceExhaustedError(what + ": not sent, a routine call and the " +
                                         std::string(EndpointClassName(call.endpoint_class)) +
                                         " calls are paced now");
    }
    if (!permit) {
      return api::CancelledError(what + ": cancelled");
    }
    AttemptFailure failure;
    StatusOr<std::string> authorization = credentials_.Authorization(stop);
    if (stop.stop_requested()) {
      return api::CancelledError(what + ": cancelled");
    }
    if (!authorization.ok()) {
      // Nothing was sent to the API.
      failure.status = authorization.status().Annotate(what);
      failure.maybe_sent = false;
    } else {
      HttpRequest request = call.request;
      request.headers.insert(request.headers.begin(), {"Authorization", *authorization});
      HttpResult result = exchange(request, stop);
      if (stop.stop_requested() || result.status.code() == api::StatusCode::kCancelled) {
        return api::CancelledError(what + ": cancelled");
      }
      if (!result.status.ok()) {
        failure.status = RedactAuthorization(result.status, *authorization);
        failure.maybe_sent = result.maybe_sent;
      } else if (IsSuccess(result.response.status)) {
        pacing_.Succeeded(*permit);
        if (guard) {
          breaker_.Accepted();
        }
        return std::move(result.response);
      } else {
        failure = Classify(call, result.response, guard, *authorization, *permit);
      }
    }
    if (call.routine) {
      return failure.status;  // one attempt: the next pass looks again
    }
    const auto elapsed = std::chrono::duration_cast<milliseconds>(clock_.Steady() - start);
    const std::optional<milliseconds> delay = NextRetryDelay(
        options_.retry, errors_, call.idempotency, failure, attempt, elapsed, backoff_);
    if (!delay) {
      return failure.status;
    }
    if (const std::optional<milliseconds> limit = InlineWaitLimit(); limit && *delay > *limit) {
      // A reconcile worker's thread: give it back, and be requeued when the wait is over.
      spdlog::debug("{}: {} attempt {} failed ({}); the retry in {} ms goes back to the queue",
                    options_.log_name, what, attempt, failure.status.ToString(), delay->count());
      pacing_.KeepPlace(call.endpoint_class, *delay);
      return RetryScheduled(failure.status, *delay);
    }
    spdlog::debug("{}: {} attempt {} failed ({}); retrying in {} ms", options_.log_name, what,
                  attempt, failure.status.ToString(), delay->count());
    if (!clock_.SleepFor(*delay, stop)) {
      return api::CancelledError(what + ": cancelled");
    }
  }
}

StatusOr<HttpResponse> RetryingCaller::Send(const Call& call, std::stop_token stop) {
  return Loop(
      call, /*guard=*/true,
      [this](const HttpRequest& request, std::stop_token s) { return transport_.Send(request, s); },
      stop);
}

RetryingCaller::StreamEnd RetryingCaller::Stream(const Call& call, const StreamHandlers& handlers,
                                                 std::stop_token stop) {
  if (streaming_ == nullptr) {
    return {.status = api::InternalError(call.what + ": this client has no streaming transport")};
  }
  bool opened = false;
  Status end;
  std::string authorization;
  StreamHandlers wrapped = handlers;
  wrapped.on_open = [&](const HttpResponse& head) {
    opened = true;
    if (handlers.on_open) {
      handlers.on_open(head);
    }
  };
  auto exchange = [&](const HttpRequest& request, std::stop_token s) {
    authorization = request.headers.front().second;
    HttpResult result = streaming_->Stream(request, wrapped, s);
    if (opened && result.status.code() != api::StatusCode::kCancelled) {
      // Opened: this attempt is the answer, however the stream ended.
      end = result.status;
      result.status = api::OkStatus();
    }
    return result;
  };
  StatusOr<HttpResponse> head = Loop(call, /*guard=*/false, exchange, stop);
  if (!head.ok()) {
    return {.opened = opened, .status = head.status()};
  }
  return {.opened = opened, .status = RedactAuthorization(end, authorization)};
}

}  // namespace sbx::controller::http
