#include "controller/cloud/openai/http_agents_api.h"

#include <spdlog/spdlog.h>

#include <set>

#include "controller/cloud/databricks/http_sandbox_api.h"
#include "controller/cloud/databricks/wire_format.h"
#include "controller/cloud/openai/http_errors.h"
#include "controller/cloud/openai/sse_parser.h"
#include "controller/cloud/openai/wire_format.h"

namespace sbx::controller::openai {

using api::CancelledError;
using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using databricks::HttpRequest;
using databricks::HttpResponse;
using databricks::HttpResult;
using databricks::UrlEscape;
using std::chrono::milliseconds;

namespace {

constexpr char kBetaHeader[] = "OpenAI-Beta";
constexpr char kBetaValue[] = "agents=v1";
constexpr std::string_view kSessionsPath = "/agents/sessions";
constexpr std::string_view kEnvironmentsPath = "/agents/environments";
constexpr std::string_view kDone = "[DONE]";

std::string StripSlash(std::string url) {
  while (!url.empty() && url.back() == '/') {
    url.pop_back();
  }
  return url;
}

Status CheckId(std::string_view what, const std::string& id) {
  if (id.empty()) {
    return InvalidArgumentError(std::string(what) + " id is empty");
  }
  return OkStatus();
}

std::string SessionPath(const std::string& session_id) {
  return std::string(kSessionsPath) + "/" + UrlEscape(session_id);
}

std::string RequestId(const HttpResponse& response) {
  const std::string* id = response.Header("x-request-id");
  return id == nullptr ? "" : *id;
}

}  // namespace

HttpAgentsApi::HttpAgentsApi(HttpAgentsApiOptions options, std::string api_key, TokenBucket& bucket,
                             Clock& clock, databricks::HttpTransport& transport,
                             StreamingTransport& streaming)
    : options_([&] {
        options.base_url = StripSlash(std::move(options.base_url));
        return std::move(options);
      }()),
      api_key_(std::move(api_key)),
      bucket_(bucket),
      clock_(clock),
      transport_(transport),
      streaming_(streaming),
      backoff_(options_.retry.backoff, options_.jitter) {}

Status HttpAgentsApi::Redact(const Status& s) const {
  if (api_key_.size() < 4 || s.message().find(api_key_) == std::string::npos) {
    return s;
  }
  std::string text = s.message();
  for (size_t p = text.find(api_key_); p != std::string::npos; p = text.find(api_key_, p)) {
    text.replace(p, api_key_.size(), "***");
  }
  Status out(s.code(), std::move(text));
  if (s.retry_after()) {
    out = out.WithRetryAfter(*s.retry_after());
  }
  return out;
}

HttpRequest HttpAgentsApi::BuildRequest(const Call& call) const {
  HttpRequest request;
  request.method = call.method;
  request.url = options_.base_url + call.path + call.query;
  request.timeout = call.timeout.count() > 0 ? call.timeout : options_.request_timeout;
  request.headers = {
      {"Authorization", "Bearer " + api_key_},
      {kBetaHeader, kBetaValue},
      {"Accept", "application/json"},
      {"User-Agent", std::string(databricks::UserAgent())},
  };
  if (!call.idempotency_key.empty()) {
    request.headers.emplace_back("Idempotency-Key", call.idempotency_key);
  }
  if (call.body) {
    request.headers.emplace_back("Content-Type", "application/json");
    request.body = call.body;
  }
  return request;
}

AttemptFailure HttpAgentsApi::FailureFromResponse(const std::string& what, const HttpResponse& r) {
  AttemptFailure failure;
  Status s = StatusFromHttpError(r.status, r.reason, r.body, RequestId(r));
  if (auto hint = RetryHint(r, clock_.Now())) {
    s = s.WithRetryAfter(*hint);
    if ((r.status == 429 || r.status == 503) && hint->count() > 0) {
      // One caller's 429 slows every caller of this workspace.
      bucket_.Penalize(std::min(*hint, options_.retry.max_retry_after));
    }
  }
  failure.status = Redact(s.Annotate(what));
  failure.http_status = r.status;
  failure.should_retry = ShouldRetryHeader(r);
  return failure;
}

AttemptFailure HttpAgentsApi::FailureFromTransport(const HttpResult& result) const {
  AttemptFailure failure;
  failure.status = Redact(result.status);
  failure.maybe_sent = result.maybe_sent;
  return failure;
}

std::optional<Status> HttpAgentsApi::WaitToRetry(const std::string& what, Idempotency idempotency,
                                                 const AttemptFailure& failure, int attempt,
                                                 Clock::SteadyTime start, std::stop_token stop) {
  const auto elapsed = std::chrono::duration_cast<milliseconds>(clock_.Steady() - start);
  const std::optional<milliseconds> delay =
      NextRetryDelay(options_.retry, idempotency, failure, attempt, elapsed, backoff_);
  if (!delay) {
    return failure.status;
  }
  spdlog::debug("openai: {} attempt {} failed ({}); retrying in {} ms", what, attempt,
                failure.status.ToString(), delay->count());
  if (!clock_.SleepFor(*delay, stop)) {
    return CancelledError(what + ": cancelled");
  }
  return std::nullopt;
}

StatusOr<std::string> HttpAgentsApi::Send(const Call& call, std::stop_token stop) {
  const std::string what = call.method + " " + call.path;
  if (std::optional<Status> rejected = breaker_.Check()) {
    return Status(rejected->code(), what +
                                        ": not sent, the project's API key was rejected "
                                        "recently: " +
                                        rejected->message());
  }
  const HttpRequest request = BuildRequest(call);
  const Clock::SteadyTime start = clock_.Steady();
  for (int attempt = 1;; ++attempt) {
    if (stop.stop_requested() || !bucket_.Acquire(stop)) {
      return CancelledError(what + ": cancelled");
    }
    HttpResult result = transport_.Send(request, stop);
    if (stop.stop_requested() || result.status.code() == api::StatusCode::kCancelled) {
      return CancelledError(what + ": cancelled");
    }
    AttemptFailure failure;
    if (!result.status.ok()) {
      failure = FailureFromTransport(result);
    } else if (result.response.status >= 200 && result.response.status < 300) {
      breaker_.Accepted();
      return std::move(result.response.body);
    } else {
      failure = FailureFromResponse(what, result.response);
      if (result.response.status == 401) {
        breaker_.Rejected(failure.status);
      } else {
        breaker_.Accepted();
      }
    }
    if (auto end = WaitToRetry(what, call.idempotency, failure, attempt, start, stop)) {
      return *end;
    }
  }
}

StatusOr<Session> HttpAgentsApi::CreateSession(const CreateSessionRequest& request,
                                               std::stop_token stop) {
  if (request.model.empty()) {
    return InvalidArgumentError("create session: model is required");
  }
  if (request.workspace_directory.empty() || request.workspace_directory.front() != '/') {
    return InvalidArgumentError("create session: workspace_directory must be an absolute path");
  }
  Call call{.method = "POST",
            .path = std::string(kSessionsPath),
            .body = EncodeCreateSessionRequest(request),
            .idempotency = Idempotency::kNotIdempotent};
  ASSIGN_OR_RETURN(const std::string body, Send(call, stop));
  return DecodeSession(body);
}

StatusOr<Session> HttpAgentsApi::UpdateSessionAgent(const std::string& session_id,
                                                    const std::string& model,
                                                    const std::string& instructions,
                                                    std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  if (model.empty()) {
    return InvalidArgumentError("update session: model is required");
  }
  // Setting the same settings twice is harmless: safe to retry.
  Call call{.method = "POST",
            .path = SessionPath(session_id),
            .body = EncodeUpdateSessionAgentRequest(model, instructions),
            .idempotency = Idempotency::kIdempotent};
  ASSIGN_OR_RETURN(const std::string body, Send(call, stop));
  return DecodeSession(body);
}

StatusOr<Session> HttpAgentsApi::GetSession(const std::string& session_id, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  ASSIGN_OR_RETURN(const std::string body,
                   Send(Call{.method = "GET", .path = SessionPath(session_id)}, stop));
  return DecodeSession(body);
}

StatusOr<SessionPage> HttpAgentsApi::ListSessions(const ListSessionsParams& params,
                                                  std::stop_token stop) {
  ASSIGN_OR_RETURN(const std::string body, Send(Call{.method = "GET",
                                                     .path = std::string(kSessionsPath),
                                                     .query = EncodeListSessionsQuery(params)},
                                                stop));
  return DecodeSessionPage(body);
}

StatusOr<std::vector<Session>> HttpAgentsApi::ListAllSessions(ListSessionsParams params,
                                                              std::stop_token stop) {
  std::vector<Session> all;
  std::set<std::string> cursors;
  while (true) {
    ASSIGN_OR_RETURN(SessionPage page, ListSessions(params, stop));
    for (Session& s : page.sessions) {
      all.push_back(std::move(s));
    }
    if (!page.has_more) {
      return all;
    }
    // The SDK falls back to the last item's id when last_id is absent.
    std::string next = page.last_id;
    if (next.empty() && !all.empty() && !page.sessions.empty()) {
      next = all.back().id;
    }
    if (next.empty() || !cursors.insert(next).second) {
      return InternalError("list sessions: the server's cursor does not advance (after=\"" + next +
                           "\")");
    }
    params.after = std::move(next);
  }
}

Status HttpAgentsApi::DeleteSession(const std::string& session_id, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  ASSIGN_OR_RETURN(const std::string body,
                   Send(Call{.method = "DELETE", .path = SessionPath(session_id)}, stop));
  if (body.empty()) {
    return OkStatus();
  }
  return DecodeSessionDeleted(body);
}

Status HttpAgentsApi::SendEvents(const std::string& session_id,
                                 const std::vector<InputEvent>& events,
                                 const std::string& idempotency_key, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  if (events.empty()) {
    return InvalidArgumentError("send events: no events");
  }
  for (const InputEvent& e : events) {
    if (e.kind == InputEvent::Kind::kMessage && e.text.empty()) {
      return InvalidArgumentError("send events: a user message has no text");
    }
  }
  Call call{.method = "POST",
            .path = SessionPath(session_id) + "/events",
            .body = EncodeInputEvents(events),
            .idempotency = Idempotency::kNotIdempotent,
            .timeout = options_.send_events_timeout,
            .idempotency_key = idempotency_key};
  return Send(call, stop).status();  // 202 with an empty body
}

StatusOr<Environment> HttpAgentsApi::GetEnvironment(const std::string& environment_id,
                                                    std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("environment", environment_id));
  ASSIGN_OR_RETURN(const std::string body, Send(Call{.method = "GET",
                                                     .path = std::string(kEnvironmentsPath) + "/" +
                                                             UrlEscape(environment_id)},
                                                stop));
  return DecodeEnvironment(body);
}

