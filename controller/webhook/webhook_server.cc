#include "controller/webhook/webhook_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <exception>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include "api/text.h"

namespace sbx::controller {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr uint32_t kMaxHeaderBytes = 16 * 1024;

struct HostPort {
  std::string host;
  int port = 0;
};

api::StatusOr<HostPort> ParseAddr(const std::string& addr) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos) {
    return api::InvalidArgumentError("webhook address '" + addr + "': want host:port");
  }
  std::string host = addr.substr(0, colon);
  const std::string port_text = addr.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return api::InvalidArgumentError("webhook address '" + addr +
                                     "': write an IPv6 address in brackets, [::1]:8443");
  }
  if (host.empty()) {
    host = "0.0.0.0";
  }
  int port = -1;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return api::InvalidArgumentError("webhook address '" + addr + "': bad port '" + port_text +
                                     "'");
  }
  return HostPort{host, port};
}

using SteadyClock = std::chrono::steady_clock;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             SteadyClock::now().time_since_epoch())
      .count();
}

// The socket as Beast reads a request from it, against one deadline for the whole request: each
// read waits for bytes only until the deadline, so a peer that trickles a byte at a time cannot
// stretch a request past it (a per-read timeout such as SO_RCVTIMEO bounds each read, not the
// request; #24). Writes go to the socket itself.
class DeadlineReader {
 public:
  using executor_type = tcp::socket::executor_type;

  DeadlineReader(tcp::socket& socket, SteadyClock::time_point deadline)
      : socket_(socket), deadline_(deadline) {}

  executor_type get_executor() { return socket_.get_executor(); }

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, beast::error_code& ec) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - SteadyClock::now());
    pollfd p{socket_.native_handle(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      ec = asio::error::timed_out;
      return 0;
    }
    return socket_.read_some(buffers, ec);
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    beast::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) {
      throw beast::system_error(ec);
    }
    return n;
  }

 private:
  tcp::socket& socket_;
  SteadyClock::time_point deadline_;
};

void Reply(tcp::socket& socket, unsigned version, bool keep_alive, const WebhookResponse& r,
           beast::error_code& ec) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  res.set(http::field::server, "sbxd");
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.keep_alive(keep_alive);
  res.body() = r.body;
  res.prepare_payload();
  http::write(socket, res, ec);
}

}  // namespace

class WebhookServer::Impl {
 public:
  Impl(Handler handler, WebhookServerOptions options)
      : handler_(std::move(handler)), options_(options) {}

