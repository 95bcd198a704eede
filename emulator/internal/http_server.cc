#include "emulator/internal/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <list>
#include <mutex>
#include <thread>

#include "api/percent_encoding.h"
#include "api/text.h"

namespace sbx::emulator::internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::uint64_t kMaxBodyBytes = 64ull << 20;

using api::Lower;

// One request/response exchange on a connection thread's socket.
class BeastExchange : public HttpExchange {
 public:
  BeastExchange(tcp::socket& socket, const HttpRequest& request, unsigned version, bool keep_alive)
      : socket_(socket), request_(request), version_(version), keep_alive_(keep_alive) {}

  const HttpRequest& request() const override { return request_; }
  bool responded() const override { return responded_; }
  bool streamed() const { return streamed_; }
  bool failed() const { return failed_; }

  bool Respond(const HttpResponse& r) override {
    if (responded_) {
      return false;
    }
    responded_ = true;
    http::response<http::string_body> res{static_cast<http::status>(r.status), version_};
    res.set(http::field::server, "sbx-emulator");
    if (!r.content_type.empty()) {
      res.set(http::field::content_type, r.content_type);
    }
    for (const auto& [k, v] : r.headers) {
      res.set(k, v);
    }
    res.keep_alive(keep_alive_);
    res.body() = r.body;
    res.prepare_payload();
    beast::error_code ec;
    http::write(socket_, res, ec);
    failed_ = static_cast<bool>(ec);
    return !ec;
  }

  bool StartStream(const HttpResponse& head) override {
    if (responded_) {
      return false;
    }
    responded_ = true;
    streamed_ = true;
    http::response<http::empty_body> res{static_cast<http::status>(head.status), version_};
    res.set(http::field::server, "sbx-emulator");
    if (!head.content_type.empty()) {
      res.set(http::field::content_type, head.content_type);
    }
    for (const auto& [k, v] : head.headers) {
      res.set(k, v);
    }
    res.keep_alive(false);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    beast::error_code ec;
    http::write_header(socket_, sr, ec);
    failed_ = static_cast<bool>(ec);
    return !ec;
  }

  bool WriteChunk(std::string_view data) override {
    if (!streamed_ || failed_) {
      return false;
    }
    if (data.empty()) {
      return true;  // an empty chunk would end the body
    }
    beast::error_code ec;
    asio::write(socket_, http::make_chunk(asio::buffer(data.data(), data.size())), ec);
    failed_ = static_cast<bool>(ec);
    return !ec;
  }

  bool FinishStream() override {
    if (!streamed_ || failed_) {
      return false;
    }
    beast::error_code ec;
    asio::write(socket_, http::make_chunk_last(), ec);
    failed_ = true;  // nothing more may be written
    return !ec;
  }

 private:
  tcp::socket& socket_;
  const HttpRequest& request_;
  unsigned version_;
  bool keep_alive_;
  bool responded_ = false;
  bool streamed_ = false;
  bool failed_ = false;
};

HttpRequest ToRequest(const http::request<http::string_body>& req) {
  HttpRequest out;
  auto method = req.method_string();
  out.method = std::string(method.data(), method.size());
  auto target_sv = req.target();
  out.target = std::string(target_sv.data(), target_sv.size());
  std::string_view target = out.target;
  std::string_view raw_path = target;
  std::string_view raw_query;
  if (auto q = target.find('?'); q != std::string_view::npos) {
    raw_path = target.substr(0, q);
    raw_query = target.substr(q + 1);
  }
  out.path = api::PercentDecode(raw_path, false);
  std::size_t start = 0;
  while (start <= raw_path.size()) {
    std::size_t slash = raw_path.find('/', start);
    if (slash == std::string_view::npos) {
      slash = raw_path.size();
    }
    if (slash > start) {
      out.segments.push_back(api::PercentDecode(raw_path.substr(start, slash - start), false));
    }
    start = slash + 1;
  }
  out.query = ParseFormEncoded(raw_query);
  for (const auto& field : req) {
    auto name = field.name_string();
    auto value = field.value();
    out.headers[Lower(std::string_view(name.data(), name.size()))] =
        std::string(value.data(), value.size());
  }
  out.body = req.body();
  return out;
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(Lower(name));
  return it == headers.end() ? std::string() : it->second;
}

std::string Trim(std::string_view s) { return std::string(api::Trim(s)); }

std::map<std::string, std::string> ParseFormEncoded(std::string_view s) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t amp = s.find('&', start);
    if (amp == std::string_view::npos) {
      amp = s.size();
    }
    std::string_view pair = s.substr(start, amp - start);
    if (!pair.empty()) {
      std::size_t eq = pair.find('=');
      std::string key = api::PercentDecode(pair.substr(0, eq), true);
      std::string value = eq == std::string_view::npos
                              ? std::string()
                              : api::PercentDecode(pair.substr(eq + 1), true);
      out.emplace(std::move(key), std::move(value));
    }
    start = amp + 1;
  }
  return out;
}

class HttpServer::Impl {
 public:
  explicit Impl(HttpHandler handler) : handler_(std::move(handler)) {}