Status HttpAgentsApi::StreamEvents(const std::string& session_id, const StreamCallbacks& callbacks,
                                   std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  const Call call{.method = "GET",
                  .path = SessionPath(session_id) + "/events",
                  .timeout = options_.stream_idle_timeout};
  const std::string what = call.method + " " + call.path;
  HttpRequest request = BuildRequest(call);
  for (auto& [name, value] : request.headers) {
    if (name == "Accept") {
      value = "text/event-stream";
    }
  }
  request.headers.emplace_back("Cache-Control", "no-cache");

  const Clock::SteadyTime start = clock_.Steady();
  for (int attempt = 1;; ++attempt) {
    if (stop.stop_requested() || !bucket_.Acquire(stop)) {
      return CancelledError(what + ": cancelled");
    }
    SseParser parser(SseParserOptions{.max_event_bytes = options_.max_event_bytes});
    bool opened = false;
    bool ended = false;  // by the callback or [DONE]
    Status stream_error;
    uint64_t skipped = 0;
    auto deliver = [&](std::vector<SseEvent> events) -> bool {
      for (SseEvent& sse : events) {
        if (sse.data == kDone) {
          ended = true;
          return false;
        }
        StatusOr<SessionEvent> event = DecodeSessionEvent(sse.data);
        if (!event.ok()) {
          // Forward compatibility: a payload we cannot model is not worth the stream.
          ++skipped;
          spdlog::warn("openai: {}: skipping an unreadable event: {}", what,
                       event.status().message());
          continue;
        }
        if (callbacks.on_event && !callbacks.on_event(*event)) {
          ended = true;
          return false;
        }
      }
      return true;
    };
    StreamHandlers handlers{
        .on_open =
            [&](const HttpResponse&) {
              opened = true;
              if (callbacks.on_open) {
                callbacks.on_open();
              }
            },
        .on_data =
            [&](std::string_view chunk) {
              if (!deliver(parser.Feed(chunk))) {
                return false;
              }
              if (parser.failed()) {
                stream_error = api::ResourceExhaustedError(
                    what + ": an event exceeds " + std::to_string(options_.max_event_bytes) +
                    " bytes");
                return false;
              }
              return !stop.stop_requested();
            },
    };
    HttpResult result = streaming_.Stream(request, handlers, stop);
    if (stop.stop_requested() || result.status.code() == api::StatusCode::kCancelled) {
      return CancelledError(what + ": cancelled");
    }
    if (!stream_error.ok()) {
      return stream_error;
    }
    if (opened) {
      if (!ended && result.status.ok()) {
        deliver(parser.Finish());
        if (parser.discarded_at_eof()) {
          spdlog::debug("openai: {}: stream ended inside an event; dropped it", what);
        }
      }
      if (skipped > 0) {
        spdlog::debug("openai: {}: skipped {} unreadable events", what, skipped);
      }
      // Nothing is retried once events may have been delivered: there is no resume.
      return Redact(result.status);
    }
    AttemptFailure failure = result.status.ok() ? FailureFromResponse(what, result.response)
                                                : FailureFromTransport(result);
    if (auto end = WaitToRetry(what, Idempotency::kIdempotent, failure, attempt, start, stop)) {
      return *end;
    }
  }
}

}  // namespace sbx::controller::openai
