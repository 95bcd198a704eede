#include "httpserver/http_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include "api/percent_encoding.h"
#include "api/text.h"

namespace sbx::httpserver {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

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

// What the janitor, the acceptor and Stop() need of a live connection. The fd is shut down only
// while `closed` is false (both under `mu`), so nothing touches an fd number the OS has reused,
// nor a socket that has been handed over (TakeSocket sets `closed`).
struct ConnState {
  std::mutex mu;
  bool closed = false;  // Guarded by mu.
  int fd = -1;
  std::atomic<bool> done{false};
  std::atomic<bool> taken{false};
  // When the connection began waiting for a request's bytes, or began a write; 0 while not.
  std::atomic<int64_t> reading_since_ms{0};
  std::atomic<int64_t> writing_since_ms{0};
  // Accepted at; a request admitted by check_head (from then on it is authenticated); closed to
  // make room for a newer connection.
  int64_t accepted_ms = 0;
  std::atomic<bool> admitted{false};
  std::atomic<bool> evicted{false};

  void ShutdownIfOpen() {
    std::lock_guard lock(mu);
    if (!closed) {
      ::shutdown(fd, SHUT_RDWR);
    }
  }
  bool PeerGone() {
    std::lock_guard lock(mu);
    return closed || FdPeerClosed(fd);
  }
  bool Live() const { return !done.load() && !evicted.load() && !taken.load(); }
};

// A write under write_timeout: the janitor closes a connection whose write stalls.
template <class Write>
void TimedWrite(ConnState& state, Write&& write) {
  state.writing_since_ms = NowMs();
  write();
  state.writing_since_ms = 0;
}

struct Peer {
  std::string address;
  int port = 0;
  int local_port = 0;
};

HttpRequest ToRequest(const http::request<http::string_body>& req, const Peer& peer,
                      const std::shared_ptr<ConnState>& state) {
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
  out.path = api::PercentDecode(raw_path, false);
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
  out.query = ParseFormEncoded(raw_query);
  for (const auto& field : req) {
    const auto name = field.name_string();
    const auto value = field.value();
    out.headers[api::Lower(std::string_view(name.data(), name.size()))] =
        std::string(value.data(), value.size());
  }
  out.peer_address = peer.address;
  out.peer_port = peer.port;
  out.local_port = peer.local_port;
  out.remote =
      peer.address.empty() ? std::string() : peer.address + ":" + std::to_string(peer.port);
  // A weak reference: a request copied past its connection's end reports the client gone.
  out.client_gone = [weak = std::weak_ptr<ConnState>(state)] {
    const std::shared_ptr<ConnState> s = weak.lock();
    return s == nullptr || s->PeerGone();
  };
  return out;
}

// `head_only`: the answer to a HEAD request, its Content-Length that of the body it leaves out.
template <class Stream>
void WriteResponse(Stream& stream, ConnState& state, const HttpResponse& r, unsigned version,
                   bool keep_alive, bool head_only, const std::string& server_name,
                   beast::error_code& ec) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  if (!server_name.empty()) {
    res.set(http::field::server, server_name);
  }
  if (!r.content_type.empty()) {
    res.set(http::field::content_type, r.content_type);
  }
  for (const auto& [k, v] : r.headers) {
    res.set(k, v);
  }
  res.keep_alive(keep_alive);
  res.body() = r.body;
  res.prepare_payload();
  if (head_only) {
    http::response_serializer<http::string_body> sr{res};
    TimedWrite(state, [&] { http::write_header(stream, sr, ec); });
    return;
  }
  TimedWrite(state, [&] { http::write(stream, res, ec); });
}

template <class Stream>
class BeastExchange final : public HttpExchange {
 public:
  BeastExchange(Stream& stream, ConnState& state, const HttpRequest& request, unsigned version,
                bool keep_alive, const std::string& server_name, beast::flat_buffer& buffer)
      : stream_(stream),
        state_(state),
        request_(request),
        version_(version),
        keep_alive_(keep_alive),
        server_name_(server_name),
        buffer_(buffer) {}

  const HttpRequest& request() const override { return request_; }
  bool responded() const override { return responded_; }
  bool streamed() const { return streamed_; }
  bool failed() const { return failed_; }
  bool taken() const { return taken_; }
  bool PeerClosed() override { return failed_ || state_.PeerGone(); }

  bool Respond(const HttpResponse& r) override {
    if (responded_) {
      return false;
    }
    responded_ = true;
    beast::error_code ec;
    WriteResponse(stream_, state_, r, version_, keep_alive_, request_.method == "HEAD",
                  server_name_, ec);
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
    if (!server_name_.empty()) {
      res.set(http::field::server, server_name_);
    }
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
    TimedWrite(state_, [&] { http::write_header(stream_, sr, ec); });
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
    TimedWrite(state_, [&] {
      asio::write(stream_, http::make_chunk(asio::buffer(data.data(), data.size())), ec);
    });
    failed_ = static_cast<bool>(ec);
    return !ec;
  }

