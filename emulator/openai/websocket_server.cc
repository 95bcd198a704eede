#include "emulator/openai/websocket_server.h"

#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "httpserver/http_server.h"

namespace sbx::emulator::internal {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using tcp = asio::ip::tcp;

}  // namespace

class WebSocketServer::Impl {
 public:
  explicit Impl(WebSocketHandlers handlers) : handlers_(std::move(handlers)) {}

  int Start(const std::string& host, int port, std::string& error) {
    api::StatusOr<int> bound = http_.Start(host, port);
    if (!bound.ok()) {
      error = bound.status().message();
      return -1;
    }
    port_ = *bound;
    thread_ = std::thread([this] { ioc_.run(); });
    started_ = true;
    return port_;
  }

  void Stop() {
    if (!started_ || stopped_) {
      return;
    }
    stopped_ = true;
    // No new connection, and no handover in flight: every one already posted runs first.
    http_.Stop();
    // On the I/O thread: start a close handshake on every connection.
    auto closed = std::make_shared<std::promise<void>>();
    asio::post(ioc_, [this, closed] {
      for (auto& [id, session] : sessions_) {
        session->Close(websocket::close_code::going_away, "");
      }
      closed->set_value();
    });
    closed->get_future().wait_for(std::chrono::seconds(2));
    // Give the close handshakes a moment, then stop the loop regardless.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        if (open_.empty()) {
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    work_.reset();
    ioc_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
    // Connections the loop never finished closing: report them closed now.
    std::map<WsConnectionId, bool> left;
    {
      std::lock_guard lock(mu_);
      left.swap(open_);
    }
    sessions_.clear();  // the I/O thread is gone: nothing else touches it
    for (auto& [id, unused] : left) {
      if (handlers_.on_close) {
        handlers_.on_close(id);
      }
    }
  }

  bool Send(WsConnectionId id, const std::string& text) {
    {
      std::lock_guard lock(mu_);
      if (open_.count(id) == 0) {
        return false;
      }
    }
    asio::post(ioc_, [this, id, text] {
      if (auto it = sessions_.find(id); it != sessions_.end()) {
        it->second->Write(text);
      }
    });
    return true;
  }

  void Close(WsConnectionId id, int code, const std::string& reason) {
    asio::post(ioc_, [this, id, code, reason] {
      if (auto it = sessions_.find(id); it != sessions_.end()) {
        it->second->Close(static_cast<websocket::close_code>(code), reason);
      }
    });
  }

  int port() const { return port_; }

 private:
  // One connection, from its HTTP upgrade request to its close. Lives on the I/O thread only.
  class Session : public std::enable_shared_from_this<Session> {
   public:
    Session(Impl& server, tcp::socket socket, http::request<http::string_body> request)
        : server_(server), ws_(std::move(socket)), request_(std::move(request)) {}

    // Answers the upgrade request (validated by Impl::Upgrade) with 101 and starts reading.
    void Run() {
      resource_ = std::string(request_.target());
      ws_.async_accept(request_,
                       [self = shared_from_this()](beast::error_code ec) { self->OnAccept(ec); });
    }

    void Write(const std::string& text) {
      if (closing_) {
        return;
      }
      outbox_.push_back(text);
      if (outbox_.size() == 1) {
        WriteNext();
      }
    }

    void Close(websocket::close_code code, const std::string& reason) {
      if (closing_ || id_ == 0) {
        return;
      }
      closing_ = true;
      if (!writing_) {
        StartClose(code, reason);
      } else {
        pending_close_ = websocket::close_reason(code, reason);
      }
    }

   private:
    void OnAccept(beast::error_code ec) {
      if (ec) {
        return;
      }
      id_ = server_.Register(shared_from_this());
      if (server_.handlers_.on_open) {
        server_.handlers_.on_open(id_, resource_);
      }
      Read();
    }

