#include "emulator/executor/standin_executor.h"

#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_client.h>
#include <cpprest/ws_client.h>
#include <pplx/threadpool.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "emulator/executor/internal/json_rpc_server.h"
#include "emulator/internal/http_server.h"
#include "emulator/openai/openai_emulator.h"

namespace sbx::emulator {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace wsc = web::websockets::client;

std::string ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

std::string StatusText(int status) {
  std::string reason = ReasonPhrase(status);
  return std::to_string(status) + (reason.empty() ? "" : " " + reason);
}

struct RegistryAnswer {
  int exit_code = 0;  // 0 = ok
  std::string url;
  bool retry = false;  // 503 registration_conflict / 502 authentication_service_unavailable
};

// ---- registration -----------------------------------------------------------------------------

RegistryAnswer Register(const StandinExecutorOptions& o, std::ostream& err) {
  std::string base = o.remote;
  while (!base.empty() && base.back() == '/') {
    base.pop_back();
  }
  const std::string url = base + "/cloud/environment/" + o.environment_id + "/register";
  RegistryAnswer answer;
  int status = 0;
  std::string body;
  try {
    web::http::client::http_client_config config;
    config.set_timeout(o.request_timeout);
    web::http::client::http_client client(url, config);
    web::http::http_request req(web::http::methods::POST);
    req.headers().add("Authorization", "Bearer " + o.api_key);
    json payload = {{"security_profile", kPlainJsonRpcProfile}, {"executor_public_key", nullptr}};
    if (!o.name.empty()) {
      payload["name"] = o.name;
    }
    req.set_body(payload.dump(), "application/json");
    auto resp = client.request(req).get();
    status = resp.status_code();
    body = resp.extract_string(true).get();
  } catch (const std::exception&) {
    err << "Error: environment registry request failed: error sending request for url (" << url
        << ")" << std::endl;
    answer.exit_code = 1;
    return answer;
  }
  if (status >= 200 && status < 300) {
    json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      err << "Error: failed to serialize or deserialize exec-server JSON: expected value"
          << std::endl;
      answer.exit_code = 1;
      return answer;
    }
    for (const char* field :
         {"environment_id", "url", "security_profile", "executor_registration_id"}) {
      if (!j.contains(field) || !j[field].is_string()) {
        err << "Error: failed to serialize or deserialize exec-server JSON: missing field `"
            << field << "`" << std::endl;
        answer.exit_code = 1;
        return answer;
      }
    }
    if (j["environment_id"] != o.environment_id) {
      err << "Error: exec-server protocol error: environment registry returned a different "
             "environment id"
          << std::endl;
      answer.exit_code = 1;
      return answer;
    }
    if (j["security_profile"] != kPlainJsonRpcProfile) {
      err << "Error: exec-server protocol error: unsupported security profile `"
          << j["security_profile"].get<std::string>() << "`" << std::endl;
      answer.exit_code = 1;
      return answer;
    }
    answer.url = j["url"].get<std::string>();
    return answer;
  }
  // {"error":{"code","message"}} → message; else the raw trimmed body (≤ 4096 chars).
  std::string code;
  std::string message;
  json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    if (e.contains("code") && e["code"].is_string()) {
      code = e["code"].get<std::string>();
    }
    if (e.contains("message") && e["message"].is_string()) {
      message = e["message"].get<std::string>();
    }
  }
  if (message.empty()) {
    message = internal::Trim(body).substr(0, 4096);
  }
  if ((status == 503 && code == "registration_conflict") ||
      (status == 502 && code == "authentication_service_unavailable")) {
    answer.retry = true;
    return answer;
  }
  answer.exit_code = 1;
  if (status == 401 || status == 403) {
    err << "Error: environment registry authentication error: environment registry "
           "authentication failed ("
        << StatusText(status) << "): " << (message.empty() ? "empty error body" : message)
        << std::endl;
  } else {
    err << "Error: environment registry request failed (" << StatusText(status)
        << (code.empty() ? "" : ", " + code)
        << "): " << (message.empty() ? "empty or malformed error body" : message) << std::endl;
  }
  return answer;
}

// Sleeps `d` or until stop; false if stopped.
bool SleepFor(std::chrono::milliseconds d, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  return !cv.wait_for(lock, stop, d, [] { return false; });
}

std::chrono::milliseconds Jitter(std::chrono::milliseconds d) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return d + std::chrono::milliseconds(rng() % (d.count() / 4 + 1));
}

}  // namespace

std::string CheckRemoteHost(const std::string& remote) {
  constexpr char kRefused[] =
      "remote exec-server API-key authentication is restricted to HTTPS openai.com and "
      "openai.org hosts and subdomains or loopback hosts";
  try {
    web::uri uri(remote);
    const std::string& scheme = uri.scheme();
    std::string host = uri.host();
    std::transform(host.begin(), host.end(), host.begin(), ::tolower);
    if (host.size() > 2 && host.front() == '[') {
      host = host.substr(1, host.size() - 2);
    }
    bool loopback = host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
    if ((scheme == "http" || scheme == "https") && loopback) {
      return "";
    }
    auto ends_with = [&](const std::string& suffix) {
      return host == suffix.substr(1) ||
             (host.size() > suffix.size() &&
              host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0);
    };
    if (scheme == "https" && (ends_with(".openai.com") || ends_with(".openai.org"))) {
      return "";
    }
    return kRefused;
  } catch (const std::exception&) {
    return kRefused;
  }
}

