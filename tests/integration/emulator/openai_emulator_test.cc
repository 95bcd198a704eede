// Integration tests of the OpenAI half of the emulator over loopback: the Agents API session
// surface (reference/openai-agents-api.md §1, §2, §5), executor registration and WebSocket
// connectivity with the stand-in executor spawned as a real `sbx-emulator executor` process
// (reference/codex-exec-server.md §3, §9), the emulated harness running a turn's commands, and
// the admin API. Every body the emulator serves is also decoded with the controller's wire
// format, so the emulator and the client cannot drift apart.
#include "emulator/openai/openai_emulator.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "controller/cloud/openai/wire_format.h"
#include "tests/support/http_test_client.h"
#include "tests/support/poll.h"
#include "tests/support/process.h"

namespace sbx::emulator {
namespace {

using nlohmann::json;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using sbx::testing::ReadFile;
using namespace std::chrono_literals;
namespace oa = sbx::controller::openai;

constexpr char kAppKey[] = "sk-test-app";
constexpr char kExecKey[] = "sk-test-exec";

bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 10s) {
  return sbx::testing::PollUntil(pred, sbx::testing::In(timeout), 10ms);
}

json Json(const HttpResult& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json() : j;
}

// The built `sbx-emulator executor`, as a real child process (stderr to a file).
class Executor {
 public:
  Executor(const std::filesystem::path& dir, const std::string& remote, const std::string& env_id,
           const std::string& key) {
    static std::atomic<int> counter{0};
    err_path_ = dir / ("executor-" + std::to_string(++counter) + ".err");
    std::vector<std::string> args = {SBX_EMULATOR_BIN, "executor",         "--remote",
                                     remote,           "--environment-id", env_id};
    std::string key_env = "CODEX_API_KEY=" + key;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      int fd = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      int null_fd = ::open("/dev/null", O_RDWR);
      ::dup2(null_fd, 0);
      ::dup2(null_fd, 1);
      if (key.empty()) {
        ::unsetenv("CODEX_API_KEY");
      } else {
        ::putenv(key_env.data());
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~Executor() {
    if (!exit_code_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Exit code, or nullopt if still running after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    Eventually(
        [&] {
          int status = 0;
          if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          }
          return exit_code_.has_value();
        },
        timeout);
    return exit_code_;
  }
  void Signal(int sig) { ::kill(pid_, sig); }
  std::string Stderr() const { return ReadFile(err_path_); }

 private:
  pid_t pid_ = -1;
  std::filesystem::path err_path_;
  std::optional<int> exit_code_;
};

// Reads the SSE stream of one session on a background thread, decoding every event.
class SseReader {
 public:
  SseReader(const std::string& base_url, const std::string& session_id) {
    thread_ = std::thread([this, base_url, session_id] {
      try {
        web::http::client::http_client client(base_url);
        web::http::http_request req(web::http::methods::GET);
        req.set_request_uri("/agents/sessions/" + session_id + "/events");
        req.headers().add("Authorization", std::string("Bearer ") + kAppKey);
        req.headers().add("OpenAI-Beta", "agents=v1");
        req.headers().add("Accept", "text/event-stream");
        auto resp = client.request(req, cts_.get_token()).get();
        status_ = resp.status_code();
        opened_ = true;
        auto body = resp.body();
        while (!stop_) {
          concurrency::streams::container_buffer<std::string> line;
          size_t n = body.read_line(line).get();
          if (n == 0 && body.is_eof()) break;
          const std::string& text = line.collection();
          if (text.rfind("data: ", 0) != 0) continue;
          auto event = oa::DecodeSessionEvent(text.substr(6));
          std::lock_guard lock(mu_);
          raw_.push_back(json::parse(text.substr(6)));
          if (event.ok())
            events_.push_back(*event);
          else
            decode_errors_.push_back(event.status().ToString());
        }
      } catch (const std::exception&) {
      }
      ended_ = true;
    });
    Eventually([&] { return opened_.load() || ended_.load(); }, 5s);
  }
  ~SseReader() {
    stop_ = true;
    cts_.cancel();
    thread_.join();
  }
  std::vector<oa::SessionEvent> Events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<json> Raw() {
    std::lock_guard lock(mu_);
    return raw_;
  }
  std::vector<std::string> DecodeErrors() {
    std::lock_guard lock(mu_);
    return decode_errors_;
  }
  bool Has(const std::string& type) {
    for (const auto& e : Events()) {
      if (e.type == type) return true;
    }
    return false;
  }
  int status() const { return status_; }
  bool ended() const { return ended_; }

 private:
  pplx::cancellation_token_source cts_;
  std::thread thread_;
  std::atomic<bool> stop_{false}, opened_{false}, ended_{false};
  std::atomic<int> status_{0};
  std::mutex mu_;
  std::vector<oa::SessionEvent> events_;
  std::vector<json> raw_;
  std::vector<std::string> decode_errors_;
};

class OpenAiEmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbx-oemu-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (emulator_) emulator_->Stop();
    emulator_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void Boot(const std::function<void(OpenAiEmulator::Options&)>& customize = {}) {
    OpenAiEmulator::Options o;
    o.api_keys = {kAppKey};
    o.executor_keys = {kExecKey};
    o.disconnected_after = 300ms;
    o.connection_wait = 2s;
    if (customize) customize(o);
    emulator_ = std::make_unique<OpenAiEmulator>(o);
    auto port = emulator_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    api_ = std::make_unique<HttpTestClient>(emulator_->base_url());
    api_->SetHeader("Authorization", std::string("Bearer ") + kAppKey);
    api_->SetHeader("OpenAI-Beta", "agents=v1");
    admin_ = std::make_unique<HttpTestClient>(emulator_->server_url());
  }

  json CreateSession(const std::string& workspace = "/workspace", const json& metadata = {}) {
    json body = {{"agent", {{"model", "gpt-test"}, {"instructions", "be brief"}}},
                 {"environment", {{"type", "self_hosted"}, {"workspace_directory", workspace}}}};
    if (!metadata.is_null()) body["metadata"] = metadata;
    HttpResult r = api_->Post("/agents/sessions", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    auto decoded = oa::DecodeSession(r.body);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    return Json(r);
  }

  std::string EnvStatus(const std::string& env_id) {
    HttpResult r = api_->Get("/agents/environments/" + env_id);
    if (r.status != 200) return "HTTP " + std::to_string(r.status);
    auto env = oa::DecodeEnvironment(r.body);
    EXPECT_TRUE(env.ok()) << env.status();
    return env.ok() ? env->status_raw : "undecodable";
  }

  static void ExpectError(const HttpResult& r, int status, const std::string& code) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = Json(r);
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_FALSE(j["error"].value("message", "").empty()) << r.body;
    if (!code.empty()) {
      EXPECT_EQ(j["error"].value("code", json()), json(code)) << r.body;
    }
  }

  std::filesystem::path dir_;
  std::unique_ptr<OpenAiEmulator> emulator_;
  std::unique_ptr<HttpTestClient> api_;
  std::unique_ptr<HttpTestClient> admin_;
};

TEST_F(OpenAiEmulatorTest, SessionCreateGetUpdateDelete) {
  // Lenient delete: this session never runs a turn (the strict rules have their own test).
  Boot([](OpenAiEmulator::Options& o) { o.strict_session_delete = false; });
  json s = CreateSession("/workspace", {{"owner", "aw-1"}});
  EXPECT_EQ(s["object"], "agent.session");
  EXPECT_EQ(s["status"], "idle");
  EXPECT_EQ(s["metadata"]["owner"], "aw-1");
  EXPECT_EQ(s["environment"]["type"], "self_hosted");
  // Each session's own remote_url, shaped like the service's (reference §1.4).
  const std::string remote = s["environment"]["remote_url"];
  EXPECT_EQ(remote.rfind(emulator_->base_url() + "/agents/api/connect/rt_", 0), 0u) << remote;
  EXPECT_EQ(s["environment"]["workspace_directory"], "/workspace");
  EXPECT_EQ(s["id"].get<std::string>().rfind("sess_", 0), 0u);
  EXPECT_EQ(s["environment"]["id"].get<std::string>().rfind("ccarenv_", 0), 0u);
  const std::string id = s["id"];

  HttpResult got = api_->Get("/agents/sessions/" + id);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Json(got)["id"], id);
  EXPECT_EQ(EnvStatus(s["environment"]["id"]), "pending");