  api::StatusOr<int> Start(const std::string& addr) {
    if (started_) {
      return api::FailedPreconditionError("webhook server already started");
    }
    ASSIGN_OR_RETURN(HostPort hp, ParseAddr(addr));
    beast::error_code ec;
    const asio::ip::address address = asio::ip::make_address(hp.host, ec);
    if (ec) {
      return api::InvalidArgumentError("webhook address '" + addr + "': " + ec.message());
    }
    const tcp::endpoint endpoint{address, static_cast<unsigned short>(hp.port)};
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
      return api::UnavailableError("cannot listen on " + addr + ": " + ec.message());
    }
    started_ = true;
    const int port = acceptor_.local_endpoint().port();
    accept_thread_ = std::jthread([this] { AcceptLoop(); });
    return port;
  }

  void Stop() {
    if (!started_ || stopped_.exchange(true)) {
      return;
    }
    // shutdown() on the raw fds wakes the blocking accept() and reads.
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

 private:
  // What Stop() needs of a live connection; the fd is shut down only while `closed` is false
  // (both under `mu`), so Stop() never touches an fd number the OS has already reused.
  struct ConnState {
    std::mutex mu;
    bool closed = false;  // Guarded by mu.
    int fd = -1;
    std::atomic<bool> done{false};
    // When the connection began waiting for its current request; 0 while it is being handled.
    std::atomic<int64_t> reading_since_ms{0};
    std::atomic<bool> evicted{false};
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
        if (stopped_ || ec == asio::error::invalid_argument || ec == asio::error::bad_descriptor) {
          return;
        }
        continue;
      }
      // Reads have a deadline per request (DeadlineReader); a peer that reads nothing of our
      // answer is dropped after read_timeout.
      const auto ms = options_.read_timeout.count();
      timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      std::lock_guard lock(mu_);
      Reap();
      if (stopped_) {
        return;
      }
      if (!EvictOldestReaderIfFull()) {
        beast::error_code ignored;
        socket.close(ignored);
        continue;
      }
      auto state = std::make_shared<ConnState>();
      state->fd = socket.native_handle();
      state->reading_since_ms = NowMs();
      auto& conn = conns_.emplace_back();
      conn.state = state;
      conn.thread = std::jthread([this, s = std::move(socket), state]() mutable {
        Serve(s, *state);
        {
          std::lock_guard conn_lock(state->mu);
          beast::error_code ignored;
          s.shutdown(tcp::socket::shutdown_both, ignored);
          s.close(ignored);
          state->closed = true;
        }
        state->done.store(true);
      });
    }
  }

  // mu_ held. True when there is room for one more connection: below max_connections, or after
  // closing the connection that has waited longest for its request's bytes. So peers that
  // connect and trickle cannot keep a delivery out: they would have to reconnect faster than a
  // sender sends a request. False when every connection is being handled.
  bool EvictOldestReaderIfFull() {
    int open = 0;
    ConnState* oldest = nullptr;
    for (auto& c : conns_) {
      ConnState& st = *c.state;
      if (st.done.load() || st.evicted.load()) {
        continue;
      }
      ++open;
      const int64_t since = st.reading_since_ms.load();
      if (since != 0 && (oldest == nullptr || since < oldest->reading_since_ms.load())) {
        oldest = &st;
      }
    }
    if (open < options_.max_connections) {
      return true;
    }
    if (oldest == nullptr) {
      return false;
    }
    std::lock_guard conn_lock(oldest->mu);
    oldest->evicted = true;
    if (!oldest->closed) {
      ::shutdown(oldest->fd, SHUT_RDWR);
    }
    return true;
  }

  // mu_ held.
  void Reap() {
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (it->state->done.load()) {
        it = conns_.erase(it);  // joins a finished thread
      } else {
        ++it;
      }
    }
  }

  WebhookResponse Call(const WebhookRequest& request) {
    try {
      return handler_(request);
    } catch (const std::exception&) {
      return {500, "internal error\n"};
    }
  }

  // After an answer sent before the body was read (413): read and drop what the peer still sends
  // (at most 64 MiB, for at most read_timeout) before closing. Closing with unread bytes makes
  // the kernel reset the connection, and the reset can destroy the answer before the peer reads
  // it: the sender would see "connection reset" instead of 413.
  void DrainBeforeClose(tcp::socket& socket) const {
    constexpr size_t kMaxDrainBytes = size_t{64} << 20;
    beast::error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    DeadlineReader reader(socket, SteadyClock::now() + options_.read_timeout);
    std::array<char, 16384> scratch{};
    size_t drained = 0;
    while (!ec && drained < kMaxDrainBytes) {
      drained += reader.read_some(asio::buffer(scratch), ec);
    }
  }

  void Serve(tcp::socket& socket, ConnState& state) {
    beast::flat_buffer buffer;
    while (!stopped_) {
      beast::error_code ec;
      http::request_parser<http::string_body> parser;
      parser.header_limit(kMaxHeaderBytes);
      parser.body_limit(options_.max_body_bytes);
      // The whole request, head and body (and the idle wait before it), within read_timeout.
      state.reading_since_ms = NowMs();
      DeadlineReader reader(socket, SteadyClock::now() + options_.read_timeout);
      http::read_header(reader, buffer, parser, ec);
      // A Content-Length over the limit is refused as soon as the header is read.
      bool too_large = ec == http::error::body_limit;
      if (ec && !too_large) {
        return;
      }
      const auto& head = parser.get();
      WebhookRequest request;
      request.method = std::string(head.method_string());
      const std::string target(head.target());
      request.path = target.substr(0, target.find('?'));
      for (const auto& field : head) {
        request.headers[api::Lower(std::string(field.name_string()))] = std::string(field.value());
      }
      const unsigned version = head.version();
      if (!too_large) {
        if (beast::iequals(head[http::field::expect], "100-continue")) {
          http::response<http::empty_body> go_on{http::status::continue_, version};
          http::write(socket, go_on, ec);
          if (ec) {
            return;
          }
        }
        if (!parser.is_done()) {
          http::read(reader, buffer, parser, ec);
        }
        too_large = ec == http::error::body_limit;
        if (ec && !too_large) {
          return;
        }
      }
      state.reading_since_ms = 0;
      if (too_large) {
        request.body_too_large = true;
        Reply(socket, version, /*keep_alive=*/false, Call(request), ec);
        if (!ec) {
          DrainBeforeClose(socket);
        }
        return;
      }
      const bool keep_alive = parser.get().keep_alive();
      request.body = std::move(parser.get().body());
      Reply(socket, version, keep_alive, Call(request), ec);
      if (ec || !keep_alive) {
        return;
      }
    }
  }

  Handler handler_;
  const WebhookServerOptions options_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  bool started_ = false;
  std::atomic<bool> stopped_{false};
  std::jthread accept_thread_;
  std::mutex mu_;
  std::list<Connection> conns_;  // Guarded by mu_.
};

WebhookServer::WebhookServer(Handler handler, WebhookServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(handler), options)) {}
WebhookServer::~WebhookServer() { Stop(); }
api::StatusOr<int> WebhookServer::Start(const std::string& addr) { return impl_->Start(addr); }
void WebhookServer::Stop() { impl_->Stop(); }

}  // namespace sbx::controller
