#include "emulator/databricks/internal/router.h"

#include <functional>
#include <vector>

namespace sbx::emulator::internal::databricks {

Router::Router(State& state, Auth& auth, SandboxApi& sandboxes, ExecApi& exec, AdminApi& admin,
               FaultInjector& faults)
    : state_(state),
      auth_(auth),
      sandboxes_(sandboxes),
      exec_(exec),
      admin_(admin),
      faults_(faults) {}

void Router::Handle(HttpExchange& ex) {
  const HttpRequest& req = ex.request();
  if (req.path.starts_with("/_emulator/") || req.path == "/_emulator") {
    ex.Respond(admin_.Handle(req));
    return;
  }
  std::vector<std::string> seg;
  for (std::size_t start = 0; start < req.path.size();) {
    std::size_t slash = req.path.find('/', start);
    if (slash == std::string::npos) {
      slash = req.path.size();
    }
    if (slash > start) {
      seg.push_back(req.path.substr(start, slash - start));
    }
    start = slash + 1;
  }
  std::string endpoint;
  std::string id;
  std::function<HttpResponse()> call;
  const std::string& m = req.method;
  auto is_api = seg.size() >= 3 && seg[0] == "api" && seg[1] == "2.0";
  if (req.path == "/.well-known/databricks-config" && m == "GET") {
    endpoint = "databricks.host_metadata";
    call = [&] { return auth_.HostMetadata(req); };
  } else if (req.path == "/oidc/.well-known/oauth-authorization-server" && m == "GET") {
    endpoint = "databricks.oidc_discovery";
    call = [&] { return auth_.OidcDiscovery(req); };
  } else if (req.path == "/oidc/v1/token" && m == "POST") {
    endpoint = "databricks.oauth_token";
    call = [&] { return auth_.Token(req); };
  } else if (is_api && seg[2] == "sandboxes" && seg.size() == 3 && m == "POST") {
    endpoint = "databricks.create";
    call = [&] { return sandboxes_.Create(req); };
  } else if (is_api && seg[2] == "sandboxes" && seg.size() == 3 && m == "GET") {
    endpoint = "databricks.list";
    call = [&] { return sandboxes_.List(req); };
  } else if (is_api && seg[2] == "sandboxes" && seg.size() == 4) {
    id = seg[3];
    if (m == "GET") {
      endpoint = "databricks.get";
      call = [&] { return sandboxes_.Get(id); };
    } else if (m == "PATCH") {
      endpoint = "databricks.update";
      call = [&] { return sandboxes_.Update(id, req); };
    } else if (m == "DELETE") {
      endpoint = "databricks.delete";
      call = [&] { return sandboxes_.Delete(id); };
    }
  } else if (is_api && seg[2] == "sandboxes" && seg.size() == 5 && m == "POST" &&
             (seg[4] == "start" || seg[4] == "stop")) {
    id = seg[3];
    endpoint = "databricks." + seg[4];
    call = [&] {
      return seg[4] == "start" ? sandboxes_.StartSandbox(id, req) : sandboxes_.StopSandbox(id, req);
    };
  } else if (is_api && seg[2] == "sandbox-exec" && seg.size() == 6 && seg[3] == "sandboxes") {
    id = seg[4];
    if (seg[5] == "exec-sync" && m == "POST") {
      endpoint = "databricks.exec_sync";
      call = [&] { return exec_.ExecSync(id, req); };
    } else if (seg[5] == "commands" && m == "GET") {
      endpoint = "databricks.list_commands";
      call = [&] { return exec_.ListCommands(id, req); };
    }
  }
  if (!call) {
    faults_.Admit("databricks.unknown", false);
    ex.Respond(state_.ErrorResponse(
        {404, "ENDPOINT_NOT_FOUND", "No API found for '" + m + " " + req.path + "'", {}}));
    return;
  }

  faults_.RecordReplicaRequest(endpoint, id, req);
  CallPlan plan = faults_.AdmitAndDelay(endpoint, is_api);
  if (plan.throttled) {
    ex.Respond(state_.ErrorResponse(
        {429, "REQUEST_LIMIT_EXCEEDED", "Workspace request rate limit exceeded", plan.throttled}));
    return;
  }
  if (plan.fault && !plan.fault->after) {
    ex.Respond(FaultResponse(*plan.fault, endpoint));
    return;
  }
  if (is_api) {
    if (auto denied = auth_.CheckAuth(req)) {
      ex.Respond(state_.ErrorResponse(*denied));
      return;
    }
  }
  HttpResponse response;
  try {
    response = call();
  } catch (const std::exception& e) {
    // Never a crash on bad input: whatever slipped through validation is a 400 here.
    response = state_.ErrorResponse(BadParam(std::string("Invalid request: ") + e.what()));
  }
  if (plan.fault && plan.fault->after) {
    response = FaultResponse(*plan.fault, endpoint);
  }
  ex.Respond(response);
}

HttpResponse Router::FaultResponse(const FaultSpec& f, const std::string& endpoint) {
  ApiError e{f.status,
             f.error_code.empty() ? internal::DefaultErrorCode(f.status) : f.error_code,
             f.message.empty() ? "Injected fault on " + endpoint : f.message,
             {}};
  if (f.status == 429 || f.status == 503) {
    e.retry_after = f.retry_after;
  }
  return state_.ErrorResponse(e);
}

}  // namespace sbx::emulator::internal::databricks