  HttpResult upd = api_->Post("/agents/sessions/" + id, json{{"metadata", {{"k", "v"}}}}.dump());
  ASSERT_EQ(upd.status, 200) << upd.body;
  EXPECT_EQ(Json(upd)["metadata"], json({{"k", "v"}}));

  HttpResult del = api_->Delete("/agents/sessions/" + id);
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_TRUE(oa::DecodeSessionDeleted(del.body).ok());
  ExpectError(api_->Get("/agents/sessions/" + id), 404, "not_found_error");
  ExpectError(api_->Delete("/agents/sessions/" + id), 404, "not_found_error");
  ExpectError(api_->Get("/agents/environments/" + s["environment"]["id"].get<std::string>()), 404,
              "not_found_error");
}

TEST_F(OpenAiEmulatorTest, ListPaginatesWithCursorsInBothOrders) {
  Boot([](OpenAiEmulator::Options& o) { o.strict_session_delete = false; });
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(CreateSession()["id"]);

  auto collect = [&](const std::string& order) {
    std::vector<std::string> seen;
    std::string after;
    for (int page = 0; page < 10; ++page) {
      std::string q =
          "/agents/sessions?limit=2&order=" + order + (after.empty() ? "" : "&after=" + after);
      HttpResult r = api_->Get(q);
      EXPECT_EQ(r.status, 200) << r.body;
      auto decoded = oa::DecodeSessionPage(r.body);
      EXPECT_TRUE(decoded.ok()) << decoded.status();
      json j = Json(r);
      EXPECT_EQ(j["object"], "list");
      EXPECT_LE(j["data"].size(), 2u);
      for (const auto& s : j["data"]) seen.push_back(s["id"]);
      if (!j["has_more"].get<bool>()) break;
      after = j["last_id"];
    }
    return seen;
  };
  EXPECT_EQ(collect("asc"), ids);
  std::vector<std::string> desc(ids.rbegin(), ids.rend());
  EXPECT_EQ(collect("desc"), desc);
  // Default order is desc, default limit 20.
  json all = Json(api_->Get("/agents/sessions"));
  ASSERT_EQ(all["data"].size(), 5u);
  EXPECT_EQ(all["data"][0]["id"], ids.back());
  EXPECT_EQ(all["first_id"], ids.back());
  EXPECT_EQ(all["last_id"], ids.front());
  EXPECT_FALSE(all["has_more"].get<bool>());
  // A cursor stays valid after its session is deleted.
  ASSERT_EQ(api_->Delete("/agents/sessions/" + ids[1]).status, 200);
  json after_deleted = Json(api_->Get("/agents/sessions?order=asc&after=" + ids[1]));
  ASSERT_EQ(after_deleted["data"].size(), 3u);
  EXPECT_EQ(after_deleted["data"][0]["id"], ids[2]);
  // Empty page: null first/last ids.
  json empty = Json(api_->Get("/agents/sessions?order=asc&after=" + ids[4]));
  EXPECT_TRUE(empty["data"].empty());
  EXPECT_TRUE(empty["first_id"].is_null());
  EXPECT_FALSE(empty["has_more"].get<bool>());
  ExpectError(api_->Get("/agents/sessions?limit=0"), 400, "invalid_request_error");
  ExpectError(api_->Get("/agents/sessions?limit=101"), 400, "invalid_request_error");
}

TEST_F(OpenAiEmulatorTest, BetaHeaderAuthAndValidationErrors) {
  Boot();
  HttpTestClient no_beta(emulator_->base_url());
  no_beta.SetHeader("Authorization", std::string("Bearer ") + kAppKey);
  ExpectError(no_beta.Get("/agents/sessions"), 400, "invalid_beta");

  HttpTestClient no_auth(emulator_->base_url());
  no_auth.SetHeader("OpenAI-Beta", "agents=v1");
  HttpResult r = no_auth.Get("/agents/sessions");
  ExpectError(r, 401, "");
  EXPECT_TRUE(Json(r)["error"]["code"].is_null());

  HttpTestClient wrong(emulator_->base_url());
  wrong.SetHeader("OpenAI-Beta", "agents=v1");
  wrong.SetHeader("Authorization", "Bearer sk-wrong-key-123456");
  r = wrong.Get("/agents/sessions");
  ExpectError(r, 401, "invalid_api_key");
  EXPECT_EQ(r.body.find("sk-wrong-key-123456"), std::string::npos) << "key echoed in full";

  ExpectError(api_->Post("/agents/sessions", "not json"), 400, "invalid_request_error");
  ExpectError(
      api_->Post(
          "/agents/sessions",
          json{{"agent", {{"model", "m"}}}, {"environment", {{"type", "self_hosted"}}}}.dump()),
      400, "invalid_request_error");
  ExpectError(
      api_->Post(
          "/agents/sessions",
          json{{"environment", {{"type", "self_hosted"}, {"workspace_directory", "/w"}}}}.dump()),
      400, "invalid_request_error");
  ExpectError(api_->Get("/agents/sessions/sess_missing"), 404, "not_found_error");
  ExpectError(api_->Get("/agents/environments/ccarenv_missing"), 404, "not_found_error");
  ExpectError(api_->Post("/agents/sessions/sess_missing/events",
                         json{{"events", {{{"type", "agent.session.input.cancel"}}}}}.dump()),
              404, "not_found_error");
  json s = CreateSession();
  ExpectError(api_->Post("/agents/sessions/" + s["id"].get<std::string>() + "/events",
                         json{{"events", json::array()}}.dump()),
              400, "invalid_request_error");
  // Cancel on an idle session: 202, nothing happens.
  HttpResult cancel = api_->Post("/agents/sessions/" + s["id"].get<std::string>() + "/events",
                                 oa::EncodeInputEvents({oa::InputEvent::Cancel()}));
  EXPECT_EQ(cancel.status, 202) << cancel.body;
  EXPECT_TRUE(cancel.body.empty());
}

TEST_F(OpenAiEmulatorTest, StandinConnectsReconnectsAfterDropAndDisconnectsWhenKilled) {
  Boot();
  json s = CreateSession(dir_.string());
  const std::string env_id = s["environment"]["id"];
  SseReader sse(emulator_->base_url(), s["id"]);
  ASSERT_EQ(sse.status(), 200);

  Executor ex(dir_, s["environment"]["remote_url"], env_id, kExecKey);
  ASSERT_TRUE(Eventually([&] { return EnvStatus(env_id) == "connected"; })) << ex.Stderr();
  EXPECT_TRUE(Eventually([&] { return sse.Has("agent.session.environment.connected"); }));
  EXPECT_EQ(emulator_->Registrations()[env_id].attempts, 1);
  EXPECT_EQ(emulator_->Registrations()[env_id].successes, 1);
  json counts = Json(admin_->Get("/_emulator/openai/registrations"));
  EXPECT_EQ(counts[env_id]["attempts"], 1);

  // Admin drop: the executor reconnects (like codex, without re-registering) and the
  // environment never reports disconnected in between (the drop is shorter than the delay).
  HttpResult drop = admin_->Post("/_emulator/openai/environments/" + env_id + "/drop", "{}");
  ASSERT_EQ(drop.status, 200) << drop.body;
  EXPECT_EQ(Json(drop)["dropped"], true);
  // The close is asynchronous: wait for the second WebSocket upgrade, then for it to be open.
  ASSERT_TRUE(Eventually([&] {
    return Json(admin_->Get("/_emulator/counters"))["openai.executor.connect"] == 2 &&
           Json(admin_->Get("/_emulator/openai/state"))["environments"][0]["connections"] == 1;
  })) << ex.Stderr();
  EXPECT_EQ(emulator_->Registrations()[env_id].attempts, 1);
  EXPECT_EQ(EnvStatus(env_id), "connected");

  // Killed executor: connected until the delay has passed, then disconnected (+ event).
  auto killed_at = std::chrono::steady_clock::now();
  ex.Signal(SIGKILL);
  ASSERT_TRUE(Eventually([&] { return EnvStatus(env_id) == "disconnected"; }, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - killed_at, 300ms);
  EXPECT_TRUE(Eventually([&] { return sse.Has("agent.session.environment.disconnected"); }));
  EXPECT_TRUE(sse.DecodeErrors().empty());
}

TEST_F(OpenAiEmulatorTest, StandinExitsZeroOnSigterm) {
  Boot();
  json s = CreateSession(dir_.string());
  Executor ex(dir_, s["environment"]["remote_url"], s["environment"]["id"], kExecKey);
  ASSERT_TRUE(Eventually([&] { return EnvStatus(s["environment"]["id"]) == "connected"; }));
  ex.Signal(SIGTERM);
  EXPECT_EQ(ex.Wait(5s), std::optional<int>(0));
  EXPECT_EQ(ex.Stderr(), "");
}

TEST_F(OpenAiEmulatorTest, TurnRunsCommandsInWorkspaceAndStreamsEvents) {
  Boot();
  std::filesystem::path workspace = dir_ / "work space";
  std::filesystem::create_directories(workspace);
  json s = CreateSession(workspace.string());
  const std::string id = s["id"];
  Executor ex(dir_, s["environment"]["remote_url"], s["environment"]["id"], kExecKey);
  ASSERT_TRUE(Eventually([&] { return EnvStatus(s["environment"]["id"]) == "connected"; }));

  SseReader sse(emulator_->base_url(), id);
  ASSERT_EQ(sse.status(), 200);
  HttpResult post =
      api_->Post("/agents/sessions/" + id + "/events",
                 oa::EncodeInputEvents({oa::InputEvent::UserMessage(
                     "please run\n$ echo hi; pwd; touch made-here\n$ echo oops >&2; exit 3")}));
  ASSERT_EQ(post.status, 202) << post.body;
  EXPECT_TRUE(post.body.empty());
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.idle"); })) << ex.Stderr();

  std::vector<oa::SessionEvent> events = sse.Events();
  EXPECT_TRUE(sse.DecodeErrors().empty());
  std::vector<std::string> types;
  std::string output;
  for (const auto& e : events) {
    types.push_back(e.type);
    if (e.kind == oa::EventKind::kCommandOutputDelta) output += e.text;
  }
  auto index_of = [&](const std::string& t) {
    return std::find(types.begin(), types.end(), t) - types.begin();
  };
  ASSERT_LT(index_of("agent.session.turn.created"), index_of("agent.session.turn.completed"));
  ASSERT_LT(index_of("agent.session.turn.completed"), index_of("agent.session.idle"));
  EXPECT_LT(index_of("agent.output.command_execution_output.delta"),
            index_of("agent.session.turn.output_text.done"));
  EXPECT_NE(output.find("hi\n" + workspace.string() + "\n"), std::string::npos) << output;
  EXPECT_TRUE(std::filesystem::exists(workspace / "made-here"));

  // The command items, done, with output and exit codes; then the final message.
  std::vector<json> done;
  std::string final_text;
  for (const auto& j : sse.Raw()) {
    if (j["type"] == "agent.session.turn.item.done" && j["item"]["type"] == "command_execution") {
      done.push_back(j["item"]);
    }
    if (j["type"] == "agent.session.turn.output_text.done") final_text = j["text"];
  }
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0]["exit_code"], 0);
  EXPECT_EQ(done[0]["status"], "completed");
  EXPECT_EQ(done[0]["cwd"], workspace.string());
  EXPECT_EQ(done[1]["exit_code"], 3);
  EXPECT_EQ(done[1]["output"], "oops\n");
  EXPECT_NE(final_text.find("exited with code 3"), std::string::npos) << final_text;
  for (const auto& e : events) {
    if (e.kind == oa::EventKind::kTurnCompleted) {
      ASSERT_TRUE(e.turn);
      EXPECT_TRUE(oa::IsRootTurnTerminal(e));
      EXPECT_EQ(e.turn->status, oa::TurnStatus::kCompleted);
    }
  }
  // Saved history: turns and items.
  json turns = Json(api_->Get("/agents/sessions/" + id + "/turns"));
  ASSERT_EQ(turns["data"].size(), 1u);
  EXPECT_EQ(turns["data"][0]["status"], "completed");
  json items = Json(api_->Get("/agents/sessions/" + id + "/items?order=asc"));
  ASSERT_EQ(items["data"].size(), 4u);  // user message, 2 commands, final message
  EXPECT_EQ(Json(api_->Get("/agents/sessions/" + id))["status"], "idle");
}

