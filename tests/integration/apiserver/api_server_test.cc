// sbxd's API server over real loopback HTTP(S) and a real SQLite file: roles, apply, watch,
// TLS, and exec / executor logs proxied to the sandbox (real processes, run by the fake cloud's
// exec handler with the sandbox home mapped to a temp directory).
#include "controller/apiserver/api_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "api/codec.h"
#include "api/defaults.h"
#include "controller/apiclient/http_store.h"
#include "controller/apiserver/http_server.h"
#include "controller/apiserver/tokens.h"
#include "controller/apiwire/api_wire.h"
#include "controller/base/clock.h"
#include "controller/cloud/http/cpprest_tls.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/sandbox_commands.h"
#include "controller/server/log.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/support/http_test_client.h"
#include "tests/support/poll.h"
#include "tests/support/process.h"
#include "tests/support/raw_connection.h"

namespace sbx::controller::apiserver {
namespace {

namespace fs = std::filesystem;
using apiwire::DecodeCommandResult;
using apiwire::ExecRequest;
namespace db = databricks;
using json = nlohmann::json;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;

constexpr char kViewer[] = "viewer-token-0123456789abcdef";
constexpr char kEditor[] = "editor-token-0123456789abcdef";
constexpr char kAdmin[] = "admin-token-0123456789abcdef0";
constexpr char kPrefix[] = "/apis/sbx.dev/v1alpha1";

fs::path MakeTempDir() {
  fs::path p = fs::temp_directory_path() /
               ("sbx-apiserver-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
  fs::create_directories(p);
  return p;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    home_ = dir_ / "home";
    fs::create_directories(home_);
    auto a = SqliteStore::Open((dir_ / "sbx.db").string());
    auto w = SqliteStore::Open((dir_ / "sbx.db").string());
    ASSERT_TRUE(a.ok() && w.ok());
    store_ = *std::move(a);
    watch_store_ = *std::move(w);
    auto tokens = TokenTable::Parse(*TokenLine("ci-viewer", "viewer", kViewer) + "\n" +
                                        *TokenLine("ci-editor", "editor", kEditor) + "\n" +
                                        *TokenLine("alice", "admin", kAdmin) + "\n",
                                    "tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    tokens_ = *std::move(tokens);

    db::Sandbox running;
    running.sandbox_id = "default-box";
    running.state = db::SandboxState::kRunning;
    clouds_.api("default/default").Put(running);
    // The "sandbox": the command runs as a real process, its home mapped to a temp directory.
    clouds_.api("default/default")
        .SetExecHandler([this](const std::string& sandbox_id, const db::ExecRequest& r) {
          {
            std::lock_guard lock(exec_mu_);
            exec_ids_.push_back(sandbox_id);
          }
          std::vector<std::string> args;
          for (const std::string& a : r.args) {
            args.push_back(Replace(a, "/home/sandbox-agent", home_.string()));
          }
          sbx::testing::RunResult run = sbx::testing::RunProcess(r.cmd, args, dir_);
          db::ExecResult result;
          result.status = db::ExecStatus::kCompleted;
          result.exit_code = run.exit_code;
          result.stdout_text = run.out;
          result.stderr_text = run.err;
          return result;
        });
    StartServer({});
    Seed();
  }

  void TearDown() override {
    StopServer();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void StartServer(HttpServerOptions http_options, ApiServerOptions options = {}) {
    options.log_poll = std::chrono::milliseconds(100);
    api_ =
        std::make_unique<ApiServer>(*store_, *watch_store_, tokens_, &commands_, clock_, options);
    ASSERT_TRUE(api_->Start().ok());
    if (http_options.max_body_bytes == HttpServerOptions{}.max_body_bytes) {
      http_options.max_body_bytes = 64 * 1024;
    }
    // As sbxd wires it: the token is checked from the head.
    http_options.check_head = [this](const HttpRequest& head) { return api_->CheckHead(head); };
    http_ =
        std::make_unique<HttpServer>([this](HttpExchange& x) { api_->Handle(x); }, http_options);
    auto port = http_->Start("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  void StopServer() {
    if (api_) {
      api_->Stop();
    }
    if (http_) {
      http_->Stop();
    }
  }

  // A Sandbox "box" (RUNNING) and an AgentWorker "w" on it.
  void Seed() {
    api::Object box = api::MakeObject(api::Kind::kSandbox, "box");
    box.metadata.labels["team"] = "a";
    api::ApplyDefaults(box);
    api::Object worker = api::MakeObject(api::Kind::kAgentWorker, "w");
    worker.agent_worker_spec().sandbox_ref = "box";
    api::ApplyDefaults(worker);
    auto applied = store_->Apply({box, worker}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
    api::Object stored = applied->at(0).object;
    stored.sandbox_status().state = "RUNNING";
    stored.sandbox_status().sandbox_name = "sandboxes/default-box";  // as the reconciler records
    stored.sandbox_status().workspace_ref = "default";
    ASSERT_TRUE(store_->UpdateStatus(stored).ok());
  }
  // The sandbox ids the fake cloud was asked to exec in.
  std::vector<std::string> ExecIds() {
    std::lock_guard lock(exec_mu_);
    return exec_ids_;
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  sbx::testing::HttpResult Call(const std::string& method, const std::string& path,
                                const std::string& token, const std::string& body = "") {
    HttpTestClient client(Url());
    if (!token.empty()) {
      client.SetHeader("Authorization", std::string("Bearer ") + token);
    }
    return client.Call(method, path, body);
  }

  static std::string ApplyBody(const std::string& file, const std::string& yaml,
                               const std::string& extra = "") {
    json body{{"manifests", json::array({json{{"file", file}, {"content", yaml}}})}};
    if (!extra.empty()) {
      body.update(json::parse(extra));
    }
    return body.dump();
  }

  // The first `n` lines of a watch (or follow) stream.
  std::vector<std::string> StreamLines(
      const std::string& path, const std::string& token, size_t n,
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto transport = http::MakeCppRestStreamingTransport();
    http::HttpRequest request;
    request.method = "GET";
    request.url = Url() + path;
    request.headers.emplace_back("Authorization", std::string("Bearer ") + token);
    request.timeout = timeout;
    std::string buffer;
    std::vector<std::string> lines;
    http::StreamHandlers handlers;
    handlers.on_data = [&](std::string_view chunk) {
      buffer.append(chunk);
      for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
        lines.push_back(buffer.substr(0, nl));
        buffer.erase(0, nl + 1);
      }
      return lines.size() < n;
    };
    http::HttpResult r = transport->Stream(request, handlers, {});
    last_stream_status_ = r.response.status;
    last_stream_body_ = r.response.body;
    return lines;
  }

  fs::path dir_;
  fs::path home_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<SqliteStore> watch_store_;
  TokenTable tokens_ = *TokenTable::Parse("", "none");
  sbx::testing::FakeCloudClients clouds_;
  CloudSandboxCommands commands_{clouds_};
  std::mutex exec_mu_;
  std::vector<std::string> exec_ids_;  // guarded by exec_mu_
  SystemClock clock_;
  std::unique_ptr<ApiServer> api_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  int last_stream_status_ = 0;
  std::string last_stream_body_;
};

const char kNewSandbox[] = R"(apiVersion: sbx.dev/v1alpha1
kind: Sandbox
metadata:
  name: fresh
spec:
  displayName: fresh
)";

TEST_F(ApiServerTest, RoleMatrixOfReadApplyDeleteAndExec) {
  struct Row {
    const char* token;
    int read, apply, del, exec;
  };
  const Row rows[] = {
      {kViewer, 200, 403, 403, 403}, {kEditor, 200, 200, 200, 403}, {kAdmin, 200, 200, 200, 200}};
  for (const Row& row : rows) {
    SCOPED_TRACE(row.token);
    EXPECT_EQ(
        Call("GET", std::string(kPrefix) + "/namespaces/default/sandboxes/box", row.token).status,
        row.read);
    EXPECT_EQ(
        Call("POST", std::string(kPrefix) + "/apply", row.token, ApplyBody("a.yaml", kNewSandbox))
            .status,
        row.apply);
    EXPECT_EQ(
        Call("DELETE", std::string(kPrefix) + "/namespaces/default/sandboxes/fresh", row.token)
            .status,
        row.del)
        << "delete";
    EXPECT_EQ(Call("POST", std::string(kPrefix) + "/namespaces/default/sandboxes/box/exec",
                   row.token, R"({"command":["/bin/true"]})")
                  .status,
              row.exec);
  }
}

TEST_F(ApiServerTest, NoTokenOrAnUnknownTokenIs401) {
  auto none = Call("GET", std::string(kPrefix) + "/sandboxes", "");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(json::parse(none.body)["reason"], "Unauthorized");
  EXPECT_EQ(Call("GET", std::string(kPrefix) + "/sandboxes", "not-a-known-token-at-all").status,
            401);
  // A forbidden call says which role it needs, and never echoes the token.
  auto forbidden = Call("POST", std::string(kPrefix) + "/apply", kViewer, ApplyBody("a", ""));
  EXPECT_EQ(forbidden.status, 403);
  EXPECT_NE(forbidden.body.find("editor"), std::string::npos) << forbidden.body;
  EXPECT_EQ(forbidden.body.find(kViewer), std::string::npos);
}

TEST_F(ApiServerTest, ApplyErrorsNameFileLineAndColumnAndChangeNothing) {
  const std::string bad = std::string(kNewSandbox) + "  power: Sometimes\n  bogus: 1\n";
  auto before = store_->CurrentRevision();
  auto r = Call("POST", std::string(kPrefix) + "/apply", kEditor,
                R"({"manifests":[{"file":"ok.yaml","content":)" + json(kNewSandbox).dump() +
                    R"(},{"file":"team/bad.yaml","content":)" + json(bad).dump() + "}]}");
  EXPECT_EQ(r.status, 422) << r.body;
  const json status = json::parse(r.body);
  EXPECT_EQ(status["reason"], "Invalid");
  ASSERT_FALSE(status["details"]["causes"].empty());
  const std::string first = status["details"]["causes"][0]["message"];
  EXPECT_TRUE(std::regex_search(first, std::regex("^team/bad\\.yaml:[78]:3: spec\\."))) << r.body;
  EXPECT_EQ(*store_->CurrentRevision(), *before);  // the good file was not applied either
  EXPECT_EQ(store_->Get({api::Kind::kSandbox, "default", "fresh"}).status().code(),
            api::StatusCode::kNotFound);
}

TEST_F(ApiServerTest, ApplyDryRunPruneAndApplysetAsTheCli) {
  auto dry = Call("POST", std::string(kPrefix) + "/apply", kEditor,
                  ApplyBody("a.yaml", kNewSandbox, R"({"dryRun":true,"applyset":"s"})"));
  ASSERT_EQ(dry.status, 200) << dry.body;
  EXPECT_EQ(json::parse(dry.body)["results"][0]["action"], "created");
  EXPECT_EQ(store_->Get({api::Kind::kSandbox, "default", "fresh"}).status().code(),
            api::StatusCode::kNotFound);
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kEditor,
                 ApplyBody("a.yaml", kNewSandbox, R"({"applyset":"s"})"))
                .status,
            200);
  // An empty prune is refused, then the member is pruned when another object replaces it.
  auto empty = Call("POST", std::string(kPrefix) + "/apply", kEditor,
                    R"({"manifests":[],"prune":true,"applyset":"s"})");
  EXPECT_EQ(empty.status, 409) << empty.body;
  EXPECT_EQ(
      Call("POST", std::string(kPrefix) + "/apply", kEditor, R"({"manifests":[],"prune":true})")
          .status,
      422);
  const std::string other = Replace(kNewSandbox, "fresh", "other");
  auto pruned = Call("POST", std::string(kPrefix) + "/apply", kEditor,
                     ApplyBody("b.yaml", other, R"({"prune":true,"applyset":"s"})"));
  ASSERT_EQ(pruned.status, 200) << pruned.body;
  std::set<std::string> actions;
  const json results = json::parse(pruned.body)["results"];
  for (const json& result : results) {
    actions.insert(result["action"].get<std::string>());
  }
  EXPECT_EQ(actions, (std::set<std::string>{"created", "pruned"}));
}

TEST_F(ApiServerTest, ListFiltersByLabelsAndSpansNamespaces) {
  api::Object elsewhere = api::MakeObject(api::Kind::kSandbox, "far", "prod");
  api::ApplyDefaults(elsewhere);
  ASSERT_TRUE(store_->Apply({elsewhere}, {}).ok());
  auto all = Call("GET", std::string(kPrefix) + "/sandboxes", kViewer);
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(json::parse(all.body)["items"].size(), 2u);
  auto ns = Call("GET", std::string(kPrefix) + "/namespaces/prod/sandboxes", kViewer);
  EXPECT_EQ(json::parse(ns.body)["items"].size(), 1u);
  auto labelled = Call("GET", std::string(kPrefix) + "/sandboxes?labelSelector=team%3Da", kViewer);
  const json items = json::parse(labelled.body)["items"];
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["metadata"]["name"], "box");
  EXPECT_FALSE(json::parse(all.body)["metadata"]["resourceVersion"].get<std::string>().empty());
}

TEST_F(ApiServerTest, WatchResumesFromAResourceVersion) {
  auto list = Call("GET", std::string(kPrefix) + "/namespaces/default/sandboxes", kViewer);
  const std::string rv = json::parse(list.body)["metadata"]["resourceVersion"];
  // Two changes after the list, made while nobody watches.
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kEditor, ApplyBody("a.yaml", kNewSandbox))
                .status,
            200);
  ASSERT_EQ(
      Call("DELETE", std::string(kPrefix) + "/namespaces/default/sandboxes/fresh", kEditor).status,
      200);
  const auto lines = StreamLines(
      std::string(kPrefix) + "/namespaces/default/sandboxes?watch=true&resourceVersion=" + rv,
      kViewer, 2);
  ASSERT_EQ(lines.size(), 2u) << last_stream_status_ << " " << last_stream_body_;
  EXPECT_EQ(json::parse(lines[0])["type"], "ADDED");
  EXPECT_EQ(json::parse(lines[0])["object"]["metadata"]["name"], "fresh");
  EXPECT_EQ(json::parse(lines[1])["type"], "DELETED");
  // Resuming from the first event's version yields only the second.
  const std::string first_rv =
      std::to_string(json::parse(lines[0])["object"]["metadata"]["resourceVersion"].get<int64_t>());
  const auto resumed = StreamLines(
      std::string(kPrefix) + "/namespaces/default/sandboxes?watch=true&resourceVersion=" + first_rv,
      kViewer, 1);
  ASSERT_EQ(resumed.size(), 1u);
  EXPECT_EQ(json::parse(resumed[0])["type"], "DELETED");
}

