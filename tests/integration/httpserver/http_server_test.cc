// sbx's one HTTP server (httpserver/http_server.h) over real loopback sockets: port 0, the
// request it hands over, keep-alive, every bound (head 431, body 413 with a lingering close,
// check_head before the body, connections, the request and write deadlines), streaming and
// PeerClosed, the upgrade hook, and TLS. The adapters' own tests (API, webhook, health,
// emulator) cover what they add.
#include "httpserver/http_server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/http_test_client.h"
#include "tests/support/poll.h"
#include "tests/support/process.h"
#include "tests/support/raw_connection.h"

namespace sbx::httpserver {
namespace {

using namespace std::chrono_literals;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::RawConnection;

// A server whose handler records each request and answers 200 with the path.
class Recording {
 public:
  explicit Recording(HttpServerOptions options = {})
      : server_(
            [this](HttpExchange& x) {
              {
                std::lock_guard lock(mu_);
                requests_.push_back(x.request());
              }
              x.Respond({200, "text/plain", {{"X-Seen", "yes"}}, x.request().path});
            },
            std::move(options)) {}

  int Start() {
    api::StatusOr<int> port = server_.Start("127.0.0.1", 0);
    EXPECT_TRUE(port.ok()) << port.status();
    return port.ok() ? *port : 0;
  }
  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  HttpServer& server() { return server_; }