TEST_F(OpenAiEmulatorTest, CancelStopsARunningCommand) {
  Boot();
  json s = CreateSession(dir_.string());
  const std::string id = s["id"];
  Executor ex(dir_, s["environment"]["remote_url"], s["environment"]["id"], kExecKey);
  ASSERT_TRUE(Eventually([&] { return EnvStatus(s["environment"]["id"]) == "connected"; }));
  SseReader sse(emulator_->base_url(), id);
  ASSERT_EQ(api_->Post("/agents/sessions/" + id + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ sleep 30")}))
                .status,
            202);
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.turn.in_progress"); }));
  ExpectError(api_->Delete("/agents/sessions/" + id), 409, "conflict_error");
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(api_->Post("/agents/sessions/" + id + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::Cancel()}))
                .status,
            202);
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.turn.cancelled"); }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(Eventually([&] { return sse.Has("agent.session.idle"); }));
  EXPECT_FALSE(sse.Has("agent.session.turn.completed"));
  EXPECT_EQ(api_->Delete("/agents/sessions/" + id).status, 200);
}

// Reference §1.6, as observed on the real service and reproduced by default: a session whose
// first turn never ran cannot be deleted ("session has no durably bound CCA root"), also after
// a cancel, nor can one whose turn is running; once a turn has run and ended, delete works.
TEST_F(OpenAiEmulatorTest, StrictDeleteRefusesRunningAndNeverRunSessionsWith409) {
  Boot([](OpenAiEmulator::Options& o) { o.connection_wait = 300ms; });
  auto expect_unbound = [&](const std::string& id) {
    HttpResult r = api_->Delete("/agents/sessions/" + id);
    ExpectError(r, 409, "conflict_error");
    EXPECT_EQ(Json(r)["error"]["type"], "conflict_error") << r.body;
    EXPECT_EQ(Json(r)["error"]["message"], "session has no durably bound CCA root") << r.body;
  };
  const std::string never = CreateSession()["id"];
  expect_unbound(never);
  ASSERT_EQ(api_->Post("/agents/sessions/" + never + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::Cancel()}))
                .status,
            202);
  expect_unbound(never);
  // A turn that failed because no executor connected did not run either.
  ASSERT_EQ(api_->Post("/agents/sessions/" + never + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ true")}))
                .status,
            202);
  ASSERT_TRUE(Eventually([&] {
    json turns = Json(api_->Get("/agents/sessions/" + never + "/turns"));
    return turns["data"].size() == 1 && turns["data"][0]["status"] == "failed";
  }));
  expect_unbound(never);
  EXPECT_EQ(api_->Get("/agents/sessions/" + never).status, 200);

  json s = CreateSession(dir_.string());
  const std::string ran = s["id"];
  Executor ex(dir_, s["environment"]["remote_url"], s["environment"]["id"], kExecKey);
  ASSERT_TRUE(Eventually([&] { return EnvStatus(s["environment"]["id"]) == "connected"; }));
  ASSERT_EQ(api_->Post("/agents/sessions/" + ran + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ sleep 30")}))
                .status,
            202);
  ASSERT_TRUE(Eventually(
      [&] { return Json(api_->Get("/agents/sessions/" + ran))["status"] == "in_progress"; }));
  HttpResult running = api_->Delete("/agents/sessions/" + ran);
  ExpectError(running, 409, "conflict_error");
  EXPECT_NE(Json(running)["error"]["message"].get<std::string>().find("running turn"),
            std::string::npos)
      << running.body;
  ASSERT_EQ(api_->Post("/agents/sessions/" + ran + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::Cancel()}))
                .status,
            202);
  ASSERT_TRUE(Eventually([&] { return api_->Delete("/agents/sessions/" + ran).status == 200; }));
  EXPECT_EQ(api_->Get("/agents/sessions/" + ran).status, 404);
}

