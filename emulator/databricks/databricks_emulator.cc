#include "emulator/databricks/databricks_emulator.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <strings.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <variant>

#include "emulator/internal/fault_injector.h"
#include "emulator/internal/http_server.h"
#include "emulator/internal/process_runner.h"

namespace sbx::emulator {
namespace {

namespace fs = std::filesystem;
using internal::HttpExchange;
using internal::HttpRequest;
using internal::HttpResponse;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;
using Duration = DatabricksEmulator::Duration;

constexpr std::string_view kSandboxHome = "/home/sandbox-agent";
// Where the extra bin dir is mounted inside a command's namespace. It may not be reachable at
// its host path there: the sandbox's tmp is mounted over /tmp, and roots often live in /tmp.
constexpr std::string_view kNamespaceBinDir = "/run/sbx-emulator/bin";
constexpr std::string_view kMarkerName = "SBX_EMULATOR_SANDBOX";
constexpr std::string_view kSystemPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr int kDefaultPageSize = 100;  // lakebox's default; the Sandbox API's is undocumented
constexpr int kMaxPageSize = 1000;

enum class State { kPending, kRunning, kStopping, kStopped };

std::string_view StateName(State s) {
  switch (s) {
    case State::kPending:
      return "SANDBOX_STATE_PENDING";
    case State::kRunning:
      return "SANDBOX_STATE_RUNNING";
    case State::kStopping:
      return "SANDBOX_STATE_STOPPING";
    case State::kStopped:
      return "SANDBOX_STATE_STOPPED";
  }
  return "SANDBOX_STATE_UNSPECIFIED";
}

// A 4xx/5xx answer in the Databricks error shape (§8.1).
struct ApiError {
  int status;
  std::string error_code;
  std::string message;
  std::optional<std::chrono::seconds> retry_after;
};

ApiError BadParam(std::string message) {
  return {400, "INVALID_PARAMETER_VALUE", std::move(message), {}};
}
ApiError NotFound(std::string message) { return {404, "NOT_FOUND", std::move(message), {}}; }

// protobuf JSON Duration: "<seconds>[.frac]s", not negative. Returns milliseconds.
std::optional<Duration> ParseProtoDuration(const json& j) {
  if (!j.is_string()) {
    return std::nullopt;
  }
  const std::string s = j.get<std::string>();
  if (s.size() < 2 || s.back() != 's') {
    return std::nullopt;
  }
  std::string_view num(s.data(), s.size() - 1);
  std::size_t dot = num.find('.');
  std::string_view whole = num.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view() : num.substr(dot + 1);
  if (whole.empty() || whole.size() > 12 || frac.size() > 9) {
    return std::nullopt;
  }
  if (dot != std::string_view::npos && frac.empty()) {
    return std::nullopt;
  }
  auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(whole) || !digits(frac)) {
    return std::nullopt;
  }
  std::int64_t ms = std::stoll(std::string(whole)) * 1000;
  std::string f(frac);
  f.resize(3, '0');
  ms += std::stoll(f);
  return Duration(ms);
}

std::string FormatDuration(Duration d) {
  std::int64_t ms = d.count();
  char buf[48];
  if (ms % 1000 == 0) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(ms / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lld.%03llds", static_cast<long long>(ms / 1000),
                  static_cast<long long>(ms % 1000));
  }
  return buf;
}

std::string FormatTime(SystemClock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (ms % 1000 != 0) {
    std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(ms % 1000));
    out += buf;
  }
  return out + "Z";
}

