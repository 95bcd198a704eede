#include "controller/cloud/databricks/http_sandbox_api.h"

#include <spdlog/spdlog.h>

#include <set>

#include "controller/cloud/databricks/http_errors.h"
#include "controller/cloud/databricks/wire_format.h"

#ifndef SBX_VERSION
#define SBX_VERSION "0.0.0"
#endif

namespace sbx::controller::databricks {

using api::CancelledError;
using api::InternalError;
using api::InvalidArgumentError;
using api::OkStatus;
using api::UnauthenticatedError;
namespace {

constexpr std::string_view kSandboxesPath = "/api/2.0/sandboxes";
constexpr std::string_view kExecPath = "/api/2.0/sandbox-exec/sandboxes/";

// The reference SDKs put the id into the path verbatim. We percent-encode it instead (as the
// lakebox CLI does): an id holding "/", "?" or "#" would otherwise re-route the call to another
// endpoint (e.g. id "x/start" would start sandbox x). For ids made of DNS-1123 characters, which
// is all sbx generates, the escaped and verbatim forms are the same bytes.
std::string SandboxPath(const std::string& sandbox_id) {
  return std::string(kSandboxesPath) + "/" + UrlEscape(sandbox_id);
}

Status CheckId(const std::string& sandbox_id) {
  if (sandbox_id.empty()) {
    return InvalidArgumentError("sandbox id is empty");
  }
  return OkStatus();
}

// Replaces the credential (and the bare token after the scheme) in a message with "***".
std::string Redact(std::string text, const std::string& authorization) {
  auto scrub = [&text](const std::string& secret) {
    if (secret.size() < 4) {
      return;
    }
    for (size_t p = text.find(secret); p != std::string::npos; p = text.find(secret, p)) {
      text.replace(p, secret.size(), "***");
    }
  };
  scrub(authorization);
  if (const size_t space = authorization.find(' '); space != std::string::npos) {
    scrub(authorization.substr(space + 1));
  }
  return text;
}

Status RedactStatus(const Status& s, const std::string& authorization) {
  Status out(s.code(), Redact(s.message(), authorization));
  if (s.retry_after()) {
    out = out.WithRetryAfter(*s.retry_after());
  }
  return out;
}

}  // namespace

std::string_view UserAgent() { return "sbx/" SBX_VERSION; }

HttpSandboxApi::HttpSandboxApi(HttpSandboxApiOptions options, CredentialsProvider& credentials,
                               TokenBucket& bucket, Clock& clock, HttpTransport& transport)
    : options_(std::move(options)),
      credentials_(credentials),
      bucket_(bucket),
      clock_(clock),
      transport_(transport),
      rng_(std::random_device{}()) {}

double HttpSandboxApi::Jitter() {
  if (options_.jitter) {
    return options_.jitter();
  }
  std::lock_guard lock(rng_mu_);
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

StatusOr<std::string> HttpSandboxApi::Send(const Call& call, std::stop_token stop) {
  const std::string what =
      call.method + " " + call.path_and_query.substr(0, call.path_and_query.find('?'));
  if (std::optional<Status> rejected = breaker_.Check()) {
    return Status(rejected->code(), what +
                                        ": not sent, the workspace's credentials were "
                                        "rejected recently: " +
                                        rejected->message());
  }
  const Clock::SteadyTime start = clock_.Steady();
  for (int attempt = 1;; ++attempt) {
    if (!bucket_.Acquire(stop)) {
      return CancelledError(what + ": cancelled");
    }
    AttemptFailure failure;
    StatusOr<std::string> authorization = credentials_.Authorization(stop);
    if (stop.stop_requested()) {
      return CancelledError(what + ": cancelled");
    }
    if (!authorization.ok()) {
      // Nothing was sent to the API, so even exec-sync may try again.
      failure.status = authorization.status().Annotate(what);
      failure.maybe_sent = false;
    } else {
      HttpRequest request;
      request.method = call.method;
      request.url = options_.host + call.path_and_query;
      request.timeout = call.timeout.count() > 0 ? call.timeout : options_.request_timeout;
      request.headers = {
          {"Authorization", *authorization},
          {"Accept", "application/json"},
          {"User-Agent", std::string(UserAgent())},
      };
      if (!options_.workspace_id.empty()) {
        request.headers.emplace_back("X-Databricks-Workspace-Id", options_.workspace_id);
      }
      if (call.body) {
        request.headers.emplace_back("Content-Type", "application/json");
        request.body = call.body;
      }
      HttpResult result = transport_.Send(request, stop);
      if (stop.stop_requested() || result.status.code() == api::StatusCode::kCancelled) {
        return CancelledError(what + ": cancelled");
      }
      if (!result.status.ok()) {
        failure.status = RedactStatus(result.status, *authorization);
        failure.maybe_sent = result.maybe_sent;
      } else if (result.response.status >= 200 && result.response.status < 300) {
        breaker_.Accepted();
        return std::move(result.response.body);
      } else {
        const HttpResponse& r = result.response;
        Status s = StatusFromHttpError(r.status, r.reason, r.body);
        if (const std::string* header = r.Header("retry-after")) {
          if (auto delay = ParseRetryAfter(*header, clock_.Now())) {
            s = s.WithRetryAfter(*delay);
          }
        }
        if (s.retry_after() && (r.status == 429 || r.status == 503)) {
          // One caller's 429 slows every caller of this workspace.
          bucket_.Penalize(*s.retry_after());
        }
        if (r.status == 401) {
          credentials_.Invalidate();
          breaker_.Rejected(RedactStatus(s, *authorization));
        } else {
          breaker_.Accepted();
        }
        failure.status = RedactStatus(s.Annotate(what), *authorization);
        failure.http_status = r.status;
      }
    }
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Steady() - start);
    const std::optional<std::chrono::milliseconds> delay =
        NextRetryDelay(options_.retry, call.idempotency, failure, attempt, elapsed, Jitter());
    if (!delay) {
      return failure.status;
    }
    spdlog::debug("databricks: {} attempt {} failed ({}); retrying in {} ms", what, attempt,
                  failure.status.ToString(), delay->count());
    if (!clock_.SleepFor(*delay, stop)) {
      return CancelledError(what + ": cancelled");
    }
  }
}

StatusOr<Sandbox> HttpSandboxApi::Create(const std::string& sandbox_id, const Sandbox& desired,
                                         std::stop_token stop) {
  RETURN_IF_ERROR(CheckId(sandbox_id));
  Call call{.method = "POST",
            .path_and_query = std::string(kSandboxesPath) + "?sandbox_id=" + UrlEscape(sandbox_id),
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
    path += sep + std::string("page_token=") + UrlEscape(page_token);
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
  // UrlEscape keeps '.' and turns ',' into %2C, which every form decoder reads back as ','.
  Call call{.method = "PATCH",
            .path_and_query = SandboxPath(sandbox_id) + "?update_mask=" + UrlEscape(joined),
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
            .path_and_query = std::string(kExecPath) + UrlEscape(sandbox_id) + "/exec-sync",
            .body = EncodeExecRequest(request),
            .idempotency = Idempotency::kNotIdempotent,
            .timeout = timeout};
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
    std::string path = std::string(kExecPath) + UrlEscape(sandbox_id) + "/commands";
    if (!token.empty()) {
      path += "?page_token=" + UrlEscape(token);
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
