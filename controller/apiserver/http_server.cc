#include "controller/apiserver/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "api/percent_encoding.h"
#include "api/text.h"

namespace sbx::controller::apiserver {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxHeaderBytes = size_t{8} << 10;

std::map<std::string, std::string> ParseQuery(std::string_view s) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t amp = s.find('&', start);
    if (amp == std::string_view::npos) {
      amp = s.size();
    }
    const std::string_view pair = s.substr(start, amp - start);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
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

HttpRequest ToRequest(const http::request<http::string_body>& req, std::string remote) {
  HttpRequest out;
  const auto method = req.method_string();
  out.method = std::string(method.data(), method.size());
  const auto target_sv = req.target();
  out.target = std::string(target_sv.data(), target_sv.size());
  const std::string_view target = out.target;
  std::string_view raw_path = target;
  std::string_view raw_query;
  if (const size_t q = target.find('?'); q != std::string_view::npos) {
    raw_path = target.substr(0, q);
    raw_query = target.substr(q + 1);
  }
  size_t start = 0;
  while (start <= raw_path.size()) {
    size_t slash = raw_path.find('/', start);
    if (slash == std::string_view::npos) {
      slash = raw_path.size();
    }
    if (slash > start) {
      out.segments.push_back(api::PercentDecode(raw_path.substr(start, slash - start), false));
    }
    start = slash + 1;
  }
  out.query = ParseQuery(raw_query);
  for (const auto& field : req) {
    const auto name = field.name_string();
    const auto value = field.value();
    out.headers[api::Lower(std::string_view(name.data(), name.size()))] =
        std::string(value.data(), value.size());
  }
  out.remote = std::move(remote);
  return out;
}

// What the janitor and Stop() need of a live connection. The fd is shut down only while
// `closed` is false (both under `mu`), so nothing touches an fd number the OS has reused.
struct ConnState {
  std::mutex mu;
  bool closed = false;  // Guarded by mu.
  int fd = -1;
  std::atomic<bool> done{false};
  // When the connection began waiting for a request's bytes; 0 while not reading.
  std::atomic<int64_t> reading_since_ms{0};
  // Accepted at; a request admitted by check_head (from then on it is authenticated); closed to
  // make room for a newer unauthenticated connection.
  int64_t accepted_ms = 0;
  std::atomic<bool> admitted{false};
  std::atomic<bool> evicted{false};

  void ShutdownIfOpen() {
    std::lock_guard lock(mu);
    if (!closed) {
      ::shutdown(fd, SHUT_RDWR);
    }
  }
};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

bool FdPeerClosed(int fd) {
  pollfd p{};
  p.fd = fd;
  p.events = POLLRDHUP;
  if (::poll(&p, 1, 0) < 0) {
    return true;
  }
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

template <class Stream>
class BeastExchange final : public HttpExchange {
 public:
  BeastExchange(Stream& stream, int fd, const HttpRequest& request, unsigned version,
                bool keep_alive)
      : stream_(stream), fd_(fd), request_(request), version_(version), keep_alive_(keep_alive) {}

  const HttpRequest& request() const override { return request_; }
  bool responded() const override { return responded_; }
  bool streamed() const { return streamed_; }
  bool failed() const { return failed_; }
  bool PeerClosed() override { return failed_ || FdPeerClosed(fd_); }

  bool Respond(const HttpResponse& r) override {
    if (responded_) {
      return false;
    }
    responded_ = true;
    http::response<http::string_body> res{static_cast<http::status>(r.status), version_};
    res.set(http::field::server, "sbxd");
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
    http::write(stream_, res, ec);
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
    res.set(http::field::server, "sbxd");
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
    http::write_header(stream_, sr, ec);
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
    asio::write(stream_, http::make_chunk(asio::buffer(data.data(), data.size())), ec);
    failed_ = static_cast<bool>(ec);
    return !ec;
  }

  bool FinishStream() override {
    if (!streamed_ || failed_) {
      return false;
    }
    beast::error_code ec;
    asio::write(stream_, http::make_chunk_last(), ec);
    failed_ = true;  // nothing more may be written
    return !ec;
  }

 private:
  Stream& stream_;
  int fd_;
  const HttpRequest& request_;
  unsigned version_;
  bool keep_alive_;
  bool responded_ = false;
  bool streamed_ = false;
  bool failed_ = false;
};

std::string JsonError(int code, std::string_view reason, std::string_view message) {
  // A fixed shape with no user text beyond `message`, which the callers build from constants.
  return "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"" +
         std::string(reason) + "\",\"message\":\"" + std::string(message) +
         "\",\"code\":" + std::to_string(code) + "}";
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(api::Lower(name));
  return it == headers.end() ? std::string() : it->second;
}

api::StatusOr<ListenAddress> ParseListenAddress(std::string_view text) {
  const size_t colon = text.rfind(':');
  const auto bad = [&](std::string_view why) {
    return api::InvalidArgumentError("listen address \"" + std::string(text) +
                                     "\": " + std::string(why));
  };
  if (colon == std::string_view::npos) {
    return bad("want host:port");
  }
  std::string host(text.substr(0, colon));
  const std::string port_text(text.substr(colon + 1));
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port_text) > 65535) {
    return bad("bad port");
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad("write an IPv6 address in brackets, [::1]:8443");
  }
  ListenAddress out;
  out.port = std::stoi(port_text);
  if (host.empty()) {
    host = "0.0.0.0";
  } else if (host == "localhost") {
    host = "127.0.0.1";
  }
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) {
    return bad("the host must be an IP address or localhost");
  }
  out.loopback = address.is_loopback();
  out.host = host;
  return out;
}