  api::StatusOr<int> Start(const std::string& host, int port) {
    if (started_) {
      return api::FailedPreconditionError("HttpServer already started");
    }
    beast::error_code ec;
    auto address = asio::ip::make_address(host, ec);
    if (ec) {
      return api::InvalidArgumentError("bad listen address '" + host + "': " + ec.message());
    }
    tcp::endpoint endpoint{address, static_cast<unsigned short>(port)};
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) {
      acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor_.bind(endpoint, ec);
    }
    if (!ec) {
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      beast::error_code ignored;
      acceptor_.close(ignored);
      return api::UnavailableError("cannot listen on " + host + ":" + std::to_string(port) + ": " +
                                   ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    started_ = true;
    accept_thread_ = std::jthread([this] { AcceptLoop(); });
    return port_;
  }

  void Stop() {
    if (!started_ || stopped_.exchange(true)) {
      return;
    }
    // shutdown() on the raw fd wakes the blocking accept() and reads; asio objects are then
    // only touched by their own threads.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    if (accept_thread_.joinable()) {
      accept_thread_.join();
    }
    std::list<Connection> conns;
    {
      std::lock_guard lock(mu_);
      for (auto& c : conns_) {
        std::lock_guard conn_lock(c.state->mu);
        if (!c.state->closed) {
          ::shutdown(c.state->fd, SHUT_RDWR);
        }
      }
      conns.splice(conns.end(), conns_);
    }
    conns.clear();  // joins
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  int port() const { return port_; }

 private:
  // What Stop() needs of a live connection. The fd is shut down only while `closed` is false
  // (both under `mu`), so Stop() never touches an fd number the OS has already reused.
  struct ConnState {
    std::mutex mu;
    bool closed = false;  // Guarded by mu.
    int fd = -1;
    std::atomic<bool> done{false};
  };
  struct Connection {
    std::shared_ptr<ConnState> state;
    std::jthread thread;
  };

  void AcceptLoop() {
    while (!stopped_) {
      tcp::socket socket{ioc_};
      beast::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec) {
        if (stopped_) {
          return;
        }
        if (ec == asio::error::invalid_argument || ec == asio::error::bad_descriptor) {
          return;
        }
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      std::lock_guard lock(mu_);
      ReapLocked();
      if (stopped_) {
        return;
      }
      auto state = std::make_shared<ConnState>();
      state->fd = socket.native_handle();
      auto& conn = conns_.emplace_back();
      conn.state = state;
      conn.thread = std::jthread([this, s = std::move(socket), state]() mutable {
        Serve(s);
        {
          std::lock_guard conn_lock(state->mu);
          beast::error_code ignored;
          s.close(ignored);
          state->closed = true;
        }
        state->done.store(true);
      });
    }
  }

  void ReapLocked() {
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->state->done.load()) {
        it = conns_.erase(it);  // joins a finished thread
      } else {
        ++it;
      }
    }
  }

  void Serve(tcp::socket& socket) {
    beast::flat_buffer buffer;
    while (!stopped_) {
      beast::error_code ec;
      http::request_parser<http::string_body> parser;
      parser.body_limit(kMaxBodyBytes);
      http::read_header(socket, buffer, parser, ec);
      if (ec) {
        break;
      }
      auto expect = parser.get()[http::field::expect];
      if (beast::iequals(expect, "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, parser.get().version()};
        http::write(socket, cont, ec);
        if (ec) {
          break;
        }
      }
      if (!parser.is_done()) {
        http::read(socket, buffer, parser, ec);
      }
      if (ec) {
        if (ec == http::error::body_limit) {
          http::response<http::string_body> res{http::status::payload_too_large,
                                                parser.get().version()};
          res.body() = "request body too large";
          res.prepare_payload();
          http::write(socket, res, ec);
        }
        break;
      }
      const auto& req = parser.get();
      HttpRequest request = ToRequest(req);
      beast::error_code endpoint_ec;
      if (const tcp::endpoint peer = socket.remote_endpoint(endpoint_ec); !endpoint_ec) {
        request.peer_address = peer.address().to_string();
        request.peer_port = peer.port();
      }
      if (const tcp::endpoint local = socket.local_endpoint(endpoint_ec); !endpoint_ec) {
        request.local_port = local.port();
      }
      request.client_gone = [fd = socket.native_handle()] {
        // A peek that reads end-of-stream (or fails) means the client closed; bytes waiting (a
        // pipelined request) or none yet (EAGAIN) mean it is still there.
        char byte = 0;
        const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      };
      BeastExchange exchange(socket, request, req.version(), req.keep_alive());
      try {
        handler_(exchange);
      } catch (const std::exception& e) {
        if (!exchange.responded()) {
          exchange.Respond({500, "text/plain", {}, std::string("handler threw: ") + e.what()});
        }
      }
      if (!exchange.responded()) {
        exchange.Respond({500, "text/plain", {}, "handler did not respond"});
      }
      if (exchange.streamed() || exchange.failed() || !req.keep_alive()) {
        break;
      }
    }
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
  }

  HttpHandler handler_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  int port_ = 0;
  bool started_ = false;
  std::atomic<bool> stopped_{false};
  std::jthread accept_thread_;
  std::mutex mu_;
  std::list<Connection> conns_;  // Guarded by mu_.
};

HttpServer::HttpServer(HttpHandler handler) : impl_(std::make_unique<Impl>(std::move(handler))) {}
HttpServer::~HttpServer() { Stop(); }
api::StatusOr<int> HttpServer::Start(const std::string& host, int port) {
  return impl_->Start(host, port);
}
void HttpServer::Stop() { impl_->Stop(); }
int HttpServer::port() const { return impl_->port(); }

}  // namespace sbx::emulator::internal