  bool FinishStream() override {
    if (!streamed_ || failed_) {
      return false;
    }
    beast::error_code ec;
    TimedWrite(state_, [&] { asio::write(stream_, http::make_chunk_last(), ec); });
    failed_ = true;  // nothing more may be written
    return !ec;
  }

  TakenSocket TakeSocket() override {
    TakenSocket out;
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      if (responded_) {
        return out;
      }
      std::lock_guard lock(state_.mu);
      if (state_.closed) {
        return out;
      }
      out.fd = ::fcntl(state_.fd, F_DUPFD_CLOEXEC, 0);
      if (out.fd < 0) {
        return out;
      }
      // From here the server only closes its own descriptor: no shutdown, no timeout.
      state_.closed = true;
      state_.taken = true;
      out.buffered = beast::buffers_to_string(buffer_.data());
      buffer_.consume(buffer_.size());
      responded_ = true;
      taken_ = true;
    }
    return out;
  }

 private:
  Stream& stream_;
  ConnState& state_;
  const HttpRequest& request_;
  unsigned version_;
  bool keep_alive_;
  const std::string& server_name_;
  beast::flat_buffer& buffer_;
  bool responded_ = false;
  bool streamed_ = false;
  bool failed_ = false;
  bool taken_ = false;
};

}  // namespace

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
    return static_cast<size_t>(std::count_if(conns_.begin(), conns_.end(), [](const Connection& c) {
      return !c.state->done.load() && !c.state->taken.load();
    }));
  }

 private:
  struct Connection {
    std::shared_ptr<ConnState> state;
    std::jthread thread;
  };

  HttpResponse Error(int status, std::string_view reason, std::string_view message) const {
    if (options_.error_response) {
      return options_.error_response(status, reason, message);
    }
    return {status, "text/plain; charset=utf-8", {}, std::string(message) + "\n"};
  }

  HttpResponse TooLarge(const HttpRequest& head) const {
    if (options_.body_too_large) {
      return options_.body_too_large(head);
    }
    return Error(413, "RequestEntityTooLarge",
                 "request body larger than " + std::to_string(options_.max_body_bytes) + " bytes");
  }

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
      Peer peer;
      if (const auto ep = socket.remote_endpoint(ec); !ec) {
        peer.address = ep.address().to_string();
        peer.port = ep.port();
      }
      if (const auto ep = socket.local_endpoint(ec); !ec) {
        peer.local_port = ep.port();
      }
      std::lock_guard lock(mu_);
      ReapLocked();
      if (stopped_) {
        return;
      }
      if (!MakeRoomLocked()) {
        // Over the bound: a plain-text 503 would be garbage to a TLS client; just close.
        socket.close(ec);
        continue;
      }
      auto state = std::make_shared<ConnState>();
      state->fd = socket.native_handle();
      state->accepted_ms = NowMs();
      state->reading_since_ms = state->accepted_ms;
      state->admitted = !options_.check_head;
      auto& conn = conns_.emplace_back();
      conn.state = state;
      conn.thread = std::jthread([this, s = std::move(socket), state, peer]() mutable {
        if (tls_) {
          ssl::stream<tcp::socket> stream(std::move(s), *tls_);
          beast::error_code hec;
          stream.handshake(ssl::stream_base::server, hec);
          if (!hec) {
            Serve(stream, state, peer);
            // close_notify waits for the peer's; the janitor bounds that wait.
            state->reading_since_ms = NowMs();
            beast::error_code ignored;
            stream.shutdown(ignored);
          }
          Close(stream.next_layer(), *state);
        } else {
          Serve(s, state, peer);
          if (!state->taken) {
            beast::error_code ignored;
            s.shutdown(tcp::socket::shutdown_both, ignored);
          }
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

  static void Evict(ConnState& state) {
    state.evicted = true;
    state.ShutdownIfOpen();
  }

  // mu_ held. Makes room for a new connection, which starts unauthenticated. When those are at
  // their bound, the oldest of them is closed: a client that sends its head at once is then never
  // starved by silent peers, which would have to open connections faster than it sends a head.
  // When all connections are at max_connections, the one that has waited longest for its
  // request's bytes is closed, so peers that connect and trickle cannot keep a request out.
  // False when every connection is being handled: the new one must be closed.
  bool MakeRoomLocked() {
    size_t open = 0;
    size_t unauthenticated = 0;
    ConnState* oldest_unauthenticated = nullptr;
    ConnState* oldest_reader = nullptr;
    for (auto& c : conns_) {
      ConnState& st = *c.state;
      if (!st.Live()) {
        continue;
      }
      ++open;
      if (!st.admitted.load()) {
        ++unauthenticated;
        if (oldest_unauthenticated == nullptr ||
            st.accepted_ms < oldest_unauthenticated->accepted_ms) {
          oldest_unauthenticated = &st;
        }
      }
      const int64_t since = st.reading_since_ms.load();
      if (since != 0 &&
          (oldest_reader == nullptr || since < oldest_reader->reading_since_ms.load())) {
        oldest_reader = &st;
      }
    }
    if (oldest_unauthenticated != nullptr &&
        unauthenticated >= options_.max_unauthenticated_connections) {
      Evict(*oldest_unauthenticated);
      --open;
      if (oldest_reader == oldest_unauthenticated) {
        oldest_reader = nullptr;
      }
    }
    if (open < options_.max_connections) {
      return true;
    }
    if (oldest_reader == nullptr) {
      return false;
    }
    Evict(*oldest_reader);
    return true;
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
  // longer than read_timeout, whose write has stalled for longer than write_timeout, and those
  // with no request admitted unauthenticated_timeout after their accept: a silent or trickling
  // client must not hold a thread.
  void Janitor(std::stop_token stop) {
    using std::chrono::milliseconds;
    const int64_t read_ms = options_.read_timeout.count();
    const int64_t write_ms = options_.write_timeout.count();
    const int64_t unauthenticated_ms = options_.unauthenticated_timeout.count();
    // Fine enough that a deadline is kept to within a quarter of itself, at most 500 ms late.
    const milliseconds tick =
        std::clamp(milliseconds(std::min({read_ms, write_ms, unauthenticated_ms}) / 4),
                   milliseconds(20), milliseconds(500));
    std::unique_lock lock(janitor_mu_);
    while (!stop.stop_requested()) {
      janitor_cv_.wait_for(lock, stop, tick, [] { return false; });
      const int64_t now = NowMs();
      std::lock_guard conns_lock(mu_);
      for (auto& c : conns_) {
        ConnState& st = *c.state;
        const int64_t reading = st.reading_since_ms.load();
        const int64_t writing = st.writing_since_ms.load();
        if ((reading != 0 && now - reading > read_ms) ||
            (writing != 0 && now - writing > write_ms) ||
            (!st.admitted.load() && now - st.accepted_ms > unauthenticated_ms)) {
          st.ShutdownIfOpen();
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

  // Answers `r` with "Connection: close", then drains what the client still sends.
  template <class Stream>
  void RefuseAndClose(Stream& stream, ConnState& state, const HttpResponse& r) const {
    state.reading_since_ms = 0;
    beast::error_code ec;
    WriteResponse(stream, state, r, 11, /*keep_alive=*/false, /*head_only=*/false,
                  options_.server_name, ec);
    if (!ec) {
      DrainBeforeClose(stream, state);
    }
  }

  template <class Stream>
  void Serve(Stream& stream, const std::shared_ptr<ConnState>& state, const Peer& peer) {
    beast::flat_buffer buffer;
    while (!stopped_) {
      beast::error_code ec;
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(
          std::min<size_t>(options_.max_head_bytes, std::numeric_limits<std::uint32_t>::max())));
      parser.body_limit(options_.max_body_bytes);
      state->reading_since_ms = NowMs();
      http::read_header(stream, buffer, parser, ec);
      if (ec == http::error::header_limit) {
        RefuseAndClose(stream, *state,
                       Error(431, "RequestHeaderFieldsTooLarge", "request head too large"));
        return;
      }
      // A Content-Length over the limit fails the head's read, but only once the head is
      // complete: it is still checked before the 413.
      const bool too_large = ec == http::error::body_limit;
      if (ec && !too_large) {
        return;
      }
      // The head, before any of the body is read: admitted or answered here (#24).
      HttpRequest request = ToRequest(parser.get(), peer, state);
      if (options_.check_head) {
        if (std::optional<HttpResponse> refused = options_.check_head(request)) {
          RefuseAndClose(stream, *state, *refused);
          return;
        }
        state->admitted = true;
      }
      if (too_large) {
        RefuseAndClose(stream, *state, TooLarge(request));
        return;
      }
      if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        http::response<http::empty_body> cont{http::status::continue_, parser.get().version()};
        TimedWrite(*state, [&] { http::write(stream, cont, ec); });
        if (ec) {
          return;
        }
      }
      if (!parser.is_done()) {
        http::read(stream, buffer, parser, ec);
      }
      state->reading_since_ms = 0;
      if (ec) {
        if (ec == http::error::body_limit) {
          RefuseAndClose(stream, *state, TooLarge(request));
        }
        return;
      }
      auto& req = parser.get();
      request.body = std::move(req.body());  // moved, not copied
      const bool upgrade = options_.upgrade && request.IsUpgrade();
      const bool keep_alive = req.keep_alive() && !upgrade;
      BeastExchange<Stream> exchange(stream, *state, request, req.version(), keep_alive,
                                     options_.server_name, buffer);
      try {
        (upgrade ? options_.upgrade : handler_)(exchange);
      } catch (...) {
        if (!exchange.responded()) {
          exchange.Respond(Error(500, "InternalError", "the handler failed"));
        }
      }
      if (!exchange.responded()) {
        exchange.Respond(Error(500, "InternalError", "no response"));
      }
      if (exchange.taken() || exchange.streamed() || exchange.failed() || !keep_alive) {
        return;
      }
    }
  }

  HttpHandler handler_;
  const HttpServerOptions options_;
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

}  // namespace sbx::httpserver