 private:
  mutable std::mutex mu_;
  std::vector<HttpRequest> requests_;  // Guarded by mu_.
  HttpServer server_;
};

std::string Url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

TEST(HttpServerTest, BindsPortZeroAndHandsOverTheRequestOnAKeptAliveConnection) {
  Recording r;
  const int port = r.Start();
  ASSERT_GT(port, 0);
  EXPECT_EQ(r.server().port(), port);
  HttpTestClient client(Url(port));
  const auto first = client.Call("POST", "/a%20b/c?x=1&y=two+words", "body", {{"X-Thing", "v"}});
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "/a b/c");
  EXPECT_EQ(first.Header("X-Seen"), "yes");
  EXPECT_EQ(client.Call("GET", "/again").status, 200);
  ASSERT_EQ(r.requests().size(), 2u);
  const HttpRequest got = r.requests()[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/a%20b/c?x=1&y=two+words");
  EXPECT_EQ(got.segments, (std::vector<std::string>{"a b", "c"}));
  EXPECT_EQ(got.query.at("y"), "two words");
  EXPECT_EQ(got.Header("X-THING"), "v");
  EXPECT_EQ(got.body, "body");
  EXPECT_EQ(got.peer_address, "127.0.0.1");
  EXPECT_GT(got.peer_port, 0);
  EXPECT_EQ(got.local_port, port);
  EXPECT_EQ(got.remote, "127.0.0.1:" + std::to_string(got.peer_port));
  // Keep-alive: two requests, one connection.
  RawConnection c(port);
  ASSERT_TRUE(c.Send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string both = c.ReadUntilClosed(1s);
  EXPECT_NE(both.find("\r\n\r\n/1HTTP/1.1 200"), std::string::npos) << both;
  EXPECT_TRUE(both.ends_with("/2")) << both;
  EXPECT_FALSE(c.closed());
  ASSERT_EQ(r.requests().size(), 4u);
  EXPECT_EQ(r.requests()[2].peer_port, r.requests()[3].peer_port);
}

// A HEAD answer has the headers of the GET answer and no body, so the next answer on the
// connection is read as such.
TEST(HttpServerTest, AHeadAnswerCarriesNoBody) {
  Recording r;
  RawConnection c(r.Start());
  ASSERT_TRUE(c.Send("HEAD /abc HTTP/1.1\r\nHost: x\r\n\r\nGET /de HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string both = c.ReadUntilClosed(1s);
  EXPECT_TRUE(both.starts_with("HTTP/1.1 200")) << both;
  EXPECT_NE(both.find("Content-Length: 4\r\n"), std::string::npos) << both;
  EXPECT_NE(both.find("\r\n\r\nHTTP/1.1 200"), std::string::npos) << both;
  EXPECT_TRUE(both.ends_with("\r\n\r\n/de")) << both;
}

TEST(HttpServerTest, AnAddressInUseIsUnavailableAndABadOneInvalid) {
  Recording first;
  const int port = first.Start();
  HttpServer second([](HttpExchange& x) { x.Respond({}); }, {});
  EXPECT_EQ(second.Start("127.0.0.1", port).status().code(), api::StatusCode::kUnavailable);
  HttpServer third([](HttpExchange& x) { x.Respond({}); }, {});
  EXPECT_EQ(third.Start("localhost", 0).status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_EQ(first.server().Start("127.0.0.1", 0).status().code(),
            api::StatusCode::kFailedPrecondition);
}

TEST(HttpServerTest, AHeadOverTheLimitIs431AndClosed) {
  HttpServerOptions options;
  options.max_head_bytes = 1024;
  Recording r(options);
  const int port = r.Start();
  RawConnection c(port);
  ASSERT_TRUE(c.Send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n"));
  const std::string answer = c.ReadUntilClosed(10s);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 431")) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_TRUE(c.closed());
  EXPECT_TRUE(r.requests().empty());
}

// The 413 goes out as soon as the head announces too much, while the client still writes: the
// server drains before it closes, or the reset would destroy the answer. Three fresh rounds.
TEST(HttpServerTest, ABodyOverTheLimitIs413AndTheAnswerArrives) {
  HttpServerOptions options;
  options.max_body_bytes = 64 << 10;
  options.error_response = [](int status, std::string_view reason, std::string_view) {
    return HttpResponse{status, "text/plain", {}, std::string(reason)};
  };
  Recording r(options);
  const int port = r.Start();
  const std::string big(size_t{4} << 20, 'x');
  for (int round = 0; round < 3; ++round) {
    HttpTestClient client(Url(port));
    const auto answer = client.Call("POST", "/", big);
    EXPECT_EQ(answer.status, 413) << round;
    EXPECT_EQ(answer.body, "RequestEntityTooLarge") << round;
  }
  EXPECT_TRUE(r.requests().empty());
}

TEST(HttpServerTest, BodyTooLargeAnswersFromTheHead) {
  HttpServerOptions options;
  options.max_body_bytes = 10;
  options.body_too_large = [](const HttpRequest& head) {
    return HttpResponse{413, "text/plain", {}, "too much for " + head.path};
  };
  Recording r(options);
  HttpTestClient client(Url(r.Start()));
  const auto answer = client.Call("POST", "/hook", std::string(100, 'x'));
  EXPECT_EQ(answer.status, 413);
  EXPECT_EQ(answer.body, "too much for /hook");
}

// #24: a refused head is answered without its body being read, let alone buffered.
TEST(HttpServerTest, CheckHeadRefusesBeforeTheBodyIsRead) {
  HttpServerOptions options;
  options.check_head = [](const HttpRequest& head) -> std::optional<HttpResponse> {
    if (head.Header("authorization") == "Bearer good") {
      return std::nullopt;
    }
    EXPECT_TRUE(head.body.empty());
    return HttpResponse{401, "text/plain", {}, "who are you\n"};
  };
  Recording r(options);
  const int port = r.Start();
  RawConnection anonymous(port);
  ASSERT_TRUE(anonymous.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n"));
  const std::string answer = anonymous.ReadUntilClosed(10s);
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 401")) << answer;
  EXPECT_TRUE(anonymous.closed()) << "the server waited for a body it would not use";
  HttpTestClient client(Url(port));
  EXPECT_EQ(client.Call("POST", "/y", "{}", {{"Authorization", "Bearer good"}}).status, 200);
  ASSERT_EQ(r.requests().size(), 1u);
  EXPECT_EQ(r.requests()[0].body, "{}");
}

// A whole request must arrive within read_timeout, however it trickles.
TEST(HttpServerTest, TheReadTimeoutClosesASlowClient) {
  HttpServerOptions options;
  options.read_timeout = 500ms;
  Recording r(options);
  const int port = r.Start();
  RawConnection slow(port);
  ASSERT_TRUE(slow.Send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"));
  const auto start = std::chrono::steady_clock::now();
  bool open = true;
  while (open && std::chrono::steady_clock::now() - start < 5s) {
    open = slow.Send("x");  // the attacker's pace, not a wait for state
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(open) << "a trickling client outlived a 500 ms request deadline";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_TRUE(r.requests().empty());
}

// At max_connections a new connection closes the one that has waited longest for its request;
// when every connection is being handled, the new one is closed.
TEST(HttpServerTest, TheConnectionLimitEvictsTheOldestIdleOrRefusesTheNewest) {
  std::atomic<bool> release{false};
  std::atomic<int> handling{0};
  HttpServerOptions options;
  options.max_connections = 2;
  HttpServer server(
      [&](HttpExchange& x) {
        ++handling;
        while (!release.load() && x.request().path == "/hold") {
          std::this_thread::sleep_for(5ms);
        }
        x.Respond({200, "text/plain", {}, "ok"});
      },
      options);
  const int port = *server.Start("127.0.0.1", 0);
  // One after the other as the server sees them: which is the oldest must not be up to the
  // order in which two connects are accepted (the suite under load once saw idle2 first).
  RawConnection idle1(port);
  ASSERT_TRUE(PollUntil([&] { return server.open_connections() == 1; }, In(5s)));
  RawConnection idle2(port);
  ASSERT_TRUE(PollUntil([&] { return server.open_connections() == 2; }, In(5s)));
  HttpTestClient client(Url(port));
  EXPECT_EQ(client.Call("GET", "/now").status, 200);
  idle1.ReadUntilClosed(5s);
  EXPECT_TRUE(idle1.closed()) << "the oldest idle connection was not evicted";

  RawConnection hold1(port);
  ASSERT_TRUE(hold1.Send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(PollUntil([&] { return handling.load() == 2; }, In(5s)));
  RawConnection hold2(port);  // evicts idle2 if still open, else fills the last slot
  ASSERT_TRUE(hold2.Send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(PollUntil([&] { return handling.load() == 3; }, In(5s)));
  RawConnection refused(port);
  refused.ReadUntilClosed(5s);
  EXPECT_TRUE(refused.closed()) << "a connection over the limit stayed open";
  release = true;
  EXPECT_TRUE(hold1.ReadUntilClosed(1s).starts_with("HTTP/1.1 200"));
}

TEST(HttpServerTest, StreamsChunksAndSeesThePeerGo) {
  std::atomic<bool> saw_peer_close{false};
  HttpServer server(
      [&](HttpExchange& x) {
        x.StartStream({200, "text/event-stream", {}, ""});
        if (x.request().path == "/forever") {
          saw_peer_close = PollUntil([&] { return x.PeerClosed(); }, In(10s));
          EXPECT_TRUE(x.request().client_gone());
          return;
        }
        EXPECT_TRUE(x.WriteChunk("one "));
        EXPECT_TRUE(x.WriteChunk(""));
        EXPECT_TRUE(x.WriteChunk("two"));
        EXPECT_TRUE(x.FinishStream());
      },
      {});
  const int port = *server.Start("127.0.0.1", 0);
  HttpTestClient client(Url(port));
  const auto streamed = client.Call("GET", "/once");
  EXPECT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.body, "one two");
  {
    RawConnection c(port);
    ASSERT_TRUE(c.Send("GET /forever HTTP/1.1\r\nHost: x\r\n\r\n"));
  }  // closed
  EXPECT_TRUE(PollUntil([&] { return saw_peer_close.load(); }, In(10s)));
}

// A peer that reads nothing of a long answer is dropped after write_timeout.
TEST(HttpServerTest, TheWriteTimeoutDropsAPeerThatDoesNotRead) {
  std::atomic<bool> write_failed{false};
  HttpServerOptions options;
  options.write_timeout = 300ms;
  HttpServer server(
      [&](HttpExchange& x) {
        x.StartStream({200, "application/octet-stream", {}, ""});
        const std::string chunk(size_t{1} << 20, 'x');
        const auto start = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - start < 30s) {
          if (!x.WriteChunk(chunk)) {
            write_failed = true;
            return;
          }
        }
      },
      options);
  const int port = *server.Start("127.0.0.1", 0);
  RawConnection deaf(port);
  ASSERT_TRUE(deaf.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(PollUntil([&] { return write_failed.load(); }, In(10s)));
}

TEST(HttpServerTest, AHandlerThatThrowsOrDoesNotAnswerGets500) {
  HttpServer server(
      [](HttpExchange& x) {
        if (x.request().path == "/throw") {
          throw std::runtime_error("boom");
        }
      },
      {});
  HttpTestClient client(Url(*server.Start("127.0.0.1", 0)));
  const auto thrown = client.Call("GET", "/throw");
  EXPECT_EQ(thrown.status, 500);
  EXPECT_EQ(thrown.body.find("boom"), std::string::npos) << "exception text leaked";
  EXPECT_EQ(client.Call("GET", "/silent").status, 500);
}

// The upgrade hook takes the socket over: it answers 101 itself and then owns the connection,
// which the server no longer times out, reads or closes. Other requests still reach the handler.
TEST(HttpServerTest, TheUpgradeHookTakesTheSocketOver) {
  std::vector<std::jthread> echoes;
  std::mutex mu;
  HttpServerOptions options;
  options.read_timeout = 300ms;  // would close the connection if the server still owned it
  options.upgrade = [&](HttpExchange& x) {
    if (x.request().Header("upgrade") != "echo") {
      x.Respond({426, "text/plain", {}, "echo only\n"});
      return;
    }
    TakenSocket taken = x.TakeSocket();
    ASSERT_GE(taken.fd, 0);
    EXPECT_FALSE(x.Respond({}));  // nothing more goes out through the server
    std::lock_guard lock(mu);
    echoes.emplace_back([fd = taken.fd] {
      const std::string ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n\r\n";
      ::send(fd, ok.data(), ok.size(), MSG_NOSIGNAL);
      char buf[256];
      ssize_t n = 0;
      while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
        ::send(fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
      ::close(fd);
    });
  };
  Recording r(options);
  const int port = r.Start();
  {
    RawConnection c(port);
    ASSERT_TRUE(
        c.Send("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"));
    std::this_thread::sleep_for(800ms);  // past read_timeout: the server must not close it
    ASSERT_TRUE(c.Send("hello"));
    const std::string got = c.ReadUntilClosed(1500ms);
    EXPECT_TRUE(got.starts_with("HTTP/1.1 101")) << got;
    EXPECT_NE(got.find("hello"), std::string::npos) << got;
    EXPECT_FALSE(c.closed());
  }
  RawConnection refused(port);
  ASSERT_TRUE(
      refused.Send("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: other\r\n\r\n"));
  EXPECT_TRUE(refused.ReadUntilClosed(5s).starts_with("HTTP/1.1 426"));
  HttpTestClient client(Url(port));
  EXPECT_EQ(client.Call("GET", "/plain").status, 200);
  r.server().Stop();
  std::lock_guard lock(mu);
  echoes.clear();  // each ends when its client closed
}

TEST(HttpServerTest, StopClosesOpenConnectionsAndJoins) {
  Recording r;
  const int port = r.Start();
  RawConnection idle(port);
  ASSERT_TRUE(PollUntil([&] { return r.server().open_connections() == 1; }, In(5s)));
  r.server().Stop();
  idle.ReadUntilClosed(5s);
  EXPECT_TRUE(idle.closed());
  EXPECT_EQ(r.server().open_connections(), 0u);
  r.server().Stop();  // idempotent
}

// TLS with a private certificate: a Beast client that trusts it gets the answer; a plain-text
// client gets none.
TEST(HttpServerTest, ServesOverTls) {
  namespace asio = boost::asio;
  namespace ssl = asio::ssl;
  namespace http = boost::beast::http;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("httpserver_tls_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cert = dir / "cert.pem";
  const auto key = dir / "key.pem";
  const auto openssl =
      sbx::testing::RunProcess("/usr/bin/openssl",
                               {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                                key.string(), "-out", cert.string(), "-days", "1", "-subj",
                                "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"},
                               dir);
  ASSERT_EQ(openssl.exit_code, 0) << openssl.err;
  HttpServerOptions options;
  options.tls_cert_file = cert.string();
  options.tls_key_file = (dir / "missing.pem").string();
  {
    Recording bad(options);
    const auto started = bad.server().Start("127.0.0.1", 0);
    EXPECT_EQ(started.status().code(), api::StatusCode::kInvalidArgument);
    EXPECT_NE(started.status().message().find("missing.pem"), std::string::npos);
  }
  options.tls_key_file = key.string();
  Recording r(options);
  const int port = r.Start();

  asio::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(cert.string());
  ctx.set_verify_mode(ssl::verify_peer);
  ssl::stream<asio::ip::tcp::socket> stream(ioc, ctx);
  stream.next_layer().connect({asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)});
  stream.handshake(ssl::stream_base::client);
  http::request<http::string_body> req{http::verb::get, "/secure", 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(stream, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(stream, buffer, res);
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(res.body(), "/secure");

  RawConnection plain(port);
  ASSERT_TRUE(plain.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_FALSE(plain.ReadUntilClosed(5s).starts_with("HTTP/1.1 200"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sbx::httpserver