// --no-strict-session-delete: the documented happy path, delete always works (and cancels a
// running turn).
TEST_F(OpenAiEmulatorTest, LenientDeleteRemovesNeverRunAndRunningSessions) {
  Boot([](OpenAiEmulator::Options& o) { o.strict_session_delete = false; });
  const std::string never = CreateSession()["id"];
  EXPECT_EQ(api_->Delete("/agents/sessions/" + never).status, 200);
  json s = CreateSession(dir_.string());
  const std::string ran = s["id"];
  Executor ex(dir_, s["environment"]["remote_url"], s["environment"]["id"], kExecKey);
  ASSERT_TRUE(Eventually([&] { return EnvStatus(s["environment"]["id"]) == "connected"; }));
  ASSERT_EQ(api_->Post("/agents/sessions/" + ran + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ sleep 30")}))
                .status,
            202);
  ASSERT_TRUE(Eventually(
      [&] { return Json(api_->Get("/agents/sessions/" + ran))["status"] == "in_progress"; }));
  EXPECT_EQ(api_->Delete("/agents/sessions/" + ran).status, 200);
  EXPECT_EQ(api_->Get("/agents/sessions/" + ran).status, 404);
}

TEST_F(OpenAiEmulatorTest, InputWithoutExecutorRequiresActionThenFailsTheTurn) {
  Boot([](OpenAiEmulator::Options& o) { o.connection_wait = 400ms; });
  json s = CreateSession(dir_.string());
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  std::thread poster([&] {
    HttpResult r = api_->Post("/agents/sessions/" + id + "/events",
                              oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ echo hi")}));
    EXPECT_EQ(r.status, 202) << r.body;
  });
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.requires_action"); }));
  HttpTestClient reader(emulator_->base_url());
  reader.SetHeader("Authorization", std::string("Bearer ") + kAppKey);
  reader.SetHeader("OpenAI-Beta", "agents=v1");
  auto session = oa::DecodeSession(reader.Get("/agents/sessions/" + id).body);
  ASSERT_TRUE(session.ok()) << session.status();
  poster.join();
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.turn.failed"); }));
  for (const auto& e : sse.Events()) {
    if (e.kind == oa::EventKind::kTurnFailed) {
      ASSERT_TRUE(e.turn && e.turn->error);
      EXPECT_EQ(e.turn->error->code, "connection_failed");
    }
  }
  EXPECT_TRUE(Eventually([&] { return sse.Has("agent.session.idle"); }));
}

TEST_F(OpenAiEmulatorTest, InputHeldUntilTheExecutorConnects) {
  Boot([](OpenAiEmulator::Options& o) { o.connection_wait = 20s; });
  json s = CreateSession(dir_.string());
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  std::atomic<int> status{0};
  std::thread poster([&] {
    HttpTestClient c(emulator_->base_url());
    c.SetHeader("Authorization", std::string("Bearer ") + kAppKey);
    c.SetHeader("OpenAI-Beta", "agents=v1");
    status = c.Post("/agents/sessions/" + id + "/events",
                    oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ echo late")}))
                 .status;
  });
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.requires_action"); }));
  json session = Json(api_->Get("/agents/sessions/" + id));
  EXPECT_EQ(session["status"], "requires_action");
  ASSERT_EQ(session["required_actions"].size(), 1u);
  EXPECT_EQ(session["required_actions"][0]["type"], "environment_connection");
  EXPECT_EQ(status.load(), 0) << "the POST must be held while no executor is connected";
  Executor ex(dir_, s["environment"]["remote_url"], s["environment"]["id"], kExecKey);
  poster.join();
  EXPECT_EQ(status.load(), 202);
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.turn.completed"); }));
  EXPECT_TRUE(Json(api_->Get("/agents/sessions/" + id))["required_actions"].empty());
}

TEST_F(OpenAiEmulatorTest, RegistrationFailuresMakeTheStandinExitWithCodexMessages) {
  Boot();
  json s = CreateSession(dir_.string());
  const std::string env_id = s["environment"]["id"];
  const std::string remote = s["environment"]["remote_url"];
  const std::string prefix =
      "Error: environment registry authentication error: environment registry authentication "
      "failed ";

  ASSERT_EQ(admin_->Post("/_emulator/openai/registration_failure", R"({"mode":"ip"})").status, 200);
  {
    Executor ex(dir_, remote, env_id, kExecKey);
    EXPECT_EQ(ex.Wait(10s), std::optional<int>(1));
    EXPECT_EQ(ex.Stderr(), prefix + "(401 Unauthorized): IP is not authorized\n");
  }
  ASSERT_EQ(admin_->Post("/_emulator/openai/registration_failure", R"({"mode":"scope"})").status,
            200);
  {
    Executor ex(dir_, remote, env_id, kExecKey);
    EXPECT_EQ(ex.Wait(10s), std::optional<int>(1));
    EXPECT_EQ(ex.Stderr(),
              prefix + "(403 Forbidden): Missing required scope api.agents.environments.connect\n");
  }
  ASSERT_EQ(admin_->Post("/_emulator/openai/registration_failure", R"({"mode":"none"})").status,
            200);
  {
    // The application key is not an executor key: 403 missing scope, like the real registry.
    Executor ex(dir_, remote, env_id, kAppKey);
    EXPECT_EQ(ex.Wait(10s), std::optional<int>(1));
    EXPECT_EQ(ex.Stderr(),
              prefix + "(403 Forbidden): Missing required scope api.agents.environments.connect\n");
  }
  {
    Executor ex(dir_, remote, "ccarenv_unknown", kExecKey);
    EXPECT_EQ(ex.Wait(10s), std::optional<int>(1));
    EXPECT_EQ(ex.Stderr(),
              "Error: environment registry request failed (404 Not Found, environment_not_found): "
              "Environment ccarenv_unknown not found\n");
  }
  {
    Executor ex(dir_, remote, env_id, "");
    EXPECT_EQ(ex.Wait(10s), std::optional<int>(1));
    EXPECT_EQ(ex.Stderr(),
              "Error: remote exec-server registration requires ChatGPT authentication or API key "
              "authentication; run `codex login` or set CODEX_API_KEY\n");
  }
  EXPECT_EQ(emulator_->Registrations()[env_id].attempts, 3);
  EXPECT_EQ(emulator_->Registrations()[env_id].successes, 0);
  EXPECT_EQ(EnvStatus(env_id), "pending");
  // Reset clears the counters and the failure mode.
  ASSERT_EQ(admin_->Post("/_emulator/openai/reset", "{}").status, 200);
  EXPECT_EQ(emulator_->Registrations()[env_id].attempts, 0);
}

// Registration is accepted only under the environment's own session remote_url: another
// session's URL does not know the environment, an unknown or bare path is an unknown URL.
TEST_F(OpenAiEmulatorTest, RegistrationIsAcceptedOnlyAtTheSessionsOwnRemoteUrl) {
  Boot();
  const json a = CreateSession();
  const json b = CreateSession();
  const std::string env_a = a["environment"]["id"];
  const std::string url_a = a["environment"]["remote_url"];
  const std::string url_b = b["environment"]["remote_url"];
  ASSERT_NE(url_a, url_b);
  HttpTestClient root(emulator_->server_url());
  root.SetHeader("Authorization", std::string("Bearer ") + kExecKey);
  const std::string profile = json{{"security_profile", "sbx_plain_jsonrpc_v1"}}.dump();
  auto path_of = [&](const std::string& url) { return url.substr(emulator_->server_url().size()); };
  const std::string tail = "/cloud/environment/" + env_a + "/register";

  ExpectError(root.Post(path_of(url_b) + tail, profile), 404, "environment_not_found");
  ExpectError(root.Post("/v1/agents/api/connect/rt_000000000000000000000000" + tail, profile), 404,
              "unknown_url");
  ExpectError(root.Post("/v1" + tail, profile), 404, "unknown_url");
  ExpectError(root.Post(tail, profile), 404, "unknown_url");
  EXPECT_EQ(emulator_->Registrations()[env_a].successes, 0);

  HttpResult ok = root.Post(path_of(url_a) + tail, profile);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(Json(ok).value("environment_id", ""), env_a);
  EXPECT_EQ(emulator_->Registrations()[env_a].successes, 1);
}

// codex's direct transport (codex-exec-server.md §5): POST {remote_url}/cloud/environment/{id}/
// direct/register with {"transport":"direct_jsonrpc_v1"} and SigV4 headers → the four fields;
// no SigV4 → 401, another transport → 400, another session's URL → 404.
TEST_F(OpenAiEmulatorTest, DirectRegistrationAnswersTheFourFieldsCodexExpects) {
  Boot();
  const json a = CreateSession();
  const json b = CreateSession();
  const std::string env_a = a["environment"]["id"];
  auto path_of = [&](const json& s) {
    return s["environment"]["remote_url"].get<std::string>().substr(
               emulator_->server_url().size()) +
           "/cloud/environment/" + env_a + "/direct/register";
  };
  const std::string body = R"({"transport":"direct_jsonrpc_v1"})";
  HttpTestClient unsigned_client(emulator_->server_url());
  ExpectError(unsigned_client.Post(path_of(a), body), 401, "invalid_signature");

  HttpTestClient signed_client(emulator_->server_url());
  signed_client.SetHeader("Authorization",
                          "AWS4-HMAC-SHA256 Credential=x/20261201/us-east-1/execute-api/"
                          "aws4_request, SignedHeaders=content-type;host;x-amz-date, "
                          "Signature=00");
  signed_client.SetHeader("X-Amz-Date", "20261201T000000Z");
  ExpectError(signed_client.Post(path_of(a), R"({"transport":"noise"})"), 400,
              "unsupported_transport");
  ExpectError(signed_client.Post(path_of(b), body), 404, "environment_not_found");

  HttpResult r = signed_client.Post(path_of(a), body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = Json(r);
  EXPECT_EQ(j.value("environment_id", ""), env_a);
  EXPECT_EQ(j.value("transport", ""), "direct_jsonrpc_v1");
  EXPECT_FALSE(j.value("registration_id", "").empty());
  EXPECT_EQ(j.value("url", "").rfind("ws://127.0.0.1:", 0), 0u) << r.body;
  EXPECT_EQ(emulator_->Registrations()[env_a].successes, 1);
  EXPECT_EQ(EnvStatus(env_a), "pending");  // connected only once the socket opens
}

// The organisation's IP allowlist (reference openai-agents-api §3.4, §5; the seed's
// troubleshooting row): a registration from an address that is not listed gets the raw 401
// "IP is not authorized", which the executor prints and exits on; a listed one connects. The
// caller's address comes from Options::caller_address (in sbx-emulator: the emulated sandbox's
// egress address), asked with the TCP peer of the registration.
TEST_F(OpenAiEmulatorTest, IpAllowlistRefusesUnlistedCallersWithTheReal401) {
  std::mutex mu;
  std::string address = "198.18.0.7";  // Guarded by mu.
  std::string seen_peer;               // Guarded by mu.
  Boot([&](OpenAiEmulator::Options& o) {
    o.ip_allowlist_enabled = true;
    o.ip_allowlist = {"203.0.113.0/24", "192.0.2.1"};
    o.caller_address = [&](const std::string& peer, int peer_port, int local_port) {
      std::lock_guard lock(mu);
      seen_peer = peer + (peer_port > 0 && local_port > 0 ? ":ports" : ":none");
      return address;
    };
  });
  json s = CreateSession(dir_.string());
  const std::string env_id = s["environment"]["id"];
  const std::string remote = s["environment"]["remote_url"];
  {
    Executor ex(dir_, remote, env_id, kExecKey);
    EXPECT_EQ(ex.Wait(10s), std::optional<int>(1));
    EXPECT_EQ(ex.Stderr(),
              "Error: environment registry authentication error: environment registry "
              "authentication failed (401 Unauthorized): IP is not authorized\n");
  }
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(seen_peer, "127.0.0.1:ports");
  }
  json state = Json(admin_->Get("/_emulator/openai/ip_allowlist"));
  EXPECT_EQ(state["enabled"], true);
  EXPECT_EQ(state["addresses"], json::array({"203.0.113.0/24", "192.0.2.1"}));
  EXPECT_EQ(state["last_registration_addresses"][env_id], "198.18.0.7");
  EXPECT_EQ(emulator_->Registrations()[env_id].attempts, 1);
  EXPECT_EQ(EnvStatus(env_id), "pending");

  // The same executor key from an allowed address connects.
  {
    std::lock_guard lock(mu);
    address = "203.0.113.77";
  }
  Executor ok(dir_, remote, env_id, kExecKey);
  EXPECT_TRUE(Eventually([&] { return EnvStatus(env_id) == "connected"; }));
  EXPECT_EQ(emulator_->Registrations()[env_id].successes, 1);

  // Admin: a bad entry is refused and changes nothing; disabling lets everyone in.
  ExpectError(admin_->Post("/_emulator/openai/ip_allowlist", R"({"addresses":["10.0.0.0/33"]})"),
              400, "");
  EXPECT_EQ(Json(admin_->Get("/_emulator/openai/ip_allowlist"))["addresses"].size(), 2u);
  json off = Json(admin_->Post("/_emulator/openai/ip_allowlist", R"({"enabled":false})"));
  EXPECT_EQ(off["enabled"], false);
}

TEST_F(OpenAiEmulatorTest, ExpireSessionAndInjectedFaults) {
  Boot();
  json s = CreateSession();
  const std::string id = s["id"];
  ASSERT_EQ(admin_->Post("/_emulator/openai/sessions/" + id + "/expire", "{}").status, 200);
  json got = Json(api_->Get("/agents/sessions/" + id));
  EXPECT_EQ(got["status"], "failed");
  EXPECT_EQ(got["error"], "session expired");
  EXPECT_EQ(EnvStatus(s["environment"]["id"]), "expired");
  ExpectError(api_->Post("/agents/sessions/" + id + "/events",
                         oa::EncodeInputEvents({oa::InputEvent::UserMessage("hi")})),
              409, "conflict_error");

  ASSERT_EQ(admin_
                ->Post("/_emulator/faults",
                       R"({"endpoint":"openai.sessions.get","status":503,"count":1})")
                .status,
            200);
  HttpResult r = api_->Get("/agents/sessions/" + id);
  ExpectError(r, 503, "server_is_overloaded");
  EXPECT_EQ(r.Header("Retry-After"), "1");
  EXPECT_EQ(api_->Get("/agents/sessions/" + id).status, 200);
  json counters = Json(admin_->Get("/_emulator/counters"));
  EXPECT_EQ(counters["openai.sessions.get"], 3);
  EXPECT_EQ(counters["openai.sessions.create"], 1);
}

// ---- What an AgentTask needs of the emulator (issue #13): exactly-once input, usage, the
// stream of a multi-command turn, and the test controls of the emulated harness. ----

// The fixture with a connected stand-in executor per session.
class OpenAiTaskTest : public OpenAiEmulatorTest {
 protected:
  // A session (created with `agent_id` and `metadata` when given) whose stand-in executor is
  // connected.
  json ConnectedSession(const std::string& agent_id = "", const json& metadata = nullptr) {
    json body = {
        {"agent", {{"model", "gpt-test"}}},
        {"environment", {{"type", "self_hosted"}, {"workspace_directory", dir_.string()}}}};
    if (!agent_id.empty()) body["agent_id"] = agent_id;
    if (!metadata.is_null()) body["metadata"] = metadata;
    HttpResult r = api_->Post("/agents/sessions", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    json s = Json(r);
    executors_.push_back(std::make_unique<Executor>(dir_, s["environment"]["remote_url"],
                                                    s["environment"]["id"], kExecKey));
    EXPECT_TRUE(Eventually([&] { return EnvStatus(s["environment"]["id"]) == "connected"; }));
    return s;
  }

  HttpResult PostInput(const std::string& id, const std::string& text,
                       const std::string& key = "") {
    std::map<std::string, std::string> headers;
    if (!key.empty()) headers["Idempotency-Key"] = key;
    return api_->Call("POST", "/agents/sessions/" + id + "/events",
                      oa::EncodeInputEvents({oa::InputEvent::UserMessage(text)}), headers);
  }

  // The session's entry in GET /_emulator/openai/state.
  json AdminSession(const std::string& id) {
    const json state = Json(admin_->Get("/_emulator/openai/state"));
    for (const auto& s : state["sessions"]) {
      if (s["id"] == id) return s;
    }
    return json();
  }

  static int Count(const std::vector<json>& events, const std::string& type) {
    return static_cast<int>(std::count_if(events.begin(), events.end(),
                                          [&](const json& e) { return e["type"] == type; }));
  }

  // The index of the first event for which `pred` holds after `from`, or -1.
  static int IndexOf(const std::vector<json>& events, const std::function<bool(const json&)>& pred,
                     int from = 0) {
    for (int i = from; i < static_cast<int>(events.size()); ++i) {
      if (pred(events[i])) return i;
    }
    return -1;
  }
  static std::function<bool(const json&)> Type(const std::string& type) {
    return [type](const json& e) { return e["type"] == type; };
  }
  static bool IsRoot(const json& e) {
    return e.contains("turn") && e["turn"]["subagent_id"].is_null();
  }
  // Root terminal events seen so far (agent.session.turn.completed|failed|cancelled).
  static int RootTerminals(SseReader& sse) {
    int n = 0;
    for (const auto& e : sse.Events()) {
      if (oa::IsRootTurnTerminal(e)) ++n;
    }
    return n;
  }

  std::vector<std::unique_ptr<Executor>> executors_;
};

TEST_F(OpenAiTaskTest, IdempotencyKeyReplayIsAcceptedStartsNothingAndIsCountedPerSession) {
  Boot([](OpenAiEmulator::Options& o) { o.connection_wait = 300ms; });
  json s = ConnectedSession();
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  ASSERT_EQ(PostInput(id, "$ echo one", "task-uid-1").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 1; }));
  // The retry of a POST whose answer was lost, and a retry racing the original's turn.
  HttpResult replay = PostInput(id, "$ echo one", "task-uid-1");
  EXPECT_EQ(replay.status, 202);
  EXPECT_TRUE(replay.body.empty());
  ASSERT_EQ(PostInput(id, "$ echo two", "task-uid-2").status, 202);
  EXPECT_EQ(PostInput(id, "$ echo two", "task-uid-2").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 2; }));
  ASSERT_TRUE(Eventually([&] { return AdminSession(id)["status"] == "idle"; }));
  EXPECT_EQ(Count(sse.Raw(), "agent.session.turn.created"), 2);
  json turns = Json(api_->Get("/agents/sessions/" + id + "/turns"));
  EXPECT_EQ(turns["data"].size(), 2u);

  json counters = AdminSession(id);
  EXPECT_EQ(counters["accepted_inputs"], 2) << counters;
  EXPECT_EQ(counters["deduped_inputs"], 2) << counters;
  EXPECT_EQ(counters["turns_started"], 2) << counters;

  // Keys are per session: the same key on another session is new input there (it fails there,
  // no executor, but it was accepted and started a turn).
  const std::string other = CreateSession()["id"];
  ASSERT_EQ(PostInput(other, "$ echo one", "task-uid-1").status, 202);
  ASSERT_TRUE(Eventually([&] { return AdminSession(other)["turns_started"] == 1; }));
  EXPECT_EQ(AdminSession(other)["deduped_inputs"], 0);
  json totals = Json(admin_->Get("/_emulator/openai/state"))["totals"];
  // At least one input was open at once; two if the second came while the first turn ran.
  EXPECT_GE(totals["peak_open_inputs"], 1) << totals;
  EXPECT_LE(totals["peak_open_inputs"], 2) << totals;
  totals.erase("peak_open_inputs");
  EXPECT_EQ(totals.value("peak_worker_open_inputs", -1), 0) << "no session names a worker";
  totals.erase("peak_worker_open_inputs");
  EXPECT_EQ(totals, json({{"accepted_inputs", 3},
                          {"deduped_inputs", 2},
                          {"dropped_inputs", 0},
                          {"turns_started", 3}}));
  // Totals outlive a deleted session; reset clears them.
  ASSERT_EQ(api_->Delete("/agents/sessions/" + id).status, 200);
  EXPECT_EQ(Json(admin_->Get("/_emulator/openai/state"))["totals"]["turns_started"], 3);
  ASSERT_EQ(admin_->Post("/_emulator/openai/reset", "{}").status, 200);
  EXPECT_EQ(Json(admin_->Get("/_emulator/openai/state"))["totals"]["turns_started"], 0);
}