    // Reads until the connection ends; pings are answered with pongs by Beast while reading.
    void Read() {
      ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec) {
          self->server_.Unregister(self->id_);
          return;
        }
        if (self->ws_.got_text() && self->server_.handlers_.on_text) {
          self->server_.handlers_.on_text(self->id_,
                                          beast::buffers_to_string(self->buffer_.data()));
        }
        self->buffer_.consume(self->buffer_.size());
        self->Read();
      });
    }

    void WriteNext() {
      writing_ = true;
      ws_.text(true);
      ws_.async_write(asio::buffer(outbox_.front()),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        self->writing_ = false;
                        self->outbox_.pop_front();
                        if (ec) {
                          self->outbox_.clear();
                          return;  // the read side reports the end
                        }
                        if (self->pending_close_) {
                          auto reason = *self->pending_close_;
                          self->pending_close_.reset();
                          self->outbox_.clear();
                          self->StartClose(static_cast<websocket::close_code>(reason.code),
                                           std::string(reason.reason.c_str()));
                        } else if (!self->outbox_.empty()) {
                          self->WriteNext();
                        }
                      });
    }

    void StartClose(websocket::close_code code, const std::string& reason) {
      ws_.async_close(websocket::close_reason(code, reason),
                      [self = shared_from_this()](beast::error_code) {
                        // The pending read ends with `closed` and unregisters the connection.
                      });
    }

    Impl& server_;
    websocket::stream<tcp::socket> ws_;
    beast::flat_buffer buffer_;
    http::request<http::string_body> request_;
    std::string resource_;
    WsConnectionId id_ = 0;
    std::deque<std::string> outbox_;
    bool writing_ = false;
    bool closing_ = false;
    std::optional<websocket::close_reason> pending_close_;
  };

  static httpserver::HttpServerOptions Options(Impl& impl) {
    httpserver::HttpServerOptions options;
    options.server_name = "sbx-emulator";
    options.read_timeout = std::chrono::minutes(10);
    options.write_timeout = std::chrono::minutes(10);
    options.upgrade = [&impl](httpserver::HttpExchange& x) { impl.Upgrade(x); };
    return options;
  }

  // On a connection thread of http_: validates the handshake, then hands the socket to the I/O
  // thread, where the Session answers 101.
  void Upgrade(httpserver::HttpExchange& x) {
    const httpserver::HttpRequest& r = x.request();
    http::request<http::string_body> request{http::string_to_verb(r.method), r.target, 11};
    for (const auto& [name, value] : r.headers) {
      request.set(name, value);
    }
    const int status = !websocket::is_upgrade(request) ? 426
                       : handlers_.on_validate         ? handlers_.on_validate(r.target)
                                                       : 101;
    if (status != 101) {
      x.Respond({status, "", {}, ""});
      return;
    }
    httpserver::TakenSocket taken = x.TakeSocket();
    if (taken.fd < 0) {
      return;  // the server answers 500
    }
    // A client sends nothing before the 101 (RFC 6455 §4.1), so nothing is buffered to carry.
    tcp::socket socket(ioc_);
    beast::error_code ec;
    socket.assign(r.peer_address.find(':') == std::string::npos ? tcp::v4() : tcp::v6(), taken.fd,
                  ec);
    if (ec) {
      ::close(taken.fd);
      return;
    }
    asio::post(ioc_, [this, socket = std::move(socket), request = std::move(request)]() mutable {
      std::make_shared<Session>(*this, std::move(socket), std::move(request))->Run();
    });
  }

  WsConnectionId Register(std::shared_ptr<Session> session) {
    WsConnectionId id;
    {
      std::lock_guard lock(mu_);
      id = ++next_id_;
      open_[id] = true;
    }
    sessions_[id] = std::move(session);
    return id;
  }

  // Runs on_close exactly once for a connection on_open saw.
  void Unregister(WsConnectionId id) {
    if (id == 0 || sessions_.erase(id) == 0) {
      return;
    }
    {
      std::lock_guard lock(mu_);
      open_.erase(id);
    }
    if (handlers_.on_close) {
      handlers_.on_close(id);
    }
  }

  WebSocketHandlers handlers_;
  asio::io_context ioc_{1};
  // Keeps ioc_.run() going while no connection is open; reset by Stop().
  asio::executor_work_guard<asio::io_context::executor_type> work_{ioc_.get_executor()};
  // Every request reaches it; a WebSocket handshake is handed over (Upgrade), others get 426.
  httpserver::HttpServer http_{[](httpserver::HttpExchange& x) {
                                 x.Respond({426, "", {}, ""});
                               },
                               Options(*this)};
  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;
  int port_ = 0;
  std::map<WsConnectionId, std::shared_ptr<Session>> sessions_;  // I/O thread only.
  std::mutex mu_;
  WsConnectionId next_id_ = 0;           // Guarded by mu_.
  std::map<WsConnectionId, bool> open_;  // Guarded by mu_. Opened, on_close not yet run.
};

WebSocketServer::WebSocketServer(WebSocketHandlers handlers)
    : impl_(std::make_unique<Impl>(std::move(handlers))) {}
WebSocketServer::~WebSocketServer() { Stop(); }
int WebSocketServer::Start(const std::string& host, int port, std::string& error) {
  return impl_->Start(host, port, error);
}
void WebSocketServer::Stop() { impl_->Stop(); }
bool WebSocketServer::Send(WsConnectionId id, const std::string& text) {
  return impl_->Send(id, text);
}
void WebSocketServer::Close(WsConnectionId id, int code, const std::string& reason) {
  impl_->Close(id, code, reason);
}
int WebSocketServer::port() const { return impl_->port(); }

}  // namespace sbx::emulator::internal