namespace {

// One link to the registry: connect, serve JSON-RPC frames until the link closes (or `stop`),
// then close it and detach the server from `sessions`. False if it did not connect within the
// request timeout.
bool ServeOneLink(const std::string& url, internal::executor::ExecSessions& sessions,
                  const StandinExecutorOptions& options, std::stop_token stop) {
  // Shared with the client's callbacks, which may outlive one loop iteration.
  struct LinkState {
    std::mutex mu;
    std::condition_variable_any cv;
    bool closed = false;
  };
  auto state = std::make_shared<LinkState>();
  auto client = std::make_shared<wsc::websocket_callback_client>();
  std::weak_ptr<wsc::websocket_callback_client> weak = client;
  auto send = [weak](const std::string& text) {
    if (auto c = weak.lock()) {
      wsc::websocket_outgoing_message msg;
      msg.set_utf8_message(text);
      try {
        c->send(msg).then([](const pplx::task<void>& t) {
          try {
            t.get();
          } catch (...) {
            // The socket is gone; the close handler reconnects.
          }
        });
      } catch (...) {
      }
    }
  };
  auto server = std::make_shared<internal::executor::JsonRpcServer>(sessions, send);
  client->set_message_handler([server, weak](const wsc::websocket_incoming_message& msg) {
    if (msg.message_type() != wsc::websocket_message_type::text_message) {
      return;
    }
    std::string text;
    try {
      text = msg.extract_string().get();
    } catch (...) {
      return;
    }
    if (!server->OnFrame(text)) {
      if (auto c = weak.lock()) {
        c->close().then([](const pplx::task<void>& t) {
          try {
            t.get();
          } catch (...) {
          }
        });
      }
    }
  });
  client->set_close_handler(
      [state](wsc::websocket_close_status, const std::string&, const std::error_code&) {
        std::lock_guard lock(state->mu);
        state->closed = true;
        state->cv.notify_all();
      });

  auto connected = std::make_shared<std::promise<bool>>();
  auto future = connected->get_future();
  try {
    client->connect(web::uri(url)).then([connected](const pplx::task<void>& t) {
      try {
        t.get();
        connected->set_value(true);
      } catch (...) {
        connected->set_value(false);
      }
    });
  } catch (const std::exception&) {
    connected->set_value(false);
  }
  const bool ok =
      future.wait_for(options.request_timeout) == std::future_status::ready && future.get();
  if (ok) {
    std::unique_lock lock(state->mu);
    state->cv.wait(lock, stop, [&] { return state->closed; });
  }
  try {
    client->close().wait();
  } catch (...) {
  }
  // As in codex, the session's children survive a dropped link for the resume window: the
  // harness may resume the session on the next connection (initialize {resumeSessionId}).
  // (Detached here, not by the server's destructor: cpprest may keep the handler, and with it
  // the server, alive after `sessions` is gone.)
  server->Detach();
  return ok;
}

}  // namespace

int RunStandinExecutor(const StandinExecutorOptions& options, std::ostream& err,
                       std::stop_token stop) {
  // One executor per emulated sandbox: cpprest's default pool of 40 threads each made 1,000
  // sandboxes exhaust the machine's pid space (45 threads a process). Two are plenty for one
  // WebSocket and a registration call. (Too late if cpprest already ran in this process: then the
  // existing pool is kept.)
  try {
    crossplat::threadpool::initialize_with_threads(2);
  } catch (const std::exception&) {
  }
  if (options.api_key.empty()) {
    err << "Error: remote exec-server registration requires ChatGPT authentication or API key "
           "authentication; run `codex login` or set CODEX_API_KEY"
        << std::endl;
    return 1;
  }
  if (std::string refused = CheckRemoteHost(options.remote); !refused.empty()) {
    err << "Error: " << refused << std::endl;
    return 1;
  }
  if (options.environment_id.empty()) {
    err << "Error: --remote requires --environment-id" << std::endl;
    return 1;
  }

  // Registration (with codex's two retried codes: 500ms·2^min(n,4), capped at 5 s).
  auto register_once = [&]() -> RegistryAnswer {
    for (int attempt = 0;; ++attempt) {
      RegistryAnswer a = Register(options, err);
      if (!a.retry) {
        return a;
      }
      auto delay = std::min<std::chrono::milliseconds>(500ms * (1 << std::min(attempt, 4)), 5s);
      if (!SleepFor(Jitter(delay), stop)) {
        return RegistryAnswer{0, "", false};
      }
    }
  };
  RegistryAnswer reg = register_once();
  if (reg.exit_code != 0) {
    return 1;
  }
  if (stop.stop_requested()) {
    return 0;
  }

  // The exec-server sessions outlive a connection for the resume window (§7.5).
  internal::executor::ExecSessions sessions(options.resume_window);
  auto backoff = options.first_reconnect_delay;
  int connect_failures = 0;
  while (!stop.stop_requested()) {
    if (ServeOneLink(reg.url, sessions, options, stop)) {
      connect_failures = 0;
      backoff = options.first_reconnect_delay;
    } else if (++connect_failures >= 3) {
      // The registration may be stale (e.g. the registry restarted): register again.
      connect_failures = 0;
      reg = register_once();
      if (reg.exit_code != 0) {
        return 1;  // `sessions` kills the children
      }
    }
    if (stop.stop_requested()) {
      break;  // `sessions` kills the children
    }
    if (!SleepFor(Jitter(backoff), stop)) {
      break;
    }
    backoff = std::min(backoff * 2, options.max_reconnect_delay);
  }
  return 0;
}

}  // namespace sbx::emulator