TEST_F(ApiServerTest, WatchFromACompactedVersionIsGone) {
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kEditor, ApplyBody("a.yaml", kNewSandbox))
                .status,
            200);
  ASSERT_TRUE(store_->CompactChanges(*store_->CurrentRevision()).ok());
  StreamLines(std::string(kPrefix) + "/namespaces/default/sandboxes?watch=true&resourceVersion=1",
              kViewer, 1);
  EXPECT_EQ(last_stream_status_, 410);
  EXPECT_EQ(json::parse(last_stream_body_)["reason"], "Expired");
}

TEST_F(ApiServerTest, WatchStreamsChangesAsTheyHappen) {
  std::vector<std::string> lines;
  std::jthread watcher([&] {
    lines =
        StreamLines(std::string(kPrefix) + "/namespaces/default/sandboxes?watch=true", kViewer, 3);
  });
  // The initial state (box) comes first; then the new object while the watch is open.
  ASSERT_TRUE(PollUntil([&] { return api_->active_watches() == 1; }, In(std::chrono::seconds(10))));
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kEditor, ApplyBody("a.yaml", kNewSandbox))
                .status,
            200);
  ASSERT_EQ(
      Call("DELETE", std::string(kPrefix) + "/namespaces/default/sandboxes/fresh", kEditor).status,
      200);
  watcher.join();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(json::parse(lines[0])["object"]["metadata"]["name"], "box");
  EXPECT_EQ(json::parse(lines[1])["type"], "ADDED");
  EXPECT_EQ(json::parse(lines[2])["type"], "DELETED");
}

