#include "controller/cloud/databricks/http_sandbox_api.h"

#include <set>

#include "api/percent_encoding.h"
#include "controller/cloud/databricks/wire_format.h"
#include "controller/cloud/http/wire_text.h"

namespace sbx::controller::databricks {

using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using api::PercentEncode;
using http::BodyExcerpt;

namespace {

constexpr std::string_view kSandboxesPath = "/api/2.0/sandboxes";
constexpr std::string_view kExecPath = "/api/2.0/sandbox-exec/sandboxes/";

// The reference SDKs put the id into the path verbatim. We percent-encode it instead (as the
// lakebox CLI does): an id holding "/", "?" or "#" would otherwise re-route the call to another
// endpoint (e.g. id "x/start" would start sandbox x). For ids made of DNS-1123 characters, which
// is all sbx generates, the escaped and verbatim forms are the same bytes.
std::string SandboxPath(const std::string& sandbox_id) {
  return std::string(kSandboxesPath) + "/" + PercentEncode(sandbox_id);
}

Status CheckId(const std::string& sandbox_id) {
  if (sandbox_id.empty()) {
    return InvalidArgumentError("sandbox id is empty");
  }
  return OkStatus();
}

// Which pacing a call waits for (endpoint_pacing.h).
EndpointClass ClassOf(std::string_view method, std::string_view path_and_query) {
  if (method == "GET") {
    return EndpointClass::kRead;  // get, list, list-commands
  }
  if (path_and_query.starts_with(kExecPath)) {
    return EndpointClass::kCommand;  // exec-sync
  }
  if (method == "POST" && path_and_query.starts_with(std::string(kSandboxesPath) + "?")) {
    return EndpointClass::kCreate;
  }
  return EndpointClass::kWrite;  // start, stop, update, delete
}

}  // namespace

HttpSandboxApi::HttpSandboxApi(HttpSandboxApiOptions options, CredentialsProvider& credentials,
                               EndpointPacing& pacing, Clock& clock, http::HttpTransport& transport)
    : options_(std::move(options)),
      pacing_(pacing),
      caller_(http::RetryingCallerOptions{.log_name = "databricks",
                                          .credentials_noun = "the workspace's credentials were",
                                          .retry = options_.retry,
                                          .jitter = options_.jitter},
              errors_, credentials, pacing, clock, transport) {}

StatusOr<std::string> HttpSandboxApi::Send(const Call& call, std::stop_token stop) {
  http::Call out;
  out.what = call.method + " " + call.path_and_query.substr(0, call.path_and_query.find('?'));
  out.idempotency = call.idempotency;
  out.endpoint_class = ClassOf(call.method, call.path_and_query);
  out.routine = call.routine;
  out.request.method = call.method;
  out.request.url = options_.host + call.path_and_query;
  out.request.timeout = call.timeout.count() > 0 ? call.timeout : options_.request_timeout;
  out.request.headers = {
      {"Accept", "application/json"},
      {"User-Agent", std::string(http::UserAgent())},
  };
  if (!options_.workspace_id.empty()) {
    out.request.headers.emplace_back("X-Databricks-Workspace-Id", options_.workspace_id);
  }
  if (call.body) {
    out.request.headers.emplace_back("Content-Type", "application/json");
    out.request.body = call.body;
  }
  ASSIGN_OR_RETURN(http::HttpResponse response, caller_.Send(out, stop));
  return std::move(response.body);
}

StatusOr<Sandbox> HttpSandboxApi::Create(const std::string& sandbox_id, const Sandbox& desired,
                                         std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  Call call{
      .method = "POST",
      .path_and_query = std::string(kSandboxesPath) + "?sandbox_id=" + PercentEncode(sandbox_id),
      .body = EncodeSandboxForCreate(desired)};
  ASSIGN_OR_RETURN(const std::string body, Send(call, stop));
  return DecodeSandbox(body);
}

StatusOr<Sandbox> HttpSandboxApi::Get(const std::string& sandbox_id, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  ASSIGN_OR_RETURN(const std::string body,
                   Send(Call{.method = "GET", .path_and_query = SandboxPath(sandbox_id)}, stop));
  return DecodeSandbox(body);
}

StatusOr<SandboxPage> HttpSandboxApi::List(int page_size, const std::string& page_token,
                                           std::stop_token stop) {
  std::string path(kSandboxesPath);
  char sep = '?';
  if (page_size > 0) {
    path += sep + std::string("page_size=") + std::to_string(page_size);
    sep = '&';
  }
  if (!page_token.empty()) {
    path += sep + std::string("page_token=") + PercentEncode(page_token);
  }
  ASSIGN_OR_RETURN(const std::string body,
                   Send(Call{.method = "GET", .path_and_query = path}, stop));
  return DecodeSandboxPage(body);
}

StatusOr<std::vector<Sandbox>> HttpSandboxApi::ListAll(int page_size, std::stop_token stop) {
  std::vector<Sandbox> all;
  std::string token;
  std::set<std::string> seen;
  while (true) {
    ASSIGN_OR_RETURN(SandboxPage page, List(page_size, token, stop));
    for (Sandbox& s : page.sandboxes) {
      all.push_back(std::move(s));
    }
    if (page.next_page_token.empty()) {
      return all;
    }
    if (!seen.insert(page.next_page_token).second) {
      return InternalError("list sandboxes: the server repeated page token \"" +
                           BodyExcerpt(page.next_page_token, 40) + "\"");
    }
    token = std::move(page.next_page_token);
  }
}

StatusOr<Sandbox> HttpSandboxApi::Update(const std::string& sandbox_id, const Sandbox& desired,
                                         const std::vector<std::string>& mask,
                                         std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  ASSIGN_OR_RETURN(std::string patch, EncodeSandboxUpdate(desired, mask));
  std::string joined;
  for (const std::string& path : mask) {
    joined += (joined.empty() ? "" : ",") + path;
  }
  // PercentEncode keeps '.' and turns ',' into %2C, which every form decoder reads back as ','.
  Call call{.method = "PATCH",
            .path_and_query = SandboxPath(sandbox_id) + "?update_mask=" + PercentEncode(joined),
            .body = std::move(patch)};
  ASSIGN_OR_RETURN(const std::string body, Send(call, stop));
  return DecodeSandbox(body);
}

Status HttpSandboxApi::Delete(const std::string& sandbox_id, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  return Send(Call{.method = "DELETE", .path_and_query = SandboxPath(sandbox_id)}, stop).status();
}

StatusOr<Sandbox> HttpSandboxApi::Start(const std::string& sandbox_id, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  ASSIGN_OR_RETURN(const std::string body,
                   Send(Call{.method = "POST",
                             .path_and_query = SandboxPath(sandbox_id) + "/start",
                             .body = "{}"},
                        stop));
  return DecodeSandbox(body);
}

StatusOr<Sandbox> HttpSandboxApi::Stop(const std::string& sandbox_id, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  ASSIGN_OR_RETURN(
      const std::string body,
      Send(
          Call{.method = "POST", .path_and_query = SandboxPath(sandbox_id) + "/stop", .body = "{}"},
          stop));
  return DecodeSandbox(body);
}

StatusOr<ExecResult> HttpSandboxApi::ExecSync(const std::string& sandbox_id,
                                              const ExecRequest& request, std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  if (request.cmd.empty()) {
    return InvalidArgumentError("exec-sync: cmd is empty");
  }
  // The server answers only when the command ends, so the HTTP timeout must outlast it.
  const auto timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(request.execution_timeout) +
      options_.exec_timeout_margin;
  Call call{.method = "POST",
            .path_and_query = std::string(kExecPath) + PercentEncode(sandbox_id) + "/exec-sync",
            .body = EncodeExecRequest(request),
            .idempotency = http::Idempotency::kNotIdempotent,
            .timeout = timeout,
            .routine = request.routine};
  ASSIGN_OR_RETURN(const std::string body, Send(call, stop));
  return DecodeExecResult(body);
}

StatusOr<std::vector<Command>> HttpSandboxApi::ListCommands(const std::string& sandbox_id,
                                                            std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  std::vector<Command> all;
  std::string token;
  std::set<std::string> seen;
  while (true) {
    std::string path = std::string(kExecPath) + PercentEncode(sandbox_id) + "/commands";
    if (!token.empty()) {
      path += "?page_token=" + PercentEncode(token);
    }
    ASSIGN_OR_RETURN(const std::string body,
                     Send(Call{.method = "GET", .path_and_query = path}, stop));
    ASSIGN_OR_RETURN(auto page, DecodeCommandPage(body));
    for (Command& c : page.first) {
      all.push_back(std::move(c));
    }
    if (page.second.empty()) {
      return all;
    }
    if (!seen.insert(page.second).second) {
      return InternalError("list commands: the server repeated a page token");
    }
    token = std::move(page.second);
  }
}

}  // namespace sbx::controller::databricks