// Under session: PerTask every task has its own session on its replica; the metadata
// sbx.dev/worker names the replica, and peak_worker_open_inputs is how a chaos test proves that
// no replica ran two tasks at once.
TEST_F(OpenAiTaskTest, PeakWorkerOpenInputsCountsOpenInputsAcrossTheSessionsOfOneWorker) {
  // Lenient delete: a session may go while its turn runs (below).
  Boot([](OpenAiEmulator::Options& o) { o.strict_session_delete = false; });
  const json w1 = {{"sbx.dev/worker", "default/w1"}};
  const std::string a = ConnectedSession("", w1)["id"];
  const std::string b = ConnectedSession("", w1)["id"];
  const std::string c = ConnectedSession("", {{"sbx.dev/worker", "default/w2"}})["id"];
  SseReader sa(emulator_->base_url(), a);
  SseReader sb(emulator_->base_url(), b);
  auto peak = [&] {
    return Json(admin_->Get("/_emulator/openai/state"))["totals"]["peak_worker_open_inputs"];
  };
  // w1's sessions one after the other, while w2's runs: 1.
  ASSERT_EQ(PostInput(c, "!sleep 1s").status, 202);
  ASSERT_EQ(PostInput(a, "$ echo a").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sa) == 1; }));
  ASSERT_EQ(PostInput(b, "$ echo b").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sb) == 1; }));
  EXPECT_EQ(peak(), 1);
  // Two of w1's sessions at once: 2.
  ASSERT_EQ(PostInput(a, "!sleep 2s").status, 202);
  ASSERT_EQ(PostInput(b, "$ echo b").status, 202);
  EXPECT_EQ(peak(), 2);
  // A session deleted with its input open no longer counts for its worker: after a reset of the
  // totals, one input on w1 is a peak of 1 again.
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sb) == 2; }));
  ASSERT_EQ(api_->Delete("/agents/sessions/" + a).status, 200);
  ASSERT_EQ(admin_->Post("/_emulator/openai/reset", "{}").status, 200);
  ASSERT_EQ(PostInput(b, "$ echo b").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sb) == 3; }));
  EXPECT_EQ(peak(), 1);
}