TEST_F(ApiServerTest, TwoHundredWatchersAllSeeOneChange) {
  constexpr int kWatchers = 200;
  std::atomic<int> saw{0};
  std::vector<std::jthread> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    watchers.emplace_back([&] {
      const auto lines = StreamLines(
          std::string(kPrefix) + "/namespaces/default/sandboxes?watch=true&resourceVersion=" +
              std::to_string(*store_->CurrentRevision()),
          kViewer, 1, std::chrono::seconds(60));
      if (lines.size() == 1 && json::parse(lines[0])["object"]["metadata"]["name"] == "fresh") {
        ++saw;
      }
    });
  }
  ASSERT_TRUE(
      PollUntil([&] { return api_->active_watches() == kWatchers; }, In(std::chrono::seconds(60))))
      << api_->active_watches();
  // Reads are still served while 200 watches are open.
  EXPECT_EQ(Call("GET", std::string(kPrefix) + "/sandboxes", kViewer).status, 200);
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kEditor, ApplyBody("a.yaml", kNewSandbox))
                .status,
            200);
  watchers.clear();  // joins
  EXPECT_EQ(saw.load(), kWatchers);
}

TEST_F(ApiServerTest, EveryMutationIsAnEventNamingTheToken) {
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kEditor, ApplyBody("a.yaml", kNewSandbox))
                .status,
            200);
  auto events =
      Call("GET", std::string(kPrefix) + "/namespaces/default/sandboxes/fresh/events", kViewer);
  ASSERT_EQ(events.status, 200);
  const json items = json::parse(events.body)["items"];
  ASSERT_EQ(items.size(), 1u) << events.body;
  EXPECT_EQ(items[0]["reason"], "AppliedByApi");
  EXPECT_NE(items[0]["message"].get<std::string>().find("\"ci-editor\""), std::string::npos);
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/namespaces/default/sandboxes/box/exec", kAdmin,
                 R"({"command":["/bin/echo","secret-argument"]})")
                .status,
            200);
  auto exec_events =
      Call("GET", std::string(kPrefix) + "/namespaces/default/sandboxes/box/events", kViewer);
  const std::string exec_message =
      json::parse(exec_events.body)["items"].at(0)["message"].get<std::string>();
  EXPECT_NE(exec_message.find("\"alice\""), std::string::npos) << exec_events.body;
  EXPECT_EQ(exec_events.body.find("secret-argument"), std::string::npos);  // only the program
}

