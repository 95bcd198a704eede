#define _TURN_OFF_PLATFORM_STRING
#include "controller/server/health_server.h"

#include <cpprest/http_listener.h>

#include <charconv>
#include <condition_variable>
#include <exception>
#include <mutex>

#include "controller/server/internal/free_port.h"
#include "controller/server/log.h"

namespace sbx::controller {
namespace {

using web::http::http_request;
using web::http::methods;
using web::http::status_code;
using web::http::status_codes;
using web::http::experimental::listener::http_listener;

constexpr int kPortAttempts = 5;

struct HostPort {
  std::string host;
  int port = 0;
};

api::StatusOr<HostPort> ParseAddr(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos) {
    return api::InvalidArgumentError("metrics address '" + addr + "': want host:port");
  }
  std::string host = addr.substr(0, colon);
  const std::string port_text = addr.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return api::InvalidArgumentError("metrics address '" + addr +
                                     "': write an IPv6 address in brackets, [::1]:9090");
  }
  if (host.empty()) {
    host = "0.0.0.0";
  }
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return api::InvalidArgumentError("metrics address '" + addr + "': bad port '" + port_text +
                                     "'");
  }
  return HostPort{host, port};
}

std::string UriFor(const HostPort& hp) {
  const bool v6 = hp.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + hp.host + "]" : hp.host) + ":" + std::to_string(hp.port);
}

}  // namespace

// State the request handler needs; shared with the handler so that a request dispatched while
// Stop() runs finds it alive and sees `stopping`.
struct HealthServer::Shared {
  Metrics& metrics;
  Readiness readiness;
  std::mutex mu;
  std::condition_variable idle;
  int in_flight = 0;      // Guarded by mu.
  bool stopping = false;  // Guarded by mu.

  void Handle(http_request request) {
    {
      std::lock_guard lock(mu);
      if (stopping) {
        Reply(request, status_codes::ServiceUnavailable, "shutting down\n", "text/plain");
        return;
      }
      ++in_flight;
    }
    Serve(request);
    std::lock_guard lock(mu);
    if (--in_flight == 0) {
      idle.notify_all();
    }
  }

  void Serve(http_request& request) {
    const std::string path = request.relative_uri().path();
    const bool known = path == "/healthz" || path == "/readyz" || path == "/metrics";
    if (!known) {
      Reply(request, status_codes::NotFound, "not found\n", "text/plain");
      return;
    }
    if (request.method() != methods::GET && request.method() != methods::HEAD) {
      Reply(request, status_codes::MethodNotAllowed, "method not allowed\n", "text/plain");
      return;
    }
    if (path == "/healthz") {
      Reply(request, status_codes::OK, "ok\n", "text/plain");
    } else if (path == "/readyz") {
      std::pair<bool, std::string> ready{false, ""};
      try {
        ready = readiness();
      } catch (const std::exception& e) {
        ready = {false, std::string("readiness check failed: ") + e.what()};
      } catch (...) {
        ready = {false, "readiness check failed"};
      }
      if (ready.first) {
        Reply(request, status_codes::OK, "ok\n", "text/plain");
      } else {
        Reply(request, status_codes::ServiceUnavailable,
              (ready.second.empty() ? std::string("not ready") : ready.second) + "\n",
              "text/plain");
      }
    } else {
      std::string body;
      try {
        body = metrics.Render();
      } catch (const std::exception& e) {
        log::Error("metrics_render_failed", {{"error", e.what()}});
        Reply(request, status_codes::InternalError, "metrics unavailable\n", "text/plain");
        return;
      }
      Reply(request, status_codes::OK, body, "text/plain; version=0.0.4; charset=utf-8");
    }
  }

  static void Reply(http_request& request, status_code code, const std::string& body,
                    const std::string& content_type) {
    try {
      // The reply completes asynchronously; a client gone away is not our problem.
      request.reply(code, body, content_type).then([](const pplx::task<void>& t) {
        try {
          t.get();
        } catch (...) {
        }
      });
    } catch (const std::exception& e) {
      log::Debug("health_reply_failed", {{"error", e.what()}});
    }
  }
};

class HealthServer::Listener {
 public:
  explicit Listener(const std::string& uri) : listener_(uri) {}
  http_listener& get() { return listener_; }

 private:
  http_listener listener_;
};

HealthServer::HealthServer(Metrics& metrics, Readiness readiness)
    : shared_(std::make_shared<Shared>(metrics, std::move(readiness))) {}

HealthServer::~HealthServer() { Stop(); }

api::StatusOr<int> HealthServer::Start(const std::string& addr) {
  if (listener_) {
    return api::FailedPreconditionError("health server already started");
  }
  ASSIGN_OR_RETURN(HostPort hp, ParseAddr(addr));
  const bool pick = hp.port == 0;
  const int wanted = hp.port;
  std::string last_error;
  for (int attempt = 0; attempt < (pick ? kPortAttempts : 1); ++attempt) {
    // Also for an explicit port: opening a cpprest listener on a port this process already
    // listens on fails AND unregisters the existing listener, so never let cpprest find out.
    ASSIGN_OR_RETURN(hp.port, server_internal::ProbeBind(hp.host, wanted));
    try {
      auto listener = std::make_unique<Listener>(UriFor(hp));
      std::shared_ptr<Shared> shared = shared_;
      listener->get().support([shared](const http_request& request) { shared->Handle(request); });
      listener->get().open().wait();
      {
        std::lock_guard lock(shared_->mu);
        shared_->stopping = false;
      }
      listener_ = std::move(listener);
      return hp.port;
    } catch (const std::exception& e) {
      // Most likely the port was taken between the probe and open: pick another.
      last_error = e.what();
    }
  }
  return api::UnavailableError("cannot listen on " + addr + ": " + last_error);
}

void HealthServer::Stop() {
  if (!listener_) {
    return;
  }
  {
    std::lock_guard lock(shared_->mu);
    shared_->stopping = true;
  }
  try {
    listener_->get().close().wait();
  } catch (const std::exception& e) {
    log::Warn("health_server_close_failed", {{"error", e.what()}});
  }
  std::unique_lock lock(shared_->mu);
  shared_->idle.wait(lock, [this] { return shared_->in_flight == 0; });
  lock.unlock();
  listener_.reset();
}

}  // namespace sbx::controller