TEST_F(OpenAiTaskTest, MultiLineInputStreamsEachCommandThenTheMessageInTheDefaultOrder) {
  Boot();
  json s = ConnectedSession("agent_fixer");
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  const std::string input = "fix it\n$ echo a\n$ echo b; exit 4\n$ printf c";
  ASSERT_EQ(PostInput(id, input, "k").status, 202);
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.idle"); }));
  EXPECT_TRUE(sse.DecodeErrors().empty());
  std::vector<json> ev = sse.Raw();

  // Reference §6's default order for one turn.
  int i = IndexOf(ev, Type("agent.session.turn.created"));
  ASSERT_GE(i, 0);
  i = IndexOf(ev, Type("agent.session.turn.item.added"), i);
  ASSERT_GE(i, 0);
  EXPECT_EQ(ev[i]["item"]["role"], "user");
  EXPECT_TRUE(ev[i]["output_index"].is_null());
  i = IndexOf(ev, Type("agent.session.in_progress"), i);
  ASSERT_GE(i, 0);
  i = IndexOf(ev, Type("agent.session.turn.in_progress"), i);
  ASSERT_GE(i, 0);
  const std::vector<std::pair<std::string, int>> commands = {
      {"echo a", 0}, {"echo b; exit 4", 4}, {"printf c", 0}};
  const std::vector<std::string> outputs = {"a\n", "b\n", "c"};
  for (size_t c = 0; c < commands.size(); ++c) {
    i = IndexOf(
        ev,
        [&](const json& e) {
          return e["type"] == "agent.session.turn.item.added" &&
                 e["item"]["type"] == "command_execution";
        },
        i + 1);
    ASSERT_GE(i, 0) << c;
    EXPECT_EQ(ev[i]["item"]["command"], commands[c].first);
    EXPECT_EQ(ev[i]["output_index"], c);
    const std::string item_id = ev[i]["item"]["id"];
    i = IndexOf(ev, Type("agent.output.command_execution_output.delta"), i);
    ASSERT_GE(i, 0) << c;
    EXPECT_EQ(ev[i]["item_id"], item_id);
    i = IndexOf(ev, Type("agent.session.turn.item.done"), i);
    ASSERT_GE(i, 0) << c;
    EXPECT_EQ(ev[i]["item"]["id"], item_id);
    EXPECT_EQ(ev[i]["item"]["exit_code"], commands[c].second);
    EXPECT_EQ(ev[i]["item"]["output"], outputs[c]);
    EXPECT_EQ(ev[i]["item"]["status"], "completed");
  }
  i = IndexOf(ev, Type("agent.session.turn.item.added"), i + 1);
  ASSERT_GE(i, 0);
  EXPECT_EQ(ev[i]["item"]["role"], "assistant");
  const std::string msg_id = ev[i]["item"]["id"];
  i = IndexOf(ev, Type("agent.session.turn.content_part.added"), i);
  ASSERT_GE(i, 0);
  std::string streamed;
  int deltas = 0;
  for (++i;
       i < static_cast<int>(ev.size()) && ev[i]["type"] == "agent.session.turn.output_text.delta";
       ++i) {
    EXPECT_EQ(ev[i]["item_id"], msg_id);
    streamed += ev[i]["delta"].get<std::string>();
    ++deltas;
  }
  EXPECT_GE(deltas, 2);
  ASSERT_LT(i, static_cast<int>(ev.size()));
  ASSERT_EQ(ev[i]["type"], "agent.session.turn.output_text.done");
  EXPECT_EQ(ev[i]["text"], streamed);
  EXPECT_NE(streamed.find("`echo b; exit 4` exited with code 4"), std::string::npos) << streamed;
  i = IndexOf(ev, Type("agent.session.turn.content_part.done"), i);
  ASSERT_GE(i, 0);
  EXPECT_EQ(ev[i]["part"]["text"], streamed);
  i = IndexOf(ev, Type("agent.session.turn.item.done"), i);
  ASSERT_GE(i, 0);
  EXPECT_EQ(ev[i]["item"]["id"], msg_id);
  i = IndexOf(ev, Type("agent.session.turn.completed"), i);
  ASSERT_GE(i, 0);
  const json completed = ev[i];
  EXPECT_GE(IndexOf(ev, Type("agent.session.idle"), i), 0);

  // usage: deterministic, ceil(chars / 4) of the input and of the output (command output and
  // the answer), on the terminal event and on the turn.
  const int64_t in_tokens = (static_cast<int64_t>(input.size()) + 3) / 4;
  const int64_t out_chars = static_cast<int64_t>(std::string("a\nb\nc").size() + streamed.size());
  const json usage = completed["usage"];
  EXPECT_EQ(usage["input_tokens"], in_tokens) << usage;
  EXPECT_EQ(usage["output_tokens"], (out_chars + 3) / 4) << usage;
  EXPECT_EQ(usage["total_tokens"], in_tokens + (out_chars + 3) / 4) << usage;
  EXPECT_EQ(completed["turn"]["usage"], usage);
  EXPECT_EQ(completed["turn"]["agent_id"], "agent_fixer");
  json turn = Json(
      api_->Get("/agents/sessions/" + id + "/turns/" + completed["turn_id"].get<std::string>()));
  EXPECT_EQ(turn["usage"], usage);
  for (const auto& e : sse.Events()) {
    if (oa::IsRootTurnTerminal(e)) {
      ASSERT_TRUE(e.turn);
      EXPECT_EQ(e.turn->status, oa::TurnStatus::kCompleted);
      ASSERT_TRUE(e.usage);  // as the client decodes it
      EXPECT_EQ(e.usage->input_tokens, in_tokens);
      EXPECT_EQ(e.usage->total_tokens, usage["total_tokens"].get<int64_t>());
      EXPECT_EQ(e.usage->details.at("input_tokens_details.cached_tokens"), 0);
    }
  }
  // The same input again uses the same tokens.
  ASSERT_EQ(PostInput(id, input, "k2").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 2; }));
  json second;
  for (const auto& e : sse.Raw()) {
    if (e["type"] == "agent.session.turn.completed") second = e;
  }
  EXPECT_EQ(second["usage"], usage);
}

