#include "emulator/openai/internal/router.h"

#include <algorithm>
#include <functional>

namespace sbx::emulator::internal::openai {

Router::Router(State& state, AgentsApi& agents, ExecutorRegistry& registry, AdminApi& admin,
               FaultInjector& faults)
    : state_(state), agents_(agents), registry_(registry), admin_(admin), faults_(faults) {}

void Router::Handle(HttpExchange& ex) {
  const HttpRequest& req = ex.request();
  const auto& seg = req.segments;
  const std::string& m = req.method;

  if (!seg.empty() && seg[0] == "_emulator") {
    ex.Respond(admin_.Handle(req));
    return;
  }

  // Executor registry, only under a session's own remote_url
  // (/v1/agents/api/connect/rt_…): {remote_url}/cloud/environment/{id}/register (Noise or the
  // stand-in) and {remote_url}/cloud/environment/{id}/direct/register (codex's direct
  // transport). Anywhere else the path is an unknown URL, as on the service.
  size_t n = seg.size();
  if (m == "POST" && (n == 9 || n == 10) && seg[0] == "v1" && seg[1] == "agents" &&
      seg[2] == "api" && seg[3] == "connect" && seg[5] == "cloud" && seg[6] == "environment" &&
      seg[n - 1] == "register" && (n == 9 || seg[8] == "direct")) {
    ex.Respond(n == 9 ? registry_.HandleRegister(seg[4], seg[7], req)
                      : registry_.HandleDirectRegister(seg[4], seg[7], req));
    return;
  }

  if (n < 2 || seg[0] != "v1" || seg[1] != "agents") {
    RespondUnknownUrl(ex);
    return;
  }

  std::string endpoint;
  std::function<HttpResponse()> call;
  bool stream = false;
  if (n == 3 && seg[2] == "sessions") {
    if (m == "POST") {
      endpoint = "openai.sessions.create";
      call = [&] { return agents_.CreateSession(req); };
    } else if (m == "GET") {
      endpoint = "openai.sessions.list";
      call = [&] { return agents_.ListSessions(req); };
    }
  } else if (n == 4 && seg[2] == "sessions") {
    const std::string& id = seg[3];
    if (m == "GET") {
      endpoint = "openai.sessions.get";
      call = [&, id] { return agents_.GetSession(id); };
    } else if (m == "POST") {
      endpoint = "openai.sessions.update";
      call = [&, id] { return agents_.UpdateSession(id, req); };
    } else if (m == "DELETE") {
      endpoint = "openai.sessions.delete";
      call = [&, id] { return agents_.DeleteSession(id); };
    }
  } else if (n == 5 && seg[2] == "sessions" && seg[4] == "events") {
    const std::string& id = seg[3];
    if (m == "POST") {
      endpoint = "openai.events.create";
      call = [&, id] { return agents_.SendEvents(id, req); };
    } else if (m == "GET") {
      endpoint = "openai.events.stream";
      stream = true;
    }
  } else if (n >= 5 && seg[2] == "sessions" && (seg[4] == "turns" || seg[4] == "items") &&
             m == "GET") {
    endpoint = seg[4] == "items" ? "openai.items.list" : "openai.turns";
    call = [&] { return agents_.Turns(req); };
  } else if (n == 4 && seg[2] == "environments" && m == "GET") {
    endpoint = "openai.environments.get";
    const std::string& id = seg[3];
    call = [&, id] { return agents_.GetEnvironment(id); };
  }
  if (!call && !stream) {
    RespondUnknownUrl(ex);
    return;
  }

  faults_.RecordReplicaRequest(endpoint, n >= 4 ? seg[3] : std::string(), req);
  // The OpenAI rate limit (sbx-emulator --openai-rate-limit), not the Databricks workspace one.
  CallPlan plan = faults_.AdmitAndDelay(endpoint, RateLimit::kOpenAi);
  if (plan.throttled) {
    HttpResponse throttled = ErrorResponse({429,
                                            "requests",
                                            "rate_limit_exceeded",
                                            "Rate limit reached for requests",
                                            {},
                                            plan.throttled});
    // The finer hint the OpenAI SDKs read first.
    throttled.headers.emplace_back("retry-after-ms", std::to_string(plan.throttled_for.count()));
    ex.Respond(throttled);
    return;
  }
  if (plan.fault && !plan.fault->after) {
    ex.Respond(FaultResponse(*plan.fault, endpoint));
    return;
  }
  if (auto denied = CheckAuth(req)) {
    ex.Respond(ErrorResponse(*denied));
    return;
  }
  if (stream) {
    agents_.StreamEvents(seg[3], ex);
    return;
  }
  HttpResponse response;
  try {
    response = call();
  } catch (const std::exception& e) {
    response = ErrorResponse(BadRequest(std::string("Invalid request: ") + e.what()));
  }
  if (plan.fault && plan.fault->after) {
    response = FaultResponse(*plan.fault, endpoint);
  }
  response.headers.emplace_back("x-request-id", state_.NewIdLocked("req_"));
  response.headers.emplace_back("openai-version", "2020-10-01");
  ex.Respond(response);
}

// Counted as "openai.unknown"; 404 unknown_url like the real API.
void Router::RespondUnknownUrl(HttpExchange& ex) {
  const HttpRequest& req = ex.request();
  faults_.Admit("openai.unknown", false);
  ex.Respond(ErrorResponse({404,
                            "invalid_request_error",
                            "unknown_url",
                            "Unknown request URL: " + req.method + " " + req.path + ".",
                            {},
                            {}}));
}

HttpResponse Router::FaultResponse(const FaultSpec& f, const std::string& endpoint) {
  std::string code = f.error_code;
  std::string type = "server_error";
  if (code.empty()) {
    code = f.status == 429   ? "rate_limit_exceeded"
           : f.status == 503 ? "server_is_overloaded"
           : f.status >= 500 ? "server_error"
                             : "injected_fault";
  }
  if (f.status == 429) {
    type = "requests";
  }
  if (f.status < 500 && f.status != 429) {
    type = "invalid_request_error";
  }
  ApiError e{f.status, type, code, f.message.empty() ? "Injected fault on " + endpoint : f.message,
             {},       {}};
  if (f.status == 429 || f.status == 503) {
    e.retry_after = f.retry_after;
  }
  return ErrorResponse(e);
}

std::optional<ApiError> Router::CheckAuth(const HttpRequest& req) {
  std::string token = BearerToken(req);
  if (token.empty()) {
    return ApiError{401,
                    "invalid_request_error",
                    "",
                    "You didn't provide an API key. You need to provide your API key in an "
                    "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                    {},
                    {}};
  }
  bool ok = state_.options.accept_any_api_key ||
            std::find(state_.options.api_keys.begin(), state_.options.api_keys.end(), token) !=
                state_.options.api_keys.end();
  if (!ok) {
    std::string shown = token.size() > 8
                            ? token.substr(0, 3) + "***" + token.substr(token.size() - 4)
                            : std::string("***");
    return ApiError{401,
                    "invalid_request_error",
                    "invalid_api_key",
                    "Incorrect API key provided: " + shown + ".",
                    {},
                    {}};
  }
  if (state_.options.require_beta_header) {
    std::string beta = req.Header("openai-beta");
    if (beta.find("agents=v1") == std::string::npos) {
      return ApiError{400,
                      "invalid_request_error",
                      "invalid_beta",
                      "You must provide the 'OpenAI-Beta: agents=v1' header to use the Agents "
                      "API.",
                      {},
                      {}};
    }
  }
  return std::nullopt;
}

}  // namespace sbx::emulator::internal::openai
