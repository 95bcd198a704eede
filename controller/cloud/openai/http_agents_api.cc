#include "controller/cloud/openai/http_agents_api.h"

#include <spdlog/spdlog.h>

#include "api/percent_encoding.h"
#include "controller/cloud/http/wire_text.h"
#include "controller/cloud/openai/sse_parser.h"
#include "controller/cloud/openai/wire_format.h"

namespace sbx::controller::openai {

using api::InvalidArgumentError;
using api::OkStatus;
using api::PercentEncode;
using http::HttpResponse;

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
  return std::string(kSessionsPath) + "/" + PercentEncode(session_id);
}

std::string TurnPath(const std::string& session_id, const std::string& turn_id) {
  return SessionPath(session_id) + "/turns/" + PercentEncode(turn_id);
}

// Reference §1.2: limit 1–100 on the turn and item lists; 0 lets the server choose (20).
Status CheckListParams(const ListParams& params) {
  if (params.limit < 0 || params.limit > 100) {
    return InvalidArgumentError("list limit must be between 1 and 100, got " +
                                std::to_string(params.limit));
  }
  return OkStatus();
}

}  // namespace

HttpAgentsApi::HttpAgentsApi(HttpAgentsApiOptions options, const std::string& api_key,
                             EndpointPacing& pacing, Clock& clock, http::HttpTransport& transport,
                             http::StreamingTransport& streaming)
    : options_([&] {
        options.base_url = StripSlash(std::move(options.base_url));
        return std::move(options);
      }()),
      credentials_("Bearer " + api_key),
      caller_(http::RetryingCallerOptions{.log_name = "openai",
                                          .credentials_noun = "the project's API key was",
                                          .retry = options_.retry,
                                          .jitter = options_.jitter},
              errors_, credentials_, pacing, clock, transport, &streaming) {}

http::Call HttpAgentsApi::BuildCall(const Call& call) const {
  http::Call out;
  out.what = call.method + " " + call.path;
  out.idempotency = call.idempotency;
  out.routine = call.routine;
  // Which pacing the call waits for (endpoint_pacing.h): a session is this API's create.
  out.endpoint_class = call.method == "GET" ? EndpointClass::kRead
                       : call.method == "POST" && call.path == kSessionsPath
                           ? EndpointClass::kCreate
                           : EndpointClass::kWrite;
  http::HttpRequest& request = out.request;
  request.method = call.method;
  request.url = options_.base_url + call.path + call.query;
  request.timeout = call.timeout.count() > 0 ? call.timeout : options_.request_timeout;
  request.headers = {
      {kBetaHeader, kBetaValue},
      {"Accept", "application/json"},
      {"User-Agent", std::string(http::UserAgent())},
  };
  if (!call.idempotency_key.empty()) {
    request.headers.emplace_back("Idempotency-Key", call.idempotency_key);
  }
  if (call.body) {
    request.headers.emplace_back("Content-Type", "application/json");
    request.body = call.body;
  }
  return out;
}

StatusOr<std::string> HttpAgentsApi::Send(const Call& call, std::stop_token stop) {
  ASSIGN_OR_RETURN(HttpResponse response, caller_.Send(BuildCall(call), stop));
  return std::move(response.body);
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
            .idempotency = http::Idempotency::kNotIdempotent};
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
            .idempotency = http::Idempotency::kIdempotent};
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
            .idempotency = http::Idempotency::kNotIdempotent,
            .timeout = options_.send_events_timeout,
            .idempotency_key = idempotency_key};
  return Send(call, stop).status();  // 202 with an empty body
}

StatusOr<TurnPage> HttpAgentsApi::ListTurns(const std::string& session_id, const ListParams& params,
                                            std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  RETURN_IF_ERROR(CheckListParams(params));
  ASSIGN_OR_RETURN(const std::string body, Send(Call{.method = "GET",
                                                     .path = SessionPath(session_id) + "/turns",
                                                     .query = EncodeListQuery(params)},
                                                stop));
  return DecodeTurnPage(body);
}