class HttpServer::Impl {
 public:
  Impl(HttpHandler handler, HttpServerOptions options)
      : handler_(std::move(handler)), options_(std::move(options)) {}

  api::StatusOr<int> Start(const std::string& host, int port) {
    if (started_) {
      return api::FailedPreconditionError("HttpServer already started");
    }
    if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
      return api::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    beast::error_code ec;
    if (!options_.tls_cert_file.empty()) {
      tls_.emplace(ssl::context::tls_server);
      tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                            ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                            ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                        ec);
      tls_->use_certificate_chain_file(options_.tls_cert_file, ec);
      if (ec) {
        return api::InvalidArgumentError("TLS certificate \"" + options_.tls_cert_file +
                                         "\": " + ec.message());
      }
      tls_->use_private_key_file(options_.tls_key_file, ssl::context::pem, ec);
      if (ec) {
        return api::InvalidArgumentError("TLS key \"" + options_.tls_key_file +
                                         "\": " + ec.message());
      }
    }
    const auto address = asio::ip::make_address(host, ec);
    if (ec) {
      return api::InvalidArgumentError("bad listen address \"" + host + "\": " + ec.message());
    }
    const tcp::endpoint endpoint{address, static_cast<unsigned short>(port)};
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
    janitor_ = std::jthread([this](std::stop_token stop) { Janitor(stop); });
    return port_;
  }

  void Stop() {
    if (!started_ || stopped_.exchange(true)) {
      return;
    }
    janitor_.request_stop();
    { std::lock_guard lock(janitor_mu_); }
    janitor_cv_.notify_all();
    if (janitor_.joinable()) {
      janitor_.join();
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
        c.state->ShutdownIfOpen();
      }
      conns.splice(conns.end(), conns_);
    }
    conns.clear();  // joins
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  int port() const { return port_; }
  size_t open_connections() const {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const auto& c : conns_) {
      n += c.state->done.load() ? 0 : 1;
    }
    return n;
  }

 private:
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
        if (stopped_ || ec == asio::error::invalid_argument || ec == asio::error::bad_descriptor) {
          return;
        }
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      std::string remote;
      if (const auto ep = socket.remote_endpoint(ec); !ec) {
        remote = ep.address().to_string() + ":" + std::to_string(ep.port());
      }
      std::lock_guard lock(mu_);
      ReapLocked();
      if (stopped_) {
        return;
      }
      // Connections already evicted are on their way out: they do not count.
      if (EvictOldestUnauthenticatedIfFullLocked() >= options_.max_connections) {
        // Over the bound: a plain-text 503 would be garbage to a TLS client; just close.
        socket.close(ec);
        continue;
      }
      auto state = std::make_shared<ConnState>();
      state->fd = socket.native_handle();
      state->accepted_ms = NowMs();
      state->admitted = !options_.check_head;
      auto& conn = conns_.emplace_back();
      conn.state = state;
      conn.thread = std::jthread([this, s = std::move(socket), state, remote]() mutable {
        if (tls_) {
          ssl::stream<tcp::socket> stream(std::move(s), *tls_);
          state->reading_since_ms = NowMs();
          beast::error_code hec;
          stream.handshake(ssl::stream_base::server, hec);
          state->reading_since_ms = 0;
          if (!hec) {
            Serve(stream, *state, remote);
            // close_notify waits for the peer's; the janitor bounds that wait.
            state->reading_since_ms = NowMs();
            beast::error_code ignored;
            stream.shutdown(ignored);
          }
          Close(stream.next_layer(), *state);
        } else {
          Serve(s, *state, remote);
          beast::error_code ignored;
          s.shutdown(tcp::socket::shutdown_both, ignored);
          Close(s, *state);
        }
        state->done.store(true);
      });
    }
  }

  static void Close(tcp::socket& s, ConnState& state) {
    std::lock_guard conn_lock(state.mu);
    beast::error_code ignored;
    s.close(ignored);
    state.closed = true;
  }

  // A new connection is unauthenticated. When those are at their bound, the oldest of them is
  // closed: a client that sends its head at once is then never starved by silent peers, which
  // would have to open connections faster than it sends a head. Returns how many connections
  // stay open (neither done nor evicted).
  size_t EvictOldestUnauthenticatedIfFullLocked() {
    size_t open = 0;
    size_t unauthenticated = 0;
    ConnState* oldest = nullptr;
    for (auto& c : conns_) {
      ConnState& st = *c.state;
      if (st.done.load() || st.evicted.load()) {
        continue;
      }
      ++open;
      if (st.admitted.load()) {
        continue;
      }
      ++unauthenticated;
      if (oldest == nullptr || st.accepted_ms < oldest->accepted_ms) {
        oldest = &st;
      }
    }
    if (oldest != nullptr && unauthenticated >= options_.max_unauthenticated_connections) {
      oldest->evicted = true;
      oldest->ShutdownIfOpen();
      --open;
    }
    return open;
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

  // Closes connections that have been waiting for a request's bytes (or a TLS handshake) for
  // longer than read_timeout, and those with no request admitted unauthenticated_timeout after
  // their accept: a silent or trickling client must not hold a thread.
  void Janitor(std::stop_token stop) {
    const int64_t limit_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.read_timeout).count();
    const int64_t unauthenticated_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.unauthenticated_timeout)
            .count();
    std::unique_lock lock(janitor_mu_);
    while (!stop.stop_requested()) {
      janitor_cv_.wait_for(lock, stop, std::chrono::milliseconds(500), [] { return false; });
      const int64_t now = NowMs();
      std::lock_guard conns_lock(mu_);
      for (auto& c : conns_) {
        const int64_t since = c.state->reading_since_ms.load();
        if ((since != 0 && now - since > limit_ms) ||
            (!c.state->admitted.load() && now - c.state->accepted_ms > unauthenticated_ms)) {
          c.state->ShutdownIfOpen();
        }
      }
    }
  }

  // After an early answer (413 or 431, sent once the head is read), the client may still be
  // writing the body it announced. Closing a socket with unread bytes sends a reset, which can
  // destroy the answer before the client reads it (it then sees only "failed to write the
  // request body"). So, as web servers do (lingering close): stop sending, then read and drop
  // what arrives until the client closes, at most kMaxDrainBytes and, through the janitor,
  // read_timeout.
  template <class Stream>
  static void DrainBeforeClose(Stream& stream, ConnState& state) {
    constexpr size_t kMaxDrainBytes = size_t{64} << 20;
    beast::error_code ec;
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      stream.shutdown(tcp::socket::shutdown_send, ec);
    }
    state.reading_since_ms = NowMs();
    std::array<char, 16384> scratch{};
    size_t drained = 0;
    while (!ec && drained < kMaxDrainBytes) {
      drained += stream.read_some(asio::buffer(scratch), ec);
    }
    state.reading_since_ms = 0;
  }

  // Answers `res` with "Connection: close", then drains what the client still sends.
  template <class Stream>
  static void RefuseAndClose(Stream& stream, ConnState& state, const HttpResponse& r) {
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    res.set(http::field::server, "sbxd");
    if (!r.content_type.empty()) {
      res.set(http::field::content_type, r.content_type);
    }
    for (const auto& [k, v] : r.headers) {
      res.set(k, v);
    }
    res.body() = r.body;
    res.keep_alive(false);
    res.prepare_payload();
    beast::error_code ec;
    http::write(stream, res, ec);
    if (!ec) {
      DrainBeforeClose(stream, state);
    }
  }

  template <class Stream>
  void Serve(Stream& stream, ConnState& state, const std::string& remote) {
    beast::flat_buffer buffer;
    while (!stopped_) {
      beast::error_code ec;
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(kMaxHeaderBytes));
      parser.body_limit(options_.max_body_bytes);
      state.reading_since_ms = NowMs();
      http::read_header(stream, buffer, parser, ec);
      // The head, before any of the body is read: admitted or answered here (#24).
      std::optional<HttpRequest> request;
      if (!ec) {
        request = ToRequest(parser.get(), remote);
        if (options_.check_head) {
          if (std::optional<HttpResponse> refused = options_.check_head(*request)) {
            state.reading_since_ms = 0;
            RefuseAndClose(stream, state, *refused);
            return;
          }
          state.admitted = true;
        }
        const auto expect = parser.get()[http::field::expect];
        if (beast::iequals(expect, "100-continue")) {
          http::response<http::empty_body> cont{http::status::continue_, parser.get().version()};
          http::write(stream, cont, ec);
        }
      }
      if (!ec && !parser.is_done()) {
        http::read(stream, buffer, parser, ec);
      }
      state.reading_since_ms = 0;
      if (ec) {
        if (ec == http::error::body_limit) {
          RefuseAndClose(stream, state,
                         {413,
                          "application/json",
                          {},
                          JsonError(413, "RequestEntityTooLarge",
                                    "request body larger than " +
                                        std::to_string(options_.max_body_bytes) + " bytes")});
        } else if (ec == http::error::header_limit) {
          RefuseAndClose(stream, state,
                         {431,
                          "application/json",
                          {},
                          JsonError(431, "RequestHeaderFieldsTooLarge", "request head too large")});
        }
        return;
      }
      auto& req = parser.get();
      request->body = std::move(req.body());  // moved, not copied
      BeastExchange<Stream> exchange(stream, state.fd, *request, req.version(), req.keep_alive());
      try {
        handler_(exchange);
      } catch (const std::exception&) {
        if (!exchange.responded()) {
          exchange.Respond(
              {500, "application/json", {}, JsonError(500, "InternalError", "the handler failed")});
        }
      }
      if (!exchange.responded()) {
        exchange.Respond(
            {500, "application/json", {}, JsonError(500, "InternalError", "no response")});
      }
      if (exchange.streamed() || exchange.failed() || !req.keep_alive()) {
        return;
      }
    }
  }

  HttpHandler handler_;
  HttpServerOptions options_;
  std::optional<ssl::context> tls_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  int port_ = 0;
  bool started_ = false;
  std::atomic<bool> stopped_{false};
  std::jthread accept_thread_;
  std::mutex janitor_mu_;
  std::condition_variable_any janitor_cv_;
  std::jthread janitor_;
  mutable std::mutex mu_;
  std::list<Connection> conns_;  // Guarded by mu_.
};

HttpServer::HttpServer(HttpHandler handler, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(handler), std::move(options))) {}
HttpServer::~HttpServer() { Stop(); }
api::StatusOr<int> HttpServer::Start(const std::string& host, int port) {
  return impl_->Start(host, port);
}
void HttpServer::Stop() { impl_->Stop(); }
int HttpServer::port() const { return impl_->port(); }
size_t HttpServer::open_connections() const { return impl_->open_connections(); }

}  // namespace sbx::controller::apiserver