TEST_F(OpenAiTaskTest, FailControlEndsTheTurnFailedWithTheGivenCodeAndMessage) {
  Boot();
  json s = ConnectedSession();
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  ASSERT_EQ(
      PostInput(id, "$ echo before\n!fail rate_limit_exceeded Slow down, please\n$ echo after")
          .status,
      202);
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.idle"); }));
  std::vector<json> ev = sse.Raw();
  int failed = IndexOf(ev, Type("agent.session.turn.failed"));
  ASSERT_GE(failed, 0);
  EXPECT_EQ(ev[failed]["turn"]["error"],
            json({{"code", "rate_limit_exceeded"}, {"message", "Slow down, please"}}));
  EXPECT_EQ(ev[failed]["turn"]["status"], "failed");
  EXPECT_TRUE(ev[failed]["usage"].is_object());
  EXPECT_GE(IndexOf(ev, Type("agent.session.idle"), failed), 0);
  EXPECT_EQ(Count(ev, "agent.session.turn.completed"), 0);
  EXPECT_EQ(Count(ev, "agent.session.turn.output_text.done"), 0);
  std::vector<std::string> ran;
  for (const auto& e : ev) {
    if (e["type"] == "agent.session.turn.item.done") ran.push_back(e["item"].value("command", ""));
  }
  EXPECT_EQ(ran, std::vector<std::string>{"echo before"});
  for (const auto& e : sse.Events()) {
    if (oa::IsRootTurnTerminal(e)) {
      ASSERT_TRUE(e.turn && e.turn->error);
      EXPECT_EQ(e.turn->error->code, "rate_limit_exceeded");
    }
  }

  // A malformed control line fails the turn with invalid_request and says what is wrong; the
  // session takes the next input normally.
  ASSERT_EQ(PostInput(id, "!fail").status, 202);
  ASSERT_EQ(PostInput(id, "!sleep soon").status, 202);
  ASSERT_EQ(PostInput(id, "!subagent maybe").status, 202);
  ASSERT_EQ(PostInput(id, "$ true").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 5; }));
  json turns = Json(api_->Get("/agents/sessions/" + id + "/turns?order=asc"));
  ASSERT_EQ(turns["data"].size(), 5u);
  for (int t = 1; t <= 3; ++t) {
    EXPECT_EQ(turns["data"][t]["status"], "failed");
    EXPECT_EQ(turns["data"][t]["error"]["code"], "invalid_request");
  }
  EXPECT_NE(turns["data"][1]["error"]["message"].get<std::string>().find("!fail <code>"),
            std::string::npos);
  EXPECT_NE(turns["data"][3]["error"]["message"].get<std::string>().find("maybe"),
            std::string::npos);
  EXPECT_EQ(turns["data"][4]["status"], "completed");
}

TEST_F(OpenAiTaskTest, SubagentTurnsAreStreamedButOnlyTheRootTurnEndsTheTask) {
  Boot();
  json s = ConnectedSession();
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  ASSERT_EQ(PostInput(id, "!subagent\n!subagent failed\n$ echo root").status, 202);
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.idle"); }));
  EXPECT_TRUE(sse.DecodeErrors().empty());
  std::vector<json> ev = sse.Raw();
  auto sub_terminal = [](const json& e) {
    return (e["type"] == "agent.session.turn.completed" ||
            e["type"] == "agent.session.turn.failed") &&
           !e["turn"]["subagent_id"].is_null();
  };
  int root_created = IndexOf(
      ev, [&](const json& e) { return e["type"] == "agent.session.turn.created" && IsRoot(e); });
  ASSERT_GE(root_created, 0);
  const std::string root_turn = ev[root_created]["turn_id"];
  int sub1 = IndexOf(ev, sub_terminal, root_created);
  ASSERT_GE(sub1, 0);
  EXPECT_EQ(ev[sub1]["type"], "agent.session.turn.completed");
  EXPECT_NE(ev[sub1]["turn_id"], root_turn);
  int sub2 = IndexOf(ev, sub_terminal, sub1 + 1);
  ASSERT_GE(sub2, 0);
  EXPECT_EQ(ev[sub2]["type"], "agent.session.turn.failed");
  EXPECT_NE(ev[sub2]["turn"]["subagent_id"], ev[sub1]["turn"]["subagent_id"]);
  // Each subagent turn is created before it ends, inside the subagent's created/closed.
  int sub_created = IndexOf(
      ev, [&](const json& e) { return e["type"] == "agent.session.turn.created" && !IsRoot(e); });
  ASSERT_GE(sub_created, 0);
  EXPECT_LT(sub_created, sub1);
  EXPECT_LT(IndexOf(ev, Type("agent.session.subagent.created")), sub_created);
  EXPECT_EQ(Count(ev, "agent.session.subagent.closed"), 2);
  // The root turn continues after them: its command runs, and it alone ends the task.
  int command = IndexOf(ev, Type("agent.session.turn.item.added"), sub2);
  ASSERT_GE(command, 0);
  EXPECT_EQ(ev[command]["item"]["command"], "echo root");
  EXPECT_EQ(RootTerminals(sse), 1);
  int root_done = IndexOf(
      ev, [&](const json& e) { return e["type"] == "agent.session.turn.completed" && IsRoot(e); });
  EXPECT_GT(root_done, command);
  EXPECT_EQ(ev[root_done]["turn_id"], root_turn);
  // Saved history lists the root turn; the counters count root turns only.
  json turns = Json(api_->Get("/agents/sessions/" + id + "/turns"));
  ASSERT_EQ(turns["data"].size(), 1u);
  EXPECT_EQ(turns["data"][0]["id"], root_turn);
  EXPECT_EQ(AdminSession(id)["turns_started"], 1);
}