StatusOr<Turn> HttpAgentsApi::GetTurn(const std::string& session_id, const std::string& turn_id,
                                      std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  RETURN_IF_ERROR(CheckId("turn", turn_id));
  ASSIGN_OR_RETURN(const std::string body,
                   Send(Call{.method = "GET", .path = TurnPath(session_id, turn_id)}, stop));
  return DecodeTurn(body);
}

StatusOr<ItemPage> HttpAgentsApi::ListTurnItems(const std::string& session_id,
                                                const std::string& turn_id,
                                                const ListParams& params, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  RETURN_IF_ERROR(CheckId("turn", turn_id));
  RETURN_IF_ERROR(CheckListParams(params));
  ASSIGN_OR_RETURN(const std::string body,
                   Send(Call{.method = "GET",
                             .path = TurnPath(session_id, turn_id) + "/items",
                             .query = EncodeListQuery(params)},
                        stop));
  return DecodeItemPage(body);
}

StatusOr<ItemPage> HttpAgentsApi::ListItems(const std::string& session_id, const ListParams& params,
                                            std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  RETURN_IF_ERROR(CheckListParams(params));
  ASSIGN_OR_RETURN(const std::string body, Send(Call{.method = "GET",
                                                     .path = SessionPath(session_id) + "/items",
                                                     .query = EncodeListQuery(params)},
                                                stop));
  return DecodeItemPage(body);
}

StatusOr<Environment> HttpAgentsApi::GetEnvironment(const std::string& environment_id,
                                                    std::stop_token stop, bool routine) {
  RETURN_IF_ERROR(CheckId("environment", environment_id));
  ASSIGN_OR_RETURN(const std::string body, Send(Call{.method = "GET",
                                                     .path = std::string(kEnvironmentsPath) + "/" +
                                                             PercentEncode(environment_id),
                                                     .routine = routine},
                                                stop));
  return DecodeEnvironment(body);
}

Status HttpAgentsApi::StreamEvents(const std::string& session_id, const StreamCallbacks& callbacks,
                                   std::stop_token stop) {
  RETURN_IF_ERROR(CheckId("session", session_id));
  const Call call{.method = "GET",
                  .path = SessionPath(session_id) + "/events",
                  .timeout = options_.stream_idle_timeout};
  http::Call stream = BuildCall(call);
  const std::string& what = stream.what;
  for (auto& [name, value] : stream.request.headers) {
    if (name == "Accept") {
      value = "text/event-stream";
    }
  }
  stream.request.headers.emplace_back("Cache-Control", "no-cache");

  SseParser parser(SseParserOptions{.max_event_bytes = options_.max_event_bytes});
  bool ended = false;  // by the callback or [DONE]
  Status stream_error;
  uint64_t skipped = 0;
  auto deliver = [&](const std::vector<SseEvent>& events) -> bool {
    for (const SseEvent& sse : events) {
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
  http::StreamHandlers handlers{
      .on_open =
          [&](const HttpResponse&) {
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
              stream_error =
                  api::ResourceExhaustedError(what + ": an event exceeds " +
                                              std::to_string(options_.max_event_bytes) + " bytes");
              return false;
            }
            return !stop.stop_requested();
          },
  };
  // Retried until the stream opens; nothing is retried once events may have been delivered:
  // there is no resume.
  const auto [opened, end] = caller_.Stream(stream, handlers, stop);
  if (end.code() == api::StatusCode::kCancelled || !opened) {
    return end;
  }
  if (!stream_error.ok()) {
    return stream_error;
  }
  if (!ended && end.ok()) {
    deliver(parser.Finish());
    if (parser.discarded_at_eof()) {
      spdlog::debug("openai: {}: stream ended inside an event; dropped it", what);
    }
  }
  if (skipped > 0) {
    spdlog::debug("openai: {}: skipped {} unreadable events", what, skipped);
  }
  return end;
}

}  // namespace sbx::controller::openai