// DESIGN §8.3: every write through the API is one audit record naming the token, its role and
// the result, in the write's transaction; a refused write is recorded too; the log has no
// secret and no body (only the spec's digest); only an admin reads it, through HttpStore too.
TEST_F(ApiServerTest, EveryWriteAndRefusalIsAnAuditRecordThatOnlyAnAdminReads) {
  const std::string audit = std::string(kPrefix) + "/audit";
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kEditor, ApplyBody("a.yaml", kNewSandbox))
                .status,
            200);
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/apply", kViewer,
                 ApplyBody("b.yaml", Replace(kNewSandbox, "fresh", "other")))
                .status,
            403);
  ASSERT_EQ(
      Call("DELETE", std::string(kPrefix) + "/namespaces/default/sandboxes/fresh", kEditor).status,
      200);
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/namespaces/default/sandboxes/box/exec", kAdmin,
                 R"({"command":["/bin/echo","secret-argument"]})")
                .status,
            200);
  ASSERT_EQ(Call("POST", std::string(kPrefix) + "/namespaces/default/sandboxes/box/exec", kEditor,
                 R"({"command":["/bin/true"]})")
                .status,
            403);

  EXPECT_EQ(Call("GET", audit, kViewer).status, 403);
  EXPECT_EQ(Call("GET", audit, kEditor).status, 403);
  auto read = Call("GET", audit, kAdmin);
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(read.body.find("secret-argument"), std::string::npos);
  EXPECT_EQ(read.body.find("displayName"), std::string::npos);  // no manifest body
  auto records = apiwire::DecodeAudit(read.body);
  ASSERT_TRUE(records.ok()) << records.status();
  std::vector<std::string> got;
  for (const Store::AuditRecord& r : *records) {
    got.push_back(r.actor + " " + r.role + " " + r.verb + " " + r.object.name + " " + r.result +
                  " " + r.source);
  }
  EXPECT_EQ(got, (std::vector<std::string>{
                     "ci-editor editor apply fresh created api",
                     "ci-viewer viewer apply other PERMISSION_DENIED api",
                     "ci-editor editor delete fresh deleted api", "alice admin exec box ok api",
                     "ci-editor editor exec box PERMISSION_DENIED api",
                     // the admin's refused read of the audit log names no object, so it is not
                     // a record; the two refused reads above are not either
                 }));
  EXPECT_EQ(records->at(0).spec_digest.rfind("sha256:", 0), 0u);
  // Filters, and the same through HttpStore (sbxctl audit --context …).
  auto transport = http::MakeCppRestTransport();
  auto streaming = http::MakeCppRestStreamingTransport();
  apiclient::HttpStore admin(*transport, *streaming, {Url(), kAdmin});
  auto editor_only = admin.ListAudit({.actor = "ci-editor"});
  ASSERT_TRUE(editor_only.ok()) << editor_only.status();
  EXPECT_EQ(editor_only->size(), 3u);
  auto after = admin.ListAudit({.after_id = records->at(3).id});
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(after->front().verb, "exec");
  apiclient::HttpStore editor(*transport, *streaming, {Url(), kEditor});
  EXPECT_EQ(editor.ListAudit({}).status().code(), api::StatusCode::kPermissionDenied);
  EXPECT_EQ(Call("GET", audit + "?limit=x", kAdmin).status, 422);  // InvalidArgument
}