std::string Hex(std::string_view s) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view s) {
  if (s.size() % 2 != 0) {
    return std::nullopt;
  }
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    auto v = [](char c) -> int {
      if (c >= '0' && c <= '9') {
        return c - '0';
      }
      if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
      }
      return -1;
    };
    int hi = v(s[i]), lo = v(s[i + 1]);
    if (hi < 0 || lo < 0) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') {
      return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
      return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
      return c - '0' + 52;
    }
    if (c == '+' || c == '-') {
      return 62;
    }
    if (c == '/' || c == '_') {
      return 63;
    }
    return -1;
  };
  std::string out;
  int buffer = 0, bits = 0;
  for (char c : in) {
    if (c == '=') {
      break;
    }
    int v = val(c);
    if (v < 0) {
      return std::nullopt;
    }
    buffer = (buffer << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

void ReplaceAll(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t pos = s.find(from); pos != std::string::npos;
       pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

std::string Dump(const json& j) {
  // Command output may hold invalid UTF-8: the API promises U+FFFD for it (§3).
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Fields of a Sandbox body (create or update), validated; absent fields stay nullopt.
struct SandboxFields {
  std::optional<std::string> display_name;
  std::optional<Duration> inactivity_timeout;
  std::optional<std::string> image_uri;
  std::optional<std::map<std::string, std::string>> custom_tags;
};

struct CommandRec {
  std::string command_id;
  std::string cmd;
  std::vector<std::string> args;
  std::optional<std::int64_t> pid;
  bool finished = false;
  std::optional<int> exit_code;
};

struct SandboxRec {
  std::string id;
  std::string display_name;
  std::optional<Duration> inactivity_timeout;
  std::string image_uri;
  std::map<std::string, std::string> custom_tags;
  State state = State::kPending;
  SteadyClock::time_point transition_at;  // when PENDING/STOPPING ends
  bool deleting = false;                  // STOPPING on the way to gone (delete_via_stopping)
  SystemClock::time_point create_time;
  SystemClock::time_point update_time;
  SteadyClock::time_point last_activity;
  int running_execs = 0;
  std::set<pid_t> exec_pgids;  // process groups of in-flight exec-sync children
  std::vector<CommandRec> commands;
  std::uint64_t boot = 0;
};

struct ExecLogEntry {
  std::string sandbox_id;
  std::string command_id;
  std::string cmd;
  std::vector<std::string> args;
  std::vector<std::string> env_names;  // names only: values may be secrets
};

struct IssuedToken {
  SteadyClock::time_point expires_at;
  std::set<std::string> scopes;
};

}  // namespace

class DatabricksEmulator::Impl {
 public:
  explicit Impl(Options options)
      : options_(std::move(options)),
        server_([this](HttpExchange& ex) { Handle(ex); }),
        rng_(std::random_device{}()) {
    instance_id_ = RandomHex(6);
    if (options_.faults == nullptr) {
      owned_faults_ = std::make_unique<internal::FaultInjector>();
      faults_ = owned_faults_.get();
    } else {
      faults_ = options_.faults;
    }
  }

  ~Impl() { Stop(); }

  api::StatusOr<int> Start(const std::string& host, int port) {
    if (options_.root_dir.empty()) {
      return api::InvalidArgumentError("root_dir is required");
    }
    std::error_code ec;
    root_ = fs::absolute(options_.root_dir, ec);
    bin_dir_ = options_.bin_dir.empty() ? root_ / "bin" : fs::absolute(options_.bin_dir, ec);
    fs::create_directories(root_ / "sandboxes", ec);
    if (ec) {
      return api::InvalidArgumentError("cannot create root dir " + root_.string() + ": " +
                                       ec.message());
    }
    fs::create_directories(bin_dir_, ec);
    isolation_ = internal::Isolation::kPathRewrite;
    if (options_.prefer_mount_namespace &&
        internal::ProbeIsolation() == internal::Isolation::kMountNamespace) {
      std::error_code e1, e2;
      fs::create_directories(std::string(kSandboxHome), e1);
      fs::create_directories(std::string(kNamespaceBinDir), e2);
      if (!e1 && !e2) {
        isolation_ = internal::Isolation::kMountNamespace;
      }
    }
    spdlog::info("databricks emulator {}: root {}, commands see /home/sandbox-agent via {}",
                 instance_id_, root_.string(), internal::IsolationName(isolation_));
    if (options_.requests_per_second > 0) {
      faults_->SetRateLimit(options_.requests_per_second, 0);
    }
    auto bound = server_.Start(host, port);
    if (!bound.ok()) {
      return bound.status();
    }
    host_ = host;
    port_ = *bound;
    timer_ = std::jthread([this](std::stop_token st) { TimerLoop(st); });
    return port_;
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) {
        return;
      }
      stopped_ = true;
      // In-flight exec-sync handlers return once their processes die, so the server can join.
      for (auto& [id, sb] : sandboxes_) {
        for (pid_t pg : sb.exec_pgids) {
          ::kill(-pg, SIGKILL);
        }
      }
    }
    internal::KillProcessesWithEnv(std::string(kMarkerName) + "=" + instance_id_ + "/");
    server_.Stop();
    if (timer_.joinable()) {
      timer_.request_stop();
      cv_.notify_all();
      timer_.join();
    }
    internal::KillProcessesWithEnv(std::string(kMarkerName) + "=" + instance_id_ + "/");
  }

  std::string base_url() const { return "http://" + host_ + ":" + std::to_string(port_); }
  const std::string& instance_id() const { return instance_id_; }
  std::string isolation() const { return std::string(internal::IsolationName(isolation_)); }
  internal::FaultInjector& faults() { return *faults_; }

 private:
  // ---- plumbing ----------------------------------------------------------------------------

  std::string RandomHex(int bytes) {
    std::lock_guard lock(rng_mu_);
    std::string out;
    static const char* kDigits = "0123456789abcdef";
    for (int i = 0; i < bytes * 2; ++i) {
      out.push_back(kDigits[rng_() & 15]);
    }
    return out;
  }

  std::string NewRequestId() {
    std::string h = RandomHex(16);
    return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
           "-" + h.substr(20, 12);
  }

  HttpResponse ErrorResponse(const ApiError& e) {
    json body = {{"error_code", e.error_code},
                 {"message", e.message},
                 {"details", json::array({{{"@type", "type.googleapis.com/google.rpc.RequestInfo"},
                                           {"request_id", NewRequestId()},
                                           {"serving_data", ""}}})}};
    HttpResponse r{e.status, "application/json", {}, Dump(body)};
    if (e.retry_after) {
      r.headers.emplace_back("Retry-After", std::to_string(e.retry_after->count()));
    }
    return r;
  }

  static HttpResponse Ok(const json& body) { return {200, "application/json", {}, Dump(body)}; }

  std::string Marker(const std::string& sandbox_id) const {
    return std::string(kMarkerName) + "=" + instance_id_ + "/" + sandbox_id;
  }
  fs::path SandboxDir(const std::string& id) const { return root_ / "sandboxes" / id; }

  // ---- routing -----------------------------------------------------------------------------

  void Handle(HttpExchange& ex) {
    const HttpRequest& req = ex.request();
    if (req.path.starts_with("/_emulator/") || req.path == "/_emulator") {
      ex.Respond(HandleAdmin(req));
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
      call = [&] { return HostMetadata(req); };
    } else if (req.path == "/oidc/.well-known/oauth-authorization-server" && m == "GET") {
      endpoint = "databricks.oidc_discovery";
      call = [&] { return OidcDiscovery(req); };
    } else if (req.path == "/oidc/v1/token" && m == "POST") {
      endpoint = "databricks.oauth_token";
      call = [&] { return Token(req); };
    } else if (is_api && seg[2] == "sandboxes" && seg.size() == 3 && m == "POST") {
      endpoint = "databricks.create";
      call = [&] { return Create(req); };
    } else if (is_api && seg[2] == "sandboxes" && seg.size() == 3 && m == "GET") {
      endpoint = "databricks.list";
      call = [&] { return List(req); };
    } else if (is_api && seg[2] == "sandboxes" && seg.size() == 4) {
      id = seg[3];
      if (m == "GET") {
        endpoint = "databricks.get";
        call = [&] { return Get(id); };
      } else if (m == "PATCH") {
        endpoint = "databricks.update";
        call = [&] { return Update(id, req); };
      } else if (m == "DELETE") {
        endpoint = "databricks.delete";
        call = [&] { return Delete(id); };
      }
    } else if (is_api && seg[2] == "sandboxes" && seg.size() == 5 && m == "POST" &&
               (seg[4] == "start" || seg[4] == "stop")) {
      id = seg[3];
      endpoint = "databricks." + seg[4];
      call = [&] { return seg[4] == "start" ? StartSandbox(id, req) : StopSandbox(id, req); };
    } else if (is_api && seg[2] == "sandbox-exec" && seg.size() == 6 && seg[3] == "sandboxes") {
      id = seg[4];
      if (seg[5] == "exec-sync" && m == "POST") {
        endpoint = "databricks.exec_sync";
        call = [&] { return ExecSync(id, req); };
      } else if (seg[5] == "commands" && m == "GET") {
        endpoint = "databricks.list_commands";
        call = [&] { return ListCommands(id, req); };
      }
    }
    if (!call) {
      faults_->Admit("databricks.unknown", false);
      ex.Respond(ErrorResponse(
          {404, "ENDPOINT_NOT_FOUND", "No API found for '" + m + " " + req.path + "'", {}}));
      return;
    }

    internal::CallPlan plan = faults_->Admit(endpoint, is_api);
    if (plan.latency.count() > 0) {
      std::this_thread::sleep_for(plan.latency);
    }
    if (plan.throttled) {
      ex.Respond(ErrorResponse({429, "REQUEST_LIMIT_EXCEEDED",
                                "Workspace request rate limit exceeded", plan.throttled}));
      return;
    }
    if (plan.fault && !plan.fault->after) {
      ex.Respond(FaultResponse(*plan.fault, endpoint));
      return;
    }
    if (is_api) {
      if (auto denied = CheckAuth(req)) {
        ex.Respond(ErrorResponse(*denied));
        return;
      }
    }
    HttpResponse response;
    try {
      response = call();
    } catch (const std::exception& e) {
      // Never a crash on bad input: whatever slipped through validation is a 400 here.
      response = ErrorResponse(BadParam(std::string("Invalid request: ") + e.what()));
    }
    if (plan.fault && plan.fault->after) {
      response = FaultResponse(*plan.fault, endpoint);
    }
    ex.Respond(response);
  }

  HttpResponse FaultResponse(const internal::FaultSpec& f, const std::string& endpoint) {
    ApiError e{f.status,
               f.error_code.empty() ? internal::DefaultErrorCode(f.status) : f.error_code,
               f.message.empty() ? "Injected fault on " + endpoint : f.message,
               {}};
    if (f.status == 429 || f.status == 503) {
      e.retry_after = f.retry_after;
    }
    return ErrorResponse(e);
  }

  // ---- auth (§9) ---------------------------------------------------------------------------

  std::optional<ApiError> CheckAuth(const HttpRequest& req) {
    std::string h = req.Header("authorization");
    if (h.empty()) {
      return ApiError{401, "UNAUTHENTICATED", "Missing Authorization header", {}};
    }
    if (h.size() < 7 || strncasecmp(h.c_str(), "Bearer ", 7) != 0) {
      return ApiError{401, "UNAUTHENTICATED", "Authorization must be a Bearer token", {}};
    }
    std::string token = Trim(h.substr(7));
    if (token.empty()) {
      return ApiError{401, "UNAUTHENTICATED", "Empty bearer token", {}};
    }
    if (options_.accept_any_token) {
      return std::nullopt;
    }
    if (std::find(options_.tokens.begin(), options_.tokens.end(), token) != options_.tokens.end()) {
      return std::nullopt;
    }
    std::lock_guard lock(mu_);
    auto it = issued_.find(token);
    if (it == issued_.end()) {
      return ApiError{401, "UNAUTHENTICATED", "Invalid access token", {}};
    }
    if (SteadyClock::now() >= it->second.expires_at) {
      issued_.erase(it);
      return ApiError{401, "UNAUTHENTICATED", "Access token has expired", {}};
    }
    if (!it->second.scopes.contains("all-apis") && !it->second.scopes.contains("sandbox")) {
      return ApiError{403,
                      "PERMISSION_DENIED",
                      "Token is missing the required scope 'sandbox' (or 'all-apis')",
                      {}};
    }
    return std::nullopt;
  }

  // The URL the client used (its Host header), so discovery works behind any address.
  std::string PublicUrl(const HttpRequest& req) const {
    std::string host = req.Header("host");
    return host.empty() ? base_url() : "http://" + host;
  }

  HttpResponse HostMetadata(const HttpRequest& req) {
    json j = {{"oidc_endpoint", PublicUrl(req) + "/oidc"}, {"cloud", "aws"}};
    if (!options_.workspace_id.empty()) {
      j["workspace_id"] = options_.workspace_id;
    }
    return Ok(j);
  }

  HttpResponse OidcDiscovery(const HttpRequest& req) {
    const std::string base = PublicUrl(req);
    return Ok({{"issuer", base + "/oidc"},
               {"authorization_endpoint", base + "/oidc/v1/authorize"},
               {"token_endpoint", base + "/oidc/v1/token"},
               {"grant_types_supported", json::array({"client_credentials"})}});
  }

  HttpResponse OAuthError(int status, const std::string& error, const std::string& description) {
    return {status,
            "application/json",
            {},
            Dump({{"error", error}, {"error_description", description}})};
  }

  HttpResponse Token(const HttpRequest& req) {
    auto form = internal::ParseFormEncoded(req.body);
    std::string client_id, client_secret;
    std::string h = req.Header("authorization");
    if (h.size() > 6 && strncasecmp(h.c_str(), "Basic ", 6) == 0) {
      auto decoded = Base64Decode(Trim(h.substr(6)));
      if (decoded) {
        auto colon = decoded->find(':');
        client_id = internal::PercentDecode(decoded->substr(0, colon), false);
        if (colon != std::string::npos) {
          client_secret = internal::PercentDecode(decoded->substr(colon + 1), false);
        }
      }
    } else {
      client_id = form["client_id"];  // client_secret_post
      client_secret = form["client_secret"];
    }
    if (client_id.empty() || client_id != options_.oauth_client_id ||
        client_secret != options_.oauth_client_secret) {
      return OAuthError(401, "invalid_client", "Client authentication failed");
    }
    if (form["grant_type"] != "client_credentials") {
      return OAuthError(400, "unsupported_grant_type",
                        "Only grant_type=client_credentials is supported");
    }
    std::string scope =
        form.contains("scope") && !Trim(form["scope"]).empty() ? Trim(form["scope"]) : "all-apis";
    IssuedToken t;
    t.expires_at = SteadyClock::now() + options_.oauth_token_ttl;
    std::size_t start = 0;
    while (start < scope.size()) {
      std::size_t sp = scope.find(' ', start);
      if (sp == std::string::npos) {
        sp = scope.size();
      }
      if (sp > start) {
        t.scopes.insert(scope.substr(start, sp - start));
      }
      start = sp + 1;
    }
    std::string token = "dose" + RandomHex(16);
    {
      std::lock_guard lock(mu_);
      issued_[token] = t;
    }
    auto ttl_s = std::max<std::int64_t>(
        1, std::chrono::duration_cast<std::chrono::seconds>(options_.oauth_token_ttl).count());
    return Ok({{"access_token", token},
               {"token_type", "Bearer"},
               {"expires_in", ttl_s},
               {"scope", scope}});
  }

  // ---- request parsing ---------------------------------------------------------------------

  // An empty body is `{}` (Go sends none on start/stop); `null` and non-objects are rejected
  // like lakebox does.
  std::variant<json, ApiError> ParseObject(const std::string& body) {
    if (Trim(body).empty()) {
      return json::object();
    }
    json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return BadParam("Malformed JSON request body");
    }
    if (!j.is_object()) {
      return BadParam("Request body must be a JSON object");
    }
    return j;
  }

  std::optional<ApiError> ParseSandboxFields(const json& j, SandboxFields& out) {
    static const std::set<std::string> kKnown = {"name",   "display_name", "spec",       "metadata",
                                                 "status", "create_time",  "update_time"};
    if (options_.reject_unknown_fields) {
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!kKnown.contains(it.key())) {
          return BadParam("Unknown field '" + it.key() + "'");
        }
      }
    }
    if (j.contains("display_name")) {
      const json& v = j["display_name"];
      if (!v.is_string()) {
        return BadParam("display_name must be a string");
      }
      if (v.get<std::string>().size() > 256) {
        return BadParam("display_name must be at most 256 bytes");
      }
      out.display_name = v.get<std::string>();
    }
    if (j.contains("spec")) {
      const json& spec = j["spec"];
      if (!spec.is_object()) {
        return BadParam("spec must be an object");
      }
      if (spec.contains("compute")) {
        const json& compute = spec["compute"];
        if (!compute.is_object()) {
          return BadParam("spec.compute must be an object");
        }
        if (compute.contains("inactivity_timeout")) {
          auto d = ParseProtoDuration(compute["inactivity_timeout"]);
          if (!d) {
            return BadParam(
                "spec.compute.inactivity_timeout must be a non-negative duration like \"900s\"");
          }
          if (*d < options_.min_inactivity_timeout || *d > options_.max_inactivity_timeout) {
            return BadParam("spec.compute.inactivity_timeout must be between " +
                            FormatDuration(options_.min_inactivity_timeout) + " and " +
                            FormatDuration(options_.max_inactivity_timeout));
          }
          out.inactivity_timeout = *d;
        }
      }
      if (spec.contains("environment")) {
        const json& env = spec["environment"];
        if (!env.is_object()) {
          return BadParam("spec.environment must be an object");
        }
        if (env.contains("image_uri")) {
          if (!env["image_uri"].is_string()) {
            return BadParam("spec.environment.image_uri must be a string");
          }
          out.image_uri = env["image_uri"].get<std::string>();
        }
      }
    }
    if (j.contains("metadata")) {
      const json& md = j["metadata"];
      if (!md.is_object()) {
        return BadParam("metadata must be an object");
      }
      if (md.contains("custom_tags")) {
        const json& tags = md["custom_tags"];
        if (!tags.is_object()) {
          return BadParam("metadata.custom_tags must be an object");
        }
        if (tags.size() > 54) {
          return BadParam("metadata.custom_tags allows at most 54 tags");
        }
        std::map<std::string, std::string> m;
        for (auto it = tags.begin(); it != tags.end(); ++it) {
          if (!it.value().is_string()) {
            return BadParam("custom tag values must be strings");
          }
          if (it.key().empty() || it.key().size() > 512 ||
              it.value().get<std::string>().size() > 256) {
            return BadParam("custom tag keys must be 1-512 and values at most 256 characters");
          }
          m[it.key()] = it.value().get<std::string>();
        }
        out.custom_tags = std::move(m);
      }
    }
    return std::nullopt;
  }

  std::variant<int, ApiError> ParsePageSize(const HttpRequest& req, int default_size) {
    auto it = req.query.find("page_size");
    if (it == req.query.end() || it->second.empty()) {
      return default_size;
    }
    try {
      std::size_t used = 0;
      long v = std::stol(it->second, &used);
      if (used != it->second.size() || v < 0) {
        throw std::invalid_argument("bad");
      }
      if (v == 0) {
        return default_size;
      }
      return static_cast<int>(std::min<long>(v, kMaxPageSize));
    } catch (const std::exception&) {
      return BadParam("page_size must be a non-negative integer");
    }
  }

  // ---- sandbox JSON ------------------------------------------------------------------------

  json SandboxJson(const SandboxRec& sb) const {
    json j = {{"name", "sandboxes/" + sb.id}};
    if (!sb.display_name.empty()) {
      j["display_name"] = sb.display_name;
    }
    json spec = json::object();
    std::optional<Duration> timeout = sb.inactivity_timeout;
    if (!timeout && options_.fill_default_inactivity_timeout &&
        options_.default_inactivity_timeout.count() > 0) {
      timeout = options_.default_inactivity_timeout;
    }
    if (timeout) {
      spec["compute"]["inactivity_timeout"] = FormatDuration(*timeout);
    }
    if (!sb.image_uri.empty()) {
      spec["environment"]["image_uri"] = sb.image_uri;
    }
    if (!spec.empty()) {
      j["spec"] = spec;
    }
    if (!sb.custom_tags.empty()) {
      j["metadata"]["custom_tags"] = sb.custom_tags;
    }
    j["status"] = {{"state", StateName(sb.state)}};
    j["create_time"] = FormatTime(sb.create_time);
    j["update_time"] = FormatTime(sb.update_time);
    return j;
  }

  // ---- lifecycle (§4), all under mu_ --------------------------------------------------------

  Duration EffectiveTimeoutLocked(const SandboxRec& sb) const {
    return sb.inactivity_timeout.value_or(options_.default_inactivity_timeout);
  }

  // Kills every process of the sandbox: in-flight exec-sync groups and anything carrying its
  // marker (detached `setsid nohup` children included).
  void KillSandboxLocked(SandboxRec& sb) {
    for (pid_t pg : sb.exec_pgids) {
      ::kill(-pg, SIGKILL);
    }
    internal::KillProcessesWithEnv(Marker(sb.id));
  }

  void WipeScratchLocked(const SandboxRec& sb) {
    std::error_code ec;
    fs::path tmp = SandboxDir(sb.id) / "tmp";
    fs::remove_all(tmp, ec);
    fs::create_directories(tmp, ec);
    fs::permissions(tmp, fs::perms::all | fs::perms::sticky_bit, ec);
  }

  void BeginStopLocked(SandboxRec& sb, SteadyClock::time_point now) {
    sb.state = State::kStopping;
    sb.transition_at = now + options_.stopping_delay;
    KillSandboxLocked(sb);
    cv_.notify_all();
  }

  // Applies every transition whose time has come. Called on each observation and by the timer.
  void AdvanceLocked(SteadyClock::time_point now) {
    for (auto it = sandboxes_.begin(); it != sandboxes_.end();) {
      SandboxRec& sb = it->second;
      if (sb.state == State::kPending && now >= sb.transition_at) {
        sb.state = State::kRunning;
        sb.last_activity = now;
      }
      if (sb.state == State::kRunning && sb.running_execs == 0) {
        Duration timeout = EffectiveTimeoutLocked(sb);
        if (timeout.count() > 0 && now - sb.last_activity >= timeout) {
          spdlog::info("sandbox {} idle for {}: auto-stop", sb.id, FormatDuration(timeout));
          BeginStopLocked(sb, now);
        }
      }
      if (sb.state == State::kStopping && now >= sb.transition_at) {
        KillSandboxLocked(sb);
        if (sb.deleting) {
          std::error_code ec;
          fs::remove_all(SandboxDir(sb.id), ec);
          it = sandboxes_.erase(it);
          continue;
        }
        sb.state = State::kStopped;
        WipeScratchLocked(sb);
        if (options_.clear_commands_on_stop) {
          sb.commands.clear();
        }
      }
      ++it;
    }
  }

  std::optional<SteadyClock::time_point> NextDeadlineLocked() const {
    std::optional<SteadyClock::time_point> next;
    auto consider = [&](SteadyClock::time_point t) {
      if (!next || t < *next) {
        next = t;
      }
    };
    for (const auto& [id, sb] : sandboxes_) {
      if (sb.state == State::kPending || sb.state == State::kStopping) {
        consider(sb.transition_at);
      }
      if (sb.state == State::kRunning && sb.running_execs == 0) {
        Duration timeout = EffectiveTimeoutLocked(sb);
        if (timeout.count() > 0) {
          consider(sb.last_activity + timeout);
        }
      }
    }
    return next;
  }

  void TimerLoop(std::stop_token st) {
    std::unique_lock lock(mu_);
    while (!st.stop_requested()) {
      AdvanceLocked(SteadyClock::now());
      auto next = NextDeadlineLocked();
      auto until = next ? *next : SteadyClock::now() + std::chrono::seconds(1);
      cv_.wait_until(lock, st, until, [] { return false; });
    }
  }

  SandboxRec* FindLocked(const std::string& id) {
    AdvanceLocked(SteadyClock::now());
    auto it = sandboxes_.find(id);
    return it == sandboxes_.end() ? nullptr : &it->second;
  }

  ApiError SandboxNotFound(const std::string& id) {
    return NotFound("Sandbox 'sandboxes/" + id + "' does not exist");
  }

  // ---- endpoints (§3) ----------------------------------------------------------------------

  std::optional<ApiError> ValidateId(const std::string& id) {
    if (id.empty()) {
      return BadParam("Missing required query parameter 'sandbox_id'");
    }
    if (id.size() > options_.max_sandbox_id_length) {
      return BadParam("sandbox_id must be at most " +
                      std::to_string(options_.max_sandbox_id_length) + " characters");
    }
    for (char c : id) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '_' || c == '.';
      if (!ok) {
        return BadParam("sandbox_id may contain only letters, digits, '-', '_' and '.'");
      }
    }
    if (id == "." || id == "..") {
      return BadParam("sandbox_id must not be '.' or '..'");
    }
    return std::nullopt;
  }

  HttpResponse Create(const HttpRequest& req) {
    auto q = req.query.find("sandbox_id");
    std::string id = q == req.query.end() ? std::string() : q->second;
    if (auto e = ValidateId(id)) {
      return ErrorResponse(*e);
    }
    auto parsed = ParseObject(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return ErrorResponse(*e);
    }
    SandboxFields f;
    if (auto e = ParseSandboxFields(std::get<json>(parsed), f)) {
      return ErrorResponse(*e);
    }

    std::lock_guard lock(mu_);
    if (stopped_) {
      return ErrorResponse({503, "TEMPORARILY_UNAVAILABLE", "Emulator is shutting down", {}});
    }
    if (FindLocked(id) != nullptr) {
      return ErrorResponse(
          {409, "RESOURCE_ALREADY_EXISTS", "Sandbox 'sandboxes/" + id + "' already exists", {}});
    }
    if (options_.max_sandboxes > 0 && sandboxes_.size() >= options_.max_sandboxes) {
      return ErrorResponse(
          {429,
           "RESOURCE_EXHAUSTED",
           "Workspace sandbox quota of " + std::to_string(options_.max_sandboxes) + " reached",
           {}});
    }
    std::error_code ec;
    fs::path dir = SandboxDir(id);
    fs::remove_all(dir, ec);
    fs::create_directories(dir / "home", ec);
    if (ec) {
      return ErrorResponse(
          {500, "INTERNAL_ERROR", "cannot create sandbox storage: " + ec.message(), {}});
    }
    fs::permissions(dir / "home",
                    fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                        fs::perms::others_read | fs::perms::others_exec,
                    ec);
    SandboxRec sb;
    sb.id = id;
    sb.display_name = f.display_name.value_or("");
    sb.inactivity_timeout = f.inactivity_timeout;
    sb.image_uri = f.image_uri.value_or("");
    sb.custom_tags = f.custom_tags.value_or(std::map<std::string, std::string>{});
    auto now = SteadyClock::now();
    sb.state = State::kPending;
    sb.transition_at = now + options_.pending_delay;
    sb.create_time = sb.update_time = SystemClock::now();
    sb.last_activity = now;
    WipeScratchLocked(sb);
    json out = SandboxJson(sb);
    sandboxes_.emplace(id, std::move(sb));
    cv_.notify_all();
    return Ok(out);
  }

  HttpResponse Get(const std::string& id) {
    std::lock_guard lock(mu_);
    SandboxRec* sb = FindLocked(id);
    if (sb == nullptr) {
      return ErrorResponse(SandboxNotFound(id));
    }
    return Ok(SandboxJson(*sb));
  }

  HttpResponse List(const HttpRequest& req) {
    auto size = ParsePageSize(req, kDefaultPageSize);
    if (auto* e = std::get_if<ApiError>(&size)) {
      return ErrorResponse(*e);
    }
    int page_size = std::get<int>(size);
    std::string start;
    if (auto t = req.query.find("page_token"); t != req.query.end() && !t->second.empty()) {
      auto decoded = Unhex(t->second);
      if (!decoded) {
        return ErrorResponse(BadParam("Invalid page_token"));
      }
      start = *decoded;
    }
    std::lock_guard lock(mu_);
    AdvanceLocked(SteadyClock::now());
    json list = json::array();
    // Pages are ordered by id and the token is the next id, so deletes between pages never
    // make a client skip a sandbox that still exists.
    auto it = sandboxes_.lower_bound(start);
    for (; it != sandboxes_.end() && static_cast<int>(list.size()) < page_size; ++it) {
      list.push_back(SandboxJson(it->second));
    }
    json out = json::object();
    if (!list.empty()) {
      out["sandboxes"] = list;
    }
    if (it != sandboxes_.end()) {
      out["next_page_token"] = Hex(it->first);
    }
    return Ok(out);
  }

  HttpResponse Update(const std::string& id, const HttpRequest& req) {
    auto q = req.query.find("update_mask");
    std::string mask = q == req.query.end() ? std::string() : q->second;
    std::set<std::string> paths;
    for (std::size_t start = 0; start <= mask.size();) {
      std::size_t comma = mask.find(',', start);
      if (comma == std::string::npos) {
        comma = mask.size();
      }
      std::string p = Trim(std::string_view(mask).substr(start, comma - start));
      if (!p.empty()) {
        paths.insert(p);
      }
      start = comma + 1;
    }
    if (paths.empty()) {
      return ErrorResponse(BadParam("update_mask must not be empty"));
    }
    bool want_name = false, want_timeout = false;
    for (const auto& p : paths) {
      if (p == "display_name" ||
          (options_.accept_legacy_mask_paths && p == "metadata.display_name")) {
        want_name = true;
      } else if (p == "spec.compute.inactivity_timeout" ||
                 (options_.accept_legacy_mask_paths && p == "spec")) {
        want_timeout = true;
      } else {
        return ErrorResponse(BadParam("Invalid update_mask path '" + p +
                                      "': only display_name and spec.compute.inactivity_timeout "
                                      "can be updated"));
      }
    }
    auto parsed = ParseObject(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return ErrorResponse(*e);
    }
    json body = std::get<json>(parsed);
    if (options_.accept_legacy_mask_paths && !body.contains("display_name") &&
        body.contains("metadata") && body["metadata"].is_object() &&
        body["metadata"].contains("display_name")) {
      body["display_name"] = body["metadata"]["display_name"];
      body["metadata"].erase("display_name");
    }
    SandboxFields f;
    if (auto e = ParseSandboxFields(body, f)) {
      return ErrorResponse(*e);
    }

    std::lock_guard lock(mu_);
    SandboxRec* sb = FindLocked(id);
    if (sb == nullptr) {
      return ErrorResponse(SandboxNotFound(id));
    }
    // FieldMask semantics: a masked path absent from the body is cleared.
    if (want_name) {
      sb->display_name = f.display_name.value_or("");
    }
    if (want_timeout) {
      sb->inactivity_timeout = f.inactivity_timeout;
    }
    sb->update_time = SystemClock::now();
    cv_.notify_all();
    return Ok(SandboxJson(*sb));
  }

  HttpResponse Delete(const std::string& id) {
    std::lock_guard lock(mu_);
    SandboxRec* sb = FindLocked(id);
    if (sb == nullptr || sb->deleting) {
      return ErrorResponse(SandboxNotFound(id));
    }
    if (options_.delete_via_stopping) {
      sb->deleting = true;
      BeginStopLocked(*sb, SteadyClock::now());
    } else {
      KillSandboxLocked(*sb);
      std::error_code ec;
      fs::remove_all(SandboxDir(id), ec);
      sandboxes_.erase(id);
    }
    return Ok(json::object());
  }

  HttpResponse StartSandbox(const std::string& id, const HttpRequest& req) {
    auto parsed = ParseObject(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return ErrorResponse(*e);
    }
    std::lock_guard lock(mu_);
    SandboxRec* sb = FindLocked(id);
    // Documented: NOT_FOUND unless a *stopped* sandbox of that name exists (§3 row 6).
    if (sb == nullptr || sb->state != State::kStopped || sb->deleting) {
      return ErrorResponse(NotFound("No stopped sandbox 'sandboxes/" + id + "' to start"));
    }
    auto now = SteadyClock::now();
    sb->state = State::kPending;
    sb->transition_at = now + options_.pending_delay;
    sb->last_activity = now;
    ++sb->boot;
    if (options_.reset_create_time_on_start) {
      sb->create_time = SystemClock::now();
    }
    WipeScratchLocked(*sb);
    cv_.notify_all();
    return Ok(SandboxJson(*sb));
  }

  HttpResponse StopSandbox(const std::string& id, const HttpRequest& req) {
    auto parsed = ParseObject(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return ErrorResponse(*e);
    }
    std::lock_guard lock(mu_);
    SandboxRec* sb = FindLocked(id);
    if (sb == nullptr) {
      return ErrorResponse(SandboxNotFound(id));
    }
    // §13.6: stop on STOPPING/STOPPED is a no-op returning the current state (lakebox).
    if (sb->state == State::kRunning || sb->state == State::kPending) {
      BeginStopLocked(*sb, SteadyClock::now());
    }
    return Ok(SandboxJson(*sb));
  }

  internal::SpawnSpec MakeSpawnSpec(const SandboxRec& sb, const std::string& cmd,
                                    const std::vector<std::string>& args,
                                    const std::map<std::string, std::string>& envs) const {
    const bool ns = isolation_ == internal::Isolation::kMountNamespace;
    const fs::path dir = SandboxDir(sb.id);
    const std::string real_home = (dir / "home").string();
    const std::string real_tmp = (dir / "tmp").string();
    std::map<std::string, std::string> env;
    env["PATH"] = std::string(ns ? std::string(kNamespaceBinDir) : bin_dir_.string()) + ":" +
                  std::string(kSystemPath);
    env["LANG"] = "C.UTF-8";
    env["SBX_SANDBOX_HOME"] = ns ? std::string(kSandboxHome) : real_home;
    if (!ns) {
      env["TMPDIR"] = real_tmp;
    }
    if (!options_.exec_home_env.empty()) {
      env["HOME"] = options_.exec_home_env;
    }
    for (const auto& [k, v] : envs) {
      env[k] = v;  // envs are merged over the default env
    }
    env[std::string(kMarkerName)] = instance_id_ + "/" + sb.id;  // cannot be overridden

    internal::SpawnSpec spec;
    spec.cmd = cmd;
    spec.args = args;
    if (!ns) {
      // Without a namespace, /home/sandbox-agent is rewritten to the sandbox's real home.
      ReplaceAll(spec.cmd, kSandboxHome, real_home);
      for (auto& a : spec.args) {
        ReplaceAll(a, kSandboxHome, real_home);
      }
      for (auto& [k, v] : env) {
        if (k != kMarkerName && k != "SBX_SANDBOX_HOME") {
          ReplaceAll(v, kSandboxHome, real_home);
        }
      }
    }
    spec.search_path = env["PATH"];
    for (const auto& [k, v] : env) {
      spec.env.push_back(k + "=" + v);
    }
    spec.isolation = isolation_;
    spec.cwd = ns ? std::string(kSandboxHome) : real_home;
    if (ns) {
      spec.binds = {{real_home, std::string(kSandboxHome)},
                    {bin_dir_.string(), std::string(kNamespaceBinDir)},
                    {real_tmp, "/tmp"}};
    }
    return spec;
  }

  HttpResponse ExecSync(const std::string& id, const HttpRequest& req) {
    auto parsed = ParseObject(req.body);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      return ErrorResponse(*e);
    }
    const json& body = std::get<json>(parsed);
    if (!body.contains("cmd") || !body["cmd"].is_string() ||
        body["cmd"].get<std::string>().empty()) {
      return ErrorResponse(BadParam("cmd is required and must be a non-empty string"));
    }
    std::string cmd = body["cmd"].get<std::string>();
    std::vector<std::string> args;
    if (body.contains("args")) {
      if (!body["args"].is_array()) {
        return ErrorResponse(BadParam("args must be an array of strings"));
      }
      for (const auto& a : body["args"]) {
        if (!a.is_string()) {
          return ErrorResponse(BadParam("args must be an array of strings"));
        }
        args.push_back(a.get<std::string>());
      }
    }
    std::map<std::string, std::string> envs;
    if (body.contains("envs")) {
      if (!body["envs"].is_object()) {
        return ErrorResponse(BadParam("envs must be an object of strings"));
      }
      for (auto it = body["envs"].begin(); it != body["envs"].end(); ++it) {
        if (!it.value().is_string() || it.key().empty() ||
            it.key().find('=') != std::string::npos) {
          return ErrorResponse(BadParam("envs must map variable names to strings"));
        }
        envs[it.key()] = it.value().get<std::string>();
      }
    }
    Duration timeout = options_.default_execution_timeout;
    if (body.contains("execution_timeout")) {
      // The reference says INVALID_ARGUMENT with an undocumented HTTP status; Databricks REST
      // reports invalid arguments as 400 INVALID_PARAMETER_VALUE, so that is what we send.
      auto d = ParseProtoDuration(body["execution_timeout"]);
      if (!d) {
        return ErrorResponse(
            BadParam("execution_timeout must be a non-negative duration like \"30s\""));
      }
      if (d->count() > 0) {
        timeout = std::min(*d, options_.max_execution_timeout);
      }
    }

    std::string command_id = RandomHex(16);
    std::optional<internal::Process> process;
    {
      std::lock_guard lock(mu_);
      if (stopped_) {
        return ErrorResponse({503, "TEMPORARILY_UNAVAILABLE", "Emulator is shutting down", {}});
      }
      SandboxRec* sb = FindLocked(id);
      if (sb == nullptr || sb->deleting) {
        return ErrorResponse(SandboxNotFound(id));
      }
      // §13.3: undocumented. We answer 400 INVALID_STATE (an error_code the SDKs map to
      // BadRequest) rather than block or auto-start.
      if (sb->state != State::kRunning) {
        return ErrorResponse({400,
                              "INVALID_STATE",
                              "Sandbox 'sandboxes/" + id + "' is not running (state " +
                                  std::string(StateName(sb->state)) + ")",
                              {}});
      }
      std::vector<std::string> env_names;
      for (const auto& [k, v] : envs) {
        env_names.push_back(k);
      }
      exec_log_.push_back({id, command_id, cmd, args, env_names});
      // Spawned under the lock, so a concurrent stop either sees this pid or refuses us first.
      process.emplace(internal::Process::Spawn(MakeSpawnSpec(*sb, cmd, args, envs)));
      CommandRec rec{command_id, cmd, args, {}, false, {}};
      if (process->pid() > 0) {
        rec.pid = process->pid();
        sb->exec_pgids.insert(process->pid());
      }
      sb->commands.push_back(rec);
      ++sb->running_execs;
      if (options_.exec_counts_as_activity) {
        sb->last_activity = SteadyClock::now();
      }
    }

    internal::ProcessResult result = process->Wait(timeout, options_.exec_output_cap_bytes);
    if (!result.started && !process->fork_error().empty()) {
      result.spawn_error = process->fork_error();
    }
    pid_t pgid = process->pid();
    process.reset();

    {
      std::lock_guard lock(mu_);
      auto it = sandboxes_.find(id);
      if (it != sandboxes_.end()) {
        SandboxRec& sb = it->second;
        sb.exec_pgids.erase(pgid);
        --sb.running_execs;
        if (options_.exec_counts_as_activity) {
          sb.last_activity = SteadyClock::now();
        }
        for (auto& c : sb.commands) {
          if (c.command_id == command_id) {
            c.finished = true;
            c.exit_code = result.exit_code;
            if (!result.started) {
              c.pid.reset();
            }
          }
        }
        cv_.notify_all();
      }
    }

    json out = {{"command_id", command_id}};
    if (!result.started) {
      out["status"] = "EXECUTE_COMMAND_STATUS_FAILED";
      out["stderr"] = "failed to start '" + cmd + "': " + result.spawn_error;
      return Ok(out);
    }
    out["status"] =
        result.timed_out ? "EXECUTE_COMMAND_STATUS_TIMED_OUT" : "EXECUTE_COMMAND_STATUS_COMPLETED";
    if (result.exit_code) {
      out["exit_code"] = *result.exit_code;
    }
    // proto3 JSON: empty strings and false booleans are omitted.
    if (!result.stdout_text.empty()) {
      out["stdout"] = result.stdout_text;
    }
    if (!result.stderr_text.empty()) {
      out["stderr"] = result.stderr_text;
    }
    if (result.truncated) {
      out["truncated"] = true;
    }
    return Ok(out);
  }

  HttpResponse ListCommands(const std::string& id, const HttpRequest& req) {
    auto size = ParsePageSize(req, std::numeric_limits<int>::max());  // all if no size given
    if (auto* e = std::get_if<ApiError>(&size)) {
      return ErrorResponse(*e);
    }
    int page_size = std::get<int>(size);
    std::size_t offset = 0;
    if (auto t = req.query.find("page_token"); t != req.query.end() && !t->second.empty()) {
      try {
        std::size_t used = 0;
        offset = std::stoul(t->second.substr(1), &used);
        if (t->second[0] != 'c' || used + 1 != t->second.size()) {
          throw std::invalid_argument("x");
        }
      } catch (const std::exception&) {
        return ErrorResponse(BadParam("Invalid page_token"));
      }
    }
    std::lock_guard lock(mu_);
    SandboxRec* sb = FindLocked(id);
    if (sb == nullptr) {
      return ErrorResponse(SandboxNotFound(id));
    }
    if (options_.list_commands_counts_as_activity && sb->state == State::kRunning) {
      sb->last_activity = SteadyClock::now();
      cv_.notify_all();
    }
    json commands = json::array();
    std::size_t i = offset;
    for (; i < sb->commands.size() && static_cast<int>(commands.size()) < page_size; ++i) {
      const CommandRec& c = sb->commands[i];
      json j = {{"command_id", c.command_id}, {"cmd", c.cmd}};
      if (!c.args.empty()) {
        j["args"] = c.args;
      }
      if (c.pid) {
        j["pid"] = std::to_string(*c.pid);  // proto3 JSON int64 is a string
      }
      if (c.finished) {
        j["finished"] = true;
      }
      if (c.finished && c.exit_code) {
        j["exit_code"] = *c.exit_code;
      }
      commands.push_back(j);
    }
    json out = json::object();
    if (!commands.empty()) {
      out["commands"] = commands;
    }
    if (i < sb->commands.size()) {
      out["next_page_token"] = "c" + std::to_string(i);
    }
    return Ok(out);
  }

  // ---- admin API (/_emulator/) -------------------------------------------------------------

  HttpResponse AdminError(int status, const std::string& message) {
    return ErrorResponse({status, internal::DefaultErrorCode(status), message, {}});
  }

  HttpResponse HandleAdmin(const HttpRequest& req) {
    const std::string& p = req.path;
    const std::string& m = req.method;
    if (p == "/_emulator/info" && m == "GET") {
      return Ok({{"instance_id", instance_id_},
                 {"isolation", isolation()},
                 {"root_dir", root_.string()},
                 {"bin_dir", bin_dir_.string()},
                 {"databricks_url", base_url()}});
    }
    if (p == "/_emulator/exec_log") {
      std::lock_guard lock(mu_);
      if (m == "DELETE") {
        exec_log_.clear();
        return Ok(json::object());
      }
      json entries = json::array();
      for (const auto& e : exec_log_) {
        entries.push_back({{"sandbox_id", e.sandbox_id},
                           {"command_id", e.command_id},
                           {"cmd", e.cmd},
                           {"args", e.args},
                           {"env_names", e.env_names}});
      }
      return Ok({{"commands", entries}});
    }
    if (p == "/_emulator/reset" && m == "POST") {
      json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
      bool wipe = body.is_object() && body.value("sandboxes", false);
      faults_->Reset();
      std::lock_guard lock(mu_);
      exec_log_.clear();
      if (wipe) {
        for (auto& [id, sb] : sandboxes_) {
          KillSandboxLocked(sb);
          std::error_code ec;
          fs::remove_all(SandboxDir(id), ec);
        }
        sandboxes_.clear();
      }
      return Ok(json::object());
    }
    const std::string prefix = "/_emulator/sandboxes/";
    if (p.starts_with(prefix)) {
      std::string rest = p.substr(prefix.size());
      std::string id = rest.substr(0, rest.find('/'));
      std::string action = rest.size() > id.size() ? rest.substr(id.size() + 1) : "";
      std::lock_guard lock(mu_);
      SandboxRec* sb = FindLocked(id);
      if (sb == nullptr) {
        return ErrorResponse(SandboxNotFound(id));
      }
      if (action.empty() && m == "GET") {
        auto now = SteadyClock::now();
        return Ok({{"sandbox_id", id},
                   {"state", StateName(sb->state)},
                   {"boot", sb->boot},
                   {"home_dir", (SandboxDir(id) / "home").string()},
                   {"tmp_dir", (SandboxDir(id) / "tmp").string()},
                   {"running_execs", sb->running_execs},
                   // What the idle timer uses: "off" when nothing auto-stops the sandbox.
                   {"inactivity_timeout", EffectiveTimeoutLocked(*sb).count() > 0
                                              ? FormatDuration(EffectiveTimeoutLocked(*sb))
                                              : std::string("off")},
                   {"idle_ms",
                    std::chrono::duration_cast<std::chrono::milliseconds>(now - sb->last_activity)
                        .count()}});
      }
      if (action == "stop" && m == "POST") {
        // Behind the client's back, exactly like an idle auto-stop.
        if (sb->state == State::kRunning || sb->state == State::kPending) {
          BeginStopLocked(*sb, SteadyClock::now());
        }
        return Ok(SandboxJson(*sb));
      }
      if (action == "kill_processes" && m == "POST") {
        for (pid_t pg : sb->exec_pgids) {
          ::kill(-pg, SIGKILL);
        }
        int killed = internal::KillProcessesWithEnv(Marker(id));
        return Ok({{"killed", killed}});
      }
      if (action == "processes" && m == "GET") {
        return Ok({{"pids", internal::FindProcessesWithEnv(Marker(id))}});
      }
      return AdminError(404, "unknown admin action '" + action + "'");
    }
    if (auto r = faults_->HandleAdmin(req)) {
      return *r;
    }
    return AdminError(404, "unknown admin endpoint " + m + " " + p);
  }

  Options options_;
  std::unique_ptr<internal::FaultInjector> owned_faults_;
  internal::FaultInjector* faults_ = nullptr;
  internal::HttpServer server_;
  std::string instance_id_;
  fs::path root_;
  fs::path bin_dir_;
  internal::Isolation isolation_ = internal::Isolation::kPathRewrite;
  std::string host_ = "127.0.0.1";
  int port_ = 0;

  std::mutex rng_mu_;
  std::mt19937_64 rng_;  // Guarded by rng_mu_.

  std::mutex mu_;
  std::condition_variable_any cv_;
  bool stopped_ = false;                         // Guarded by mu_.
  std::map<std::string, SandboxRec> sandboxes_;  // Guarded by mu_.
  std::map<std::string, IssuedToken> issued_;    // Guarded by mu_.
  std::vector<ExecLogEntry> exec_log_;           // Guarded by mu_.
  std::jthread timer_;
};

DatabricksEmulator::DatabricksEmulator(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
DatabricksEmulator::~DatabricksEmulator() = default;
api::StatusOr<int> DatabricksEmulator::Start(const std::string& host, int port) {
  return impl_->Start(host, port);
}
void DatabricksEmulator::Stop() { impl_->Stop(); }
std::string DatabricksEmulator::base_url() const { return impl_->base_url(); }
const std::string& DatabricksEmulator::instance_id() const { return impl_->instance_id(); }
std::string DatabricksEmulator::isolation_mechanism() const { return impl_->isolation(); }
internal::FaultInjector& DatabricksEmulator::faults() { return impl_->faults(); }

}  // namespace sbx::emulator