TEST_F(OpenAiTaskTest, CancelDuringALongCommandEndsItIncompleteThenCancelledThenIdle) {
  Boot();
  json s = ConnectedSession();
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  ASSERT_EQ(PostInput(id, "$ echo start\n$ sleep 30\n$ echo never").status, 202);
  ASSERT_TRUE(Eventually([&] {
    return IndexOf(sse.Raw(), [](const json& e) {
             return e["type"] == "agent.session.turn.item.added" &&
                    e["item"].value("command", "") == "sleep 30";
           }) >= 0;
  }));
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(api_->Post("/agents/sessions/" + id + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::Cancel()}))
                .status,
            202);
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.idle"); }));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  std::vector<json> ev = sse.Raw();
  int sleep_done = IndexOf(ev, [](const json& e) {
    return e["type"] == "agent.session.turn.item.done" &&
           e["item"].value("command", "") == "sleep 30";
  });
  ASSERT_GE(sleep_done, 0);
  EXPECT_EQ(ev[sleep_done]["item"]["status"], "incomplete");
  int cancelled = IndexOf(ev, Type("agent.session.turn.cancelled"), sleep_done);
  ASSERT_GE(cancelled, 0);
  EXPECT_TRUE(ev[cancelled]["turn"]["error"].is_null());
  EXPECT_GE(IndexOf(ev, Type("agent.session.idle"), cancelled), 0);
  EXPECT_EQ(IndexOf(ev,
                    [](const json& e) {
                      return e.contains("item") && e["item"].value("command", "") == "echo never";
                    }),
            -1);
  EXPECT_EQ(Count(ev, "agent.session.turn.completed"), 0);

  // !sleep (a long turn without a command) is cancelled the same way.
  ASSERT_EQ(PostInput(id, "!sleep 5m\n$ echo never").status, 202);
  ASSERT_TRUE(Eventually([&] { return Count(sse.Raw(), "agent.session.turn.in_progress") == 2; }));
  ASSERT_EQ(api_->Post("/agents/sessions/" + id + "/events",
                       oa::EncodeInputEvents({oa::InputEvent::Cancel()}))
                .status,
            202);
  ASSERT_TRUE(Eventually([&] { return Count(sse.Raw(), "agent.session.turn.cancelled") == 2; }));
  EXPECT_EQ(Json(api_->Get("/agents/sessions/" + id + "/turns"))["data"][0]["status"], "cancelled");
  EXPECT_TRUE(Eventually([&] { return Count(sse.Raw(), "agent.session.idle") == 2; }));
}

TEST_F(OpenAiTaskTest, HoldInputsKnobHoldsTheNextInputsInTheConnectionWait) {
  Boot([](OpenAiEmulator::Options& o) { o.connection_wait = 500ms; });
  json s = ConnectedSession();
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  ExpectError(admin_->Post("/_emulator/openai/sessions/" + id + "/hold_inputs", R"({"count":-1})"),
              400, "");
  ExpectError(admin_->Post("/_emulator/openai/sessions/sess_nope/hold_inputs", R"({"count":1})"),
              404, "");
  ASSERT_EQ(
      admin_->Post("/_emulator/openai/sessions/" + id + "/hold_inputs", R"({"count":1})").status,
      200);
  EXPECT_EQ(AdminSession(id)["hold_inputs"], 1);
  // Held for the whole wait although the executor is connected, then the turn fails. A retry
  // of the held POST (same key) is answered at once and starts nothing.
  auto start = std::chrono::steady_clock::now();
  std::atomic<int> held_status{0};
  std::thread held([&] {
    HttpTestClient c(emulator_->base_url());
    c.SetHeader("Authorization", std::string("Bearer ") + kAppKey);
    c.SetHeader("OpenAI-Beta", "agents=v1");
    held_status = c.Call("POST", "/agents/sessions/" + id + "/events",
                         oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ echo held")}),
                         {{"Idempotency-Key", "held-1"}})
                      .status;
  });
  ASSERT_TRUE(Eventually([&] { return sse.Has("agent.session.requires_action"); }));
  EXPECT_EQ(PostInput(id, "$ echo held", "held-1").status, 202);
  EXPECT_EQ(held_status.load(), 0) << "the original POST is still held";
  held.join();
  EXPECT_EQ(held_status.load(), 202);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 500ms);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 1; }));
  EXPECT_TRUE(sse.Has("agent.session.requires_action"));
  json turns = Json(api_->Get("/agents/sessions/" + id + "/turns"));
  EXPECT_EQ(turns["data"][0]["error"]["code"], "connection_failed");
  EXPECT_EQ(AdminSession(id)["hold_inputs"], 0);
  // The next input runs at once.
  ASSERT_EQ(PostInput(id, "$ echo free").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 2; }));
  EXPECT_EQ(Json(api_->Get("/agents/sessions/" + id + "/turns"))["data"][0]["status"], "completed");
  // release_after_ms: held that long, then it runs (the executor "connected" in time).
  ASSERT_EQ(admin_
                ->Post("/_emulator/openai/sessions/" + id + "/hold_inputs",
                       R"({"count":1,"release_after_ms":100})")
                .status,
            200);
  start = std::chrono::steady_clock::now();
  ASSERT_EQ(PostInput(id, "$ echo released").status, 202);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 3; }));
  EXPECT_EQ(Json(api_->Get("/agents/sessions/" + id + "/turns"))["data"][0]["status"], "completed");
  EXPECT_EQ(Count(sse.Raw(), "agent.session.requires_action"), 2);
  json counters = AdminSession(id);
  EXPECT_EQ(counters["accepted_inputs"], 3) << counters;
  EXPECT_EQ(counters["deduped_inputs"], 1) << counters;
  EXPECT_EQ(counters["turns_started"], 3) << counters;
}

// A client that closes a held POST (a proxy timeout, a task at its deadline) loses that input,
// as observed on the service (reference §2.1), and its key with it: the retry with the same key
// runs instead of being answered as a replay.
TEST_F(OpenAiTaskTest, AHeldPostCutByItsClientLosesItsInputAndTheRetryWithItsKeyRuns) {
  Boot();
  json s = ConnectedSession();
  const std::string id = s["id"];
  SseReader sse(emulator_->base_url(), id);
  ASSERT_EQ(admin_
                ->Post("/_emulator/openai/sessions/" + id + "/hold_inputs",
                       R"({"count":1,"release_after_ms":1500})")
                .status,
            200);
  // The POST on a raw socket, closed while the service holds it.
  const std::string url = emulator_->base_url();  // http://127.0.0.1:PORT/v1
  const int port = std::stoi(url.substr(url.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string body = oa::EncodeInputEvents({oa::InputEvent::UserMessage("$ echo cut")});
  const std::string request = "POST /v1/agents/sessions/" + id +
                              "/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                              kAppKey +
                              "\r\nOpenAI-Beta: agents=v1\r\nIdempotency-Key: cut-1\r\n"
                              "Content-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(Eventually([&] { return AdminSession(id)["hold_inputs"] == 0; }));
  ::close(fd);
  ASSERT_TRUE(Eventually([&] { return AdminSession(id)["dropped_inputs"] == 1; }));
  EXPECT_EQ(AdminSession(id)["turns_started"], 0);
  // The retry with the key of the lost POST is new input: it runs.
  ASSERT_EQ(PostInput(id, "$ echo cut", "cut-1").status, 202);
  ASSERT_TRUE(Eventually([&] { return RootTerminals(sse) == 1; }));
  json counters = AdminSession(id);
  EXPECT_EQ(counters["accepted_inputs"], 1) << counters;
  EXPECT_EQ(counters["deduped_inputs"], 0) << counters;
  EXPECT_EQ(counters["turns_started"], 1) << counters;
}

}  // namespace
}  // namespace sbx::emulator