// The 413 is sent as soon as the head announces too many bytes, while the client is still
// writing them: the server must read and drop the rest before it closes, or the reset destroys
// the answer (the client saw "Failed to write request body"). 4 MiB against a 64 KiB bound makes
// that race certain; three rounds, each on a fresh connection.
TEST_F(ApiServerTest, RequestBodiesAreBounded) {
  const std::string huge(size_t{4} << 20, 'x');
  for (int round = 0; round < 3; ++round) {
    auto r = Call("POST", std::string(kPrefix) + "/apply", kEditor, json{{"pad", huge}}.dump());
    EXPECT_EQ(r.status, 413) << "round " << round;
    const json body = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(body.is_object() && body.value("reason", "") == "RequestEntityTooLarge") << r.body;
  }
}

// #24: the token is checked from the head. An anonymous client that announces a body gets its
// 401 without sending it (the server never waits for, let alone buffers, what it announced),
// while a client with a token still has its body read.
TEST_F(ApiServerTest, AnAnonymousRequestIsAnsweredFromItsHeadWithoutItsBodyBeingRead) {
  sbx::testing::RawConnection anonymous(port_);
  ASSERT_TRUE(anonymous.ok());
  ASSERT_TRUE(anonymous.Send("POST " + std::string(kPrefix) +
                             "/apply HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "Content-Length: 60000\r\n\r\n"));
  const std::string answer = anonymous.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(answer.starts_with("HTTP/1.1 401")) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_TRUE(anonymous.closed()) << "the server waited for a body it would not use";

  sbx::testing::RawConnection editor(port_);
  const std::string body = ApplyBody("a.yaml", kNewSandbox);
  ASSERT_TRUE(editor.Send("POST " + std::string(kPrefix) + "/apply HTTP/1.1\r\nHost: x\r\n" +
                          "Authorization: Bearer " + kEditor +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\n"
                          "Content-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string applied = editor.ReadUntilClosed(std::chrono::seconds(10));
  EXPECT_TRUE(applied.starts_with("HTTP/1.1 200")) << applied;
}

// #24: connections that have shown no token are bounded apart and time out on their own. Silent
// anonymous peers beyond max_connections cannot lock out a client with a token (the newest
// evicts the oldest of them), and each is closed unauthenticated_timeout after its accept.
TEST_F(ApiServerTest, SilentAnonymousConnectionsNeitherLockOutATokenNorStayOpen) {
  StopServer();
  HttpServerOptions small;
  small.max_connections = 8;
  small.max_unauthenticated_connections = 4;
  small.unauthenticated_timeout = std::chrono::seconds(1);
  StartServer(small);
  std::vector<std::unique_ptr<sbx::testing::RawConnection>> silent;
  for (int i = 0; i < 20; ++i) {
    silent.push_back(std::make_unique<sbx::testing::RawConnection>(port_));
    ASSERT_TRUE(silent.back()->ok());
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Call("GET", std::string(kPrefix) + "/sandboxes", kViewer).status, 200) << i;
  }
  // Every silent one is closed, evicted or timed out, well before read_timeout (60 s).
  for (auto& c : silent) {
    c->ReadUntilClosed(std::chrono::seconds(10));
    EXPECT_TRUE(c->closed());
  }
  EXPECT_TRUE(
      PollUntil([&] { return http_->open_connections() == 0; }, In(std::chrono::seconds(5))));
}

TEST_F(ApiServerTest, ExecRunsInTheSandboxThroughTheServer) {
  auto r = Call("POST", std::string(kPrefix) + "/namespaces/default/sandboxes/box/exec", kAdmin,
                R"({"command":["/bin/sh","-c","echo out; echo err >&2; exit 4"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto result = DecodeCommandResult(r.body);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->stdout_text, "out\n");
  EXPECT_EQ(result->stderr_text, "err\n");
  EXPECT_EQ(result->exit_code, 4);
  // The same through the client sbxctl uses.
  auto transport = http::MakeCppRestTransport();
  auto streaming = http::MakeCppRestStreamingTransport();
  apiclient::HttpStore client(*transport, *streaming, {Url(), kAdmin});
  auto again = client.Exec({api::Kind::kSandbox, "default", "box"}, {"/bin/echo", "hi"},
                           std::chrono::seconds(10));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->stdout_text, "hi\n");
}

// #24: the author of a Sandbox may edit spec.sandboxId after sbx created the sandbox (the
// controller refuses the change, but the store holds it). Exec and the executor log still go to
// the sandbox sbx created; a Sandbox sbx has created nothing for is refused, nothing called.
TEST_F(ApiServerTest, ExecAndExecutorLogGoToTheCreatedSandboxNeverToAnEditedSandboxId) {
  db::Sandbox foreign;
  foreign.sandbox_id = "default-foreign";
  foreign.state = db::SandboxState::kRunning;
  clouds_.api("default/default").Put(foreign);
  auto box = store_->Get({api::Kind::kSandbox, "default", "box"});
  ASSERT_TRUE(box.ok()) << box.status();
  box->sandbox_spec().sandbox_id = "default-foreign";
  ASSERT_TRUE(store_->Apply({*box}, {}).ok());
  const fs::path log = home_ / ".sbx" / "w" / "log";
  fs::create_directories(log.parent_path());
  std::ofstream(log) << "line 1\n";

  auto exec = Call("POST", std::string(kPrefix) + "/namespaces/default/sandboxes/box/exec", kAdmin,
                   R"({"command":["/bin/echo","hi"]})");
  ASSERT_EQ(exec.status, 200) << exec.body;
  auto logs = Call("GET", std::string(kPrefix) + "/namespaces/default/agentworkers/w/log", kViewer);
  ASSERT_EQ(logs.status, 200) << logs.body;
  EXPECT_EQ(ExecIds(), std::vector<std::string>({"default-box", "default-box"}));

  // Nothing created yet: refused, and no call reaches any sandbox.
  api::Object fresh = api::MakeObject(api::Kind::kSandbox, "fresh");
  api::ApplyDefaults(fresh);
  fresh.sandbox_spec().sandbox_id = "default-foreign";
  auto applied = store_->Apply({fresh}, {});
  ASSERT_TRUE(applied.ok()) << applied.status();
  api::Object stored = applied->at(0).object;
  stored.sandbox_status().state = "RUNNING";  // whatever the status says, but no sandboxName
  ASSERT_TRUE(store_->UpdateStatus(stored).ok());
  auto refused = Call("POST", std::string(kPrefix) + "/namespaces/default/sandboxes/fresh/exec",
                      kAdmin, R"({"command":["/bin/echo","hi"]})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("has not been created by sbx"), std::string::npos) << refused.body;
  EXPECT_EQ(ExecIds().size(), 2u);
}

// #24: an executor prints its key; a viewer reading the executor log through the API never sees
// it, read whole or followed, also when the key is split across two reads.
TEST_F(ApiServerTest, TheExecutorLogIsScrubbedOfKnownSecretsReadOrFollowed) {
  const std::string key = "sk-exec-LOGSECRET-7f3a91c2";
  log::RegisterSecret(key);
  StopServer();
  ApiServerOptions options;
  options.scrub_log = [](std::string_view text) { return log::Scrub(text); };
  StartServer({}, options);
  const fs::path log = home_ / ".sbx" / "w" / "log";
  fs::create_directories(log.parent_path());
  std::ofstream(log) << "starting\nkey=" << key << "\n";
  auto whole =
      Call("GET", std::string(kPrefix) + "/namespaces/default/agentworkers/w/log", kViewer);
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.body.find(key), std::string::npos) << whole.body;
  EXPECT_NE(whole.body.find("starting\nkey="), std::string::npos) << whole.body;

  auto transport = http::MakeCppRestTransport();
  auto streaming = http::MakeCppRestStreamingTransport();
  apiclient::HttpStore client(*transport, *streaming, {Url(), kViewer});
  std::mutex mu;
  std::string followed;
  std::stop_source stop;
  std::jthread follower([&] {
    (void)client.ExecutorLog(
        {api::Kind::kAgentWorker, "default", "w"}, -1, true,
        [&](std::string_view bytes) {
          std::lock_guard lock(mu);
          followed.append(bytes);
        },
        stop.get_token());
  });
  ASSERT_TRUE(PollUntil(
      [&] {
        std::lock_guard lock(mu);
        return followed.find("starting") != std::string::npos;
      },
      In(std::chrono::seconds(10))));
  // The key written in two halves, the second only once the first was surely read.
  const size_t reads = ExecIds().size();
  { std::ofstream(log, std::ios::app) << "again=" << key.substr(0, 12) << std::flush; }
  ASSERT_TRUE(
      PollUntil([&] { return ExecIds().size() >= reads + 2; }, In(std::chrono::seconds(10))));
  std::ofstream(log, std::ios::app) << key.substr(12) << "\nend\n";
  EXPECT_TRUE(PollUntil(
      [&] {
        std::lock_guard lock(mu);
        return followed.find("end\n") != std::string::npos;
      },
      In(std::chrono::seconds(10))))
      << followed;
  stop.request_stop();
  std::lock_guard lock(mu);
  EXPECT_EQ(followed.find(key), std::string::npos) << followed;
  EXPECT_EQ(followed.find(key.substr(0, 12)), std::string::npos) << followed;
  EXPECT_NE(followed.find("again="), std::string::npos) << followed;
}

TEST_F(ApiServerTest, ExecutorLogIsReadAndFollowedInTheSandbox) {
  const fs::path log = home_ / ".sbx" / "w" / "log";
  fs::create_directories(log.parent_path());
  std::ofstream(log) << "line 1\nline 2\n";
  auto tail = Call(
      "GET", std::string(kPrefix) + "/namespaces/default/agentworkers/w/log?tailLines=1", kViewer);
  ASSERT_EQ(tail.status, 200) << tail.body;
  EXPECT_EQ(tail.body, "line 2\n");

  auto transport = http::MakeCppRestTransport();
  auto streaming = http::MakeCppRestStreamingTransport();
  apiclient::HttpStore client(*transport, *streaming, {Url(), kViewer});
  std::mutex mu;
  std::string followed;
  std::stop_source stop;
  std::jthread follower([&] {
    ASSERT_TRUE(client
                    .ExecutorLog(
                        {api::Kind::kAgentWorker, "default", "w"}, -1, true,
                        [&](std::string_view bytes) {
                          std::lock_guard lock(mu);
                          followed.append(bytes);
                        },
                        stop.get_token())
                    .ok());
  });
  ASSERT_TRUE(PollUntil(
      [&] {
        std::lock_guard lock(mu);
        return followed == "line 1\nline 2\n";
      },
      In(std::chrono::seconds(10))));
  std::ofstream(log, std::ios::app) << "line 3\n";
  EXPECT_TRUE(PollUntil(
      [&] {
        std::lock_guard lock(mu);
        return followed == "line 1\nline 2\nline 3\n";
      },
      In(std::chrono::seconds(10))))
      << followed;
  stop.request_stop();
}

TEST_F(ApiServerTest, HttpStoreRunsTheStoreInterfaceAgainstTheServer) {
  auto transport = http::MakeCppRestTransport();
  auto streaming = http::MakeCppRestStreamingTransport();
  apiclient::HttpStore client(*transport, *streaming, {Url(), kEditor});
  auto box = client.Get({api::Kind::kSandbox, "default", "box"});
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->sandbox_status().state, "RUNNING");
  const int64_t before = *client.CurrentRevision();
  auto decoded = api::DecodeManifests(kNewSandbox, "x.yaml");
  ASSERT_TRUE(decoded.ok());
  api::Object fresh = decoded->at(0).object;
  api::ApplyDefaults(fresh);
  auto applied = client.Apply({fresh}, {});
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(applied->at(0).action, ApplyAction::kCreated);
  auto changes = client.WatchSince(before, 100);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ(changes->at(0).key.name, "fresh");
  // A stale compare-and-swap is refused as by the local store.
  api::Object stale = *box;
  stale.metadata.labels["x"] = "y";
  stale.metadata.resource_version = 1;
  ApplyOptions cas;
  cas.require_resource_version = true;
  EXPECT_EQ(client.Apply({stale}, cas).status().code(), api::StatusCode::kAborted);
  EXPECT_EQ(client.Get({api::Kind::kSandbox, "default", "nope"}).status().code(),
            api::StatusCode::kNotFound);
  EXPECT_EQ(client.UpdateStatus(*box).status().code(), api::StatusCode::kPermissionDenied);
}

TEST_F(ApiServerTest, ServesOverTlsWithAPrivateCertificate) {
  const fs::path cert = dir_ / "cert.pem";
  const fs::path key = dir_ / "key.pem";
  auto openssl = sbx::testing::RunProcess(
      "/usr/bin/openssl",
      {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key.string(), "-out",
       cert.string(), "-days", "1", "-subj", "/CN=localhost", "-addext",
       "subjectAltName=IP:127.0.0.1,DNS:localhost"},
      dir_);
  ASSERT_EQ(openssl.exit_code, 0) << openssl.err;
  StopServer();
  HttpServerOptions tls;
  tls.tls_cert_file = cert.string();
  tls.tls_key_file = key.string();
  StartServer(tls);

  auto transport = http::MakeCppRestTransport(http::CppRestTlsOptions{cert.string()});
  auto streaming = http::MakeCppRestStreamingTransport(http::CppRestTlsOptions{cert.string()});
  apiclient::HttpStore client(*transport, *streaming,
                              {"https://127.0.0.1:" + std::to_string(port_), kViewer});
  auto box = client.Get({api::Kind::kSandbox, "default", "box"});
  EXPECT_TRUE(box.ok()) << box.status();
  // Without the CA, the certificate is not trusted.
  auto untrusted_transport = http::MakeCppRestTransport();
  apiclient::HttpStore untrusted(*untrusted_transport, *streaming,
                                 {"https://127.0.0.1:" + std::to_string(port_), kViewer});
  EXPECT_EQ(untrusted.Get({api::Kind::kSandbox, "default", "box"}).status().code(),
            api::StatusCode::kUnavailable);
  // Plain HTTP to the TLS port gets no answer.
  auto plain_transport = http::MakeCppRestTransport();
  apiclient::HttpStore plain(*plain_transport, *streaming, {Url(), kViewer});
  EXPECT_FALSE(plain.Get({api::Kind::kSandbox, "default", "box"}).ok());
}

}  // namespace
}  // namespace sbx::controller::apiserver
