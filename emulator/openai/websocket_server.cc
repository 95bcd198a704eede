// Compiled as C++17 (see emulator/CMakeLists.txt): websocketpp 0.8.2 does not build as C++20.
#include "emulator/openai/websocket_server.h"

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <websocketpp/config/asio_no_tls.hpp>
#include <websocketpp/server.hpp>

namespace sbx::emulator::internal {
namespace {
using Server = websocketpp::server<websocketpp::config::asio>;
using Hdl = websocketpp::connection_hdl;
}  // namespace

class WebSocketServer::Impl {
 public:
  explicit Impl(WebSocketHandlers handlers) : handlers_(std::move(handlers)) {}

  int Start(const std::string& host, int port, std::string& error) {
    try {
      server_.clear_access_channels(websocketpp::log::alevel::all);
      server_.clear_error_channels(websocketpp::log::elevel::all);
      server_.init_asio();
      server_.set_reuse_addr(true);
      server_.set_validate_handler([this](Hdl h) { return OnValidate(h); });
      server_.set_open_handler([this](Hdl h) { OnOpen(h); });
      server_.set_close_handler([this](Hdl h) { OnClose(h); });
      server_.set_fail_handler([this](Hdl h) { OnClose(h); });
      server_.set_message_handler([this](Hdl h, Server::message_ptr msg) {
        WsConnectionId id = IdOf(h);
        if (id == 0) {
          return;
        }
        if (msg->get_opcode() != websocketpp::frame::opcode::text) {
          return;
        }
        if (handlers_.on_text) {
          handlers_.on_text(id, msg->get_payload());
        }
      });
      websocketpp::lib::asio::error_code aec;
      auto address = websocketpp::lib::asio::ip::make_address(host, aec);
      if (aec) {
        error = "bad listen address " + host + ": " + aec.message();
        return -1;
      }
      websocketpp::lib::error_code ec;
      server_.listen(websocketpp::lib::asio::ip::tcp::endpoint(address, port), ec);
      if (ec) {
        error = "cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message();
        return -1;
      }
      server_.start_accept(ec);
      if (ec) {
        error = "cannot accept: " + ec.message();
        return -1;
      }
      port_ = server_.get_local_endpoint(aec).port();
      thread_ = std::thread([this] {
        try {
          server_.run();
        } catch (const std::exception&) {
          // A handler threw: the loop ends; Stop() still joins.
        }
      });
      started_ = true;
      return port_;
    } catch (const std::exception& e) {
      error = std::string("websocket server: ") + e.what();
      return -1;
    }
  }

  void Stop() {
    if (!started_ || stopped_) {
      return;
    }
    stopped_ = true;
    std::map<WsConnectionId, Hdl> conns;
    {
      std::lock_guard lock(mu_);
      conns = conns_;
    }
    // Closing the acceptor from this thread raced with the loop re-arming its accept (UBSan:
    // null descriptor_state in epoll_reactor::start_op). On the loop's own thread the two are
    // serialised. If the loop is gone already, the wait simply times out.
    auto closed = std::make_shared<std::promise<void>>();
    websocketpp::lib::asio::post(server_.get_io_service(), [this, conns, closed] {
      websocketpp::lib::error_code ec;
      server_.stop_listening(ec);
      for (auto& [id, h] : conns) {
        server_.close(h, websocketpp::close::status::going_away, "", ec);
      }
      closed->set_value();
    });
    closed->get_future().wait_for(std::chrono::seconds(2));
    // Give the close handshakes a moment, then stop the loop regardless.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu_);
        if (conns_.empty()) {
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    server_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
    // Connections the loop never finished closing: report them closed now.
    std::map<WsConnectionId, Hdl> left;
    {
      std::lock_guard lock(mu_);
      left.swap(conns_);
      ids_.clear();
    }
    for (auto& [id, h] : left) {
      if (handlers_.on_close) {
        handlers_.on_close(id);
      }
    }
  }

  bool Send(WsConnectionId id, const std::string& text) {
    Hdl h;
    {
      std::lock_guard lock(mu_);
      auto it = conns_.find(id);
      if (it == conns_.end()) {
        return false;
      }
      h = it->second;
    }
    websocketpp::lib::error_code ec;
    server_.send(h, text, websocketpp::frame::opcode::text, ec);
    return !ec;
  }

  void Close(WsConnectionId id, int code, const std::string& reason) {
    Hdl h;
    {
      std::lock_guard lock(mu_);
      auto it = conns_.find(id);
      if (it == conns_.end()) {
        return;
      }
      h = it->second;
    }
    websocketpp::lib::error_code ec;
    server_.close(h, static_cast<websocketpp::close::status::value>(code), reason, ec);
  }

  int port() const { return port_; }

 private:
  bool OnValidate(Hdl h) {
    Server::connection_ptr con = server_.get_con_from_hdl(h);
    int status = handlers_.on_validate ? handlers_.on_validate(con->get_resource()) : 101;
    if (status == 101) {
      return true;
    }
    con->set_status(static_cast<websocketpp::http::status_code::value>(status));
    return false;
  }

  void OnOpen(Hdl h) {
    Server::connection_ptr con = server_.get_con_from_hdl(h);
    WsConnectionId id;
    {
      std::lock_guard lock(mu_);
      id = ++next_id_;
      conns_[id] = h;
      ids_[h] = id;
    }
    if (handlers_.on_open) {
      handlers_.on_open(id, con->get_resource());
    }
  }

  void OnClose(Hdl h) {
    WsConnectionId id = 0;
    {
      std::lock_guard lock(mu_);
      auto it = ids_.find(h);
      if (it == ids_.end()) {
        return;  // a failed upgrade: never opened
      }
      id = it->second;
      ids_.erase(it);
      conns_.erase(id);
    }
    if (handlers_.on_close) {
      handlers_.on_close(id);
    }
  }

  WsConnectionId IdOf(Hdl h) {
    std::lock_guard lock(mu_);
    auto it = ids_.find(h);
    return it == ids_.end() ? 0 : it->second;
  }

  WebSocketHandlers handlers_;
  Server server_;
  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;
  int port_ = 0;
  std::mutex mu_;
  WsConnectionId next_id_ = 0;                               // Guarded by mu_.
  std::map<WsConnectionId, Hdl> conns_;                      // Guarded by mu_.
  std::map<Hdl, WsConnectionId, std::owner_less<Hdl>> ids_;  // Guarded by mu_.
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
