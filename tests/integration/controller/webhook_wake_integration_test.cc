// `sbxd --webhook-addr` end to end (DESIGN §7.2, "wake from outside sbx"): the BUILT sbxd, sbxctl
// and sbx-emulator. An application sends input straight to a worker's session while its
// executor is gone; the emulated service raises `environment_connection` and sends the signed
// `agent.session.action_required` webhook; sbxd verifies it, finds the worker by
// status.sessionId, and reconciles it at once: the executor is relaunched and the waiting input
// runs. sbxd's own cadence is set to an hour (status checks, probes; a resync re-reconciles but
// checks nothing before it is due), so nothing but the webhook can make it look within the
// test's deadline. Forged, stale, future and unsigned deliveries
// for the same session are refused with 4xx and wake nothing; a replayed id is refused; a
// well-signed delivery for a session sbx does not own is acknowledged and ignored. With replicas
// splitting workspaces, a webhook received by a replica that does not hold the worker's workspace
// wakes the holder through the store.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "controller/webhook/webhook_verifier.h"
#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

using json = nlohmann::json;
using sbx::controller::SignWebhook;
using sbx::controller::WebhookSecret;
using sbx::testing::ConditionOf;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;

constexpr milliseconds kConverge{45'000};
constexpr char kWorkspace[] = "/home/sandbox-agent/ws";
constexpr char kSecret[] = "whsec_c2J4LXdlYmhvb2stdGVzdC1zZWNyZXQta2V5LTAx";
constexpr char kForeignSecret[] = "whsec_c29tZW9uZS1lbHNlcy1zZWNyZXQ=";

std::string WorkerYaml(const std::string& name) {
  return SbxdHarness::InlineWorkerYaml(name, kWorkspace);
}

class WebhookWakeTest : public ::testing::Test {
 protected:
  WebhookWakeTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbx-webhook-itest-",
                  .token = "dapi-webhook-test",
                  .app_key = "sk-app-webhook-test",
                  .executor_key = "sk-exec-webhook-test"}) {}
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  // Emulator (environments disconnected 300 ms after the executor's socket closed), then sbxd
  // with the webhook endpoint and an hour-long cadence for everything it would otherwise poll.
  void StartAll() {
    harness_.SetEnv("OPENAI_WEBHOOK_SECRET", kSecret);
    const sbx::api::Status started = harness_.StartEmulator(
        {"--disconnected-after", "300ms", "--connection-wait", "90s"}, kConverge);
    ASSERT_TRUE(started.ok()) << started;
    oai_ = &harness_.openai();
    auto p =
        harness_.StartSbxd("sbxd", {"--webhook-addr", "127.0.0.1:0", "--executor-status-interval",
                                    "1h", "--executor-probe-interval", "1h"});
    ASSERT_TRUE(p.ok()) << p.status();
    sbxd_ = *p;
    auto line = sbxd_->WaitForLine(std::regex(R"(serving webhooks.*port=(\d+))"), In(kConverge),
                                   /*from_stderr=*/true);
    ASSERT_TRUE(line) << "sbxd did not log its webhook port";
    webhook_port_ = std::stoi((*line)[1]);
    metrics_port_ = SbxdHarness::MetricsPort(*sbxd_);
    ASSERT_GT(metrics_port_, 0);
    hook_ = std::make_unique<HttpTestClient>("http://127.0.0.1:" + std::to_string(webhook_port_));
    // The emulated service delivers its webhooks to sbxd, signed with the same secret.
    json config = {
        {"url", "http://127.0.0.1:" + std::to_string(webhook_port_) + "/webhooks/openai"},
        {"secret", kSecret},
        {"retry_base_ms", 200},
        {"max_attempts", 5}};
    HttpResult r = oai_->Post("/_emulator/openai/webhooks", config.dump());
    ASSERT_EQ(r.status, 200) << r.body;
  }

  json Worker(const std::string& name) { return harness_.Get("agentworker", name); }
  static std::string S(const json& w, const char* field) {
    return w.is_object() && w.contains("status") ? w["status"].value(field, "") : "";
  }
  static int64_t Pid(const json& w) {
    return w.value(json::json_pointer("/status/executor/pid"), int64_t{0});
  }
  static int Restarts(const json& w) {
    return w.value(json::json_pointer("/status/executor/restarts"), 0);
  }
  static bool Ready(const json& w) {
    return ConditionOf(w, "Ready").first == "True" &&
           ConditionOf(w, "ExecutorConnected").first == "True" && Pid(w) > 0;
  }

  static int64_t NowSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static std::string ActionRequired(const std::string& session) {
    return json({{"id", "evt_test"},
                 {"object", "event"},
                 {"created_at", NowSeconds()},
                 {"type", "agent.session.action_required"},
                 {"data",
                  {{"id", session}, {"required_action", {{"type", "environment_connection"}}}}}})
        .dump();
  }
  // POSTs `body` to sbxd's webhook endpoint as delivery `id` at `at`, signed with `secret`
  // (empty: unsigned).
  HttpResult Deliver(const std::string& id, const std::string& body, int64_t at,
                     const std::string& secret = kSecret) {
    std::map<std::string, std::string> headers = {{"webhook-id", id},
                                                  {"webhook-timestamp", std::to_string(at)}};
    if (!secret.empty()) {
      headers["webhook-signature"] =
          SignWebhook(*WebhookSecret::Parse(secret), id, std::to_string(at), body);
    }
    return hook_->Call("POST", "/webhooks/openai", body, headers);
  }

  // sbx_webhook_deliveries_total{result, reason} from sbxd's /metrics (0 when absent).
  double Deliveries(const std::string& result, const std::string& reason) {
    HttpTestClient metrics("http://127.0.0.1:" + std::to_string(metrics_port_));
    std::istringstream lines(metrics.Get("/metrics").body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("sbx_webhook_deliveries_total{", 0) == 0 &&
          line.find("result=\"" + result + "\"") != std::string::npos &&
          line.find("reason=\"" + reason + "\"") != std::string::npos) {
        return std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return 0;
  }

  json Session(const std::string& id) {
    return json::parse(oai_->Get("/v1/agents/sessions/" + id).body, nullptr, false);
  }
  int64_t TurnsStarted(const std::string& session) {
    const json state = json::parse(oai_->Get("/_emulator/openai/state").body, nullptr, false);
    for (const json& s : state.value("sessions", json::array())) {
      if (s.value("id", "") == session) {
        return s.value("turns_started", int64_t{0});
      }
    }
    return 0;
  }

  SbxdHarness harness_;
  HttpTestClient* oai_ = nullptr;
  Process* sbxd_ = nullptr;
  int webhook_port_ = 0;
  int metrics_port_ = 0;
  std::unique_ptr<HttpTestClient> hook_;
};

TEST_F(WebhookWakeTest, AnActionRequiredWebhookWakesTheWorkerAtOnce) {
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_EQ(harness_.Apply("fixer", WorkerYaml("fixer")).exit_code, 0);
  json w;
  ASSERT_TRUE(
      PollUntil([&] { return Ready(w = Worker("fixer")); }, In(kConverge), milliseconds(200)))
      << w.dump(2);
  const std::string session = S(w, "sessionId");
  const std::string environment = S(w, "environmentId");
  const int64_t old_pid = Pid(w);
  ASSERT_EQ(Restarts(w), 0);

  // The executor dies behind sbx's back; sbx will not look for an hour.
  ASSERT_EQ(::kill(static_cast<pid_t>(old_pid), SIGKILL), 0);
  ASSERT_TRUE(PollUntil(
      [&] {
        const json env =
            json::parse(oai_->Get("/v1/agents/environments/" + environment).body, nullptr, false);
        return env.is_object() && env.value("status", "") == "disconnected";
      },
      In(kConverge), milliseconds(100)));

  // Deliveries for this very session that must not wake anything.
  const std::string body = ActionRequired(session);
  EXPECT_EQ(Deliver("msg_forged", body, NowSeconds(), kForeignSecret).status, 401);
  EXPECT_EQ(Deliver("msg_stale", body, NowSeconds() - 600).status, 400);
  EXPECT_EQ(Deliver("msg_future", body, NowSeconds() + 600).status, 400);
  EXPECT_EQ(Deliver("msg_unsigned", body, NowSeconds(), "").status, 400);
  // A well-signed delivery for a session sbx does not own: acknowledged, ignored.
  EXPECT_EQ(Deliver("msg_foreign", ActionRequired("sess_not_ours"), NowSeconds()).status, 200);
  // A refused delivery is answered after it was judged: had it enqueued the worker, the
  // reconcile would relaunch the executor within a second or two. Nothing may happen.
  EXPECT_FALSE(PollUntil([&] { return Restarts(Worker("fixer")) > 0; }, In(milliseconds(3000)),
                         milliseconds(200)));
  EXPECT_EQ(Deliveries("accepted", "enqueued"), 0);
  EXPECT_EQ(Deliveries("accepted", "unknown_session"), 1);
  EXPECT_EQ(Deliveries("rejected", "bad_signature"), 1);
  EXPECT_EQ(Deliveries("rejected", "stale"), 1);
  EXPECT_EQ(Deliveries("rejected", "future"), 1);
  EXPECT_EQ(Deliveries("rejected", "missing_header"), 1);

  // An application sends input straight to the session: the service raises
  // environment_connection and holds the POST; its webhook wakes sbxd, which relaunches.
  const auto sent_at = std::chrono::steady_clock::now();
  HttpResult posted;
  std::thread app([&] {
    const json input = {
        {"events",
         {{{"type", "agent.session.input.message"},
           {"input",
            {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hello"}}}}}}}}}}};
    try {
      posted = oai_->Post("/v1/agents/sessions/" + session + "/events", input.dump());
    } catch (const std::exception& e) {
      posted.body = e.what();  // the client gave up waiting: the status stays 0
    }
  });
  const bool woke = PollUntil(
      [&] {
        w = Worker("fixer");
        return Restarts(w) >= 1 && Ready(w) && Pid(w) != old_pid;
      },
      In(milliseconds(30'000)), milliseconds(100));
  const auto woke_after =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - sent_at);
  app.join();
  ASSERT_TRUE(woke) << w.dump(2);
  std::cerr << "[ wake ] input → executor relaunched and connected in " << woke_after.count()
            << " ms\n";
  EXPECT_EQ(posted.status, 202) << posted.body;  // the held input went through…
  EXPECT_TRUE(PollUntil([&] { return TurnsStarted(session) == 1; }, In(kConverge)));  // …once
  EXPECT_GE(Deliveries("accepted", "enqueued"), 1);
  const json hooks = json::parse(oai_->Get("/_emulator/openai/webhooks").body, nullptr, false);
  bool delivered = false;
  for (const json& d : hooks.value("deliveries", json::array())) {
    delivered = delivered || (d.value("type", "") == "agent.session.action_required" &&
                              d.value("session_id", "") == session && d.value("delivered", false));
  }
  EXPECT_TRUE(delivered) << hooks.dump(2);

  // A replay of an accepted delivery (same id, same signed bytes) is refused and does nothing.
  const double enqueued = Deliveries("accepted", "enqueued");
  const int64_t at = NowSeconds();
  const std::string again = ActionRequired(session);
  EXPECT_EQ(Deliver("msg_once", again, at).status, 200);
  EXPECT_EQ(Deliver("msg_once", again, at).status, 409);
  EXPECT_EQ(Deliveries("accepted", "enqueued"), enqueued + 1);
  EXPECT_EQ(Deliveries("rejected", "replayed"), 1);
}

// Two replicas splitting workspaces on one store (--work-split workspace, #25): the replica that
// receives the webhook does not hold the worker's workspace, so its own queue cannot act on it.
// The hint goes through the store (a wake-hint change) to the holder, which wakes the worker at
// once although its cadence is an hour.
TEST_F(WebhookWakeTest, AWebhookReceivedByAnotherReplicaWakesTheWorkerAtTheHolder) {
  harness_.SetEnv("OPENAI_WEBHOOK_SECRET", kSecret);
  const sbx::api::Status started = harness_.StartEmulator(
      {"--disconnected-after", "300ms", "--connection-wait", "90s"}, kConverge);
  ASSERT_TRUE(started.ok()) << started;
  oai_ = &harness_.openai();
  const auto replica = [&](const std::string& identity, std::vector<std::string> more) {
    std::vector<std::string> args = {"--work-split",
                                     "workspace",
                                     "--identity",
                                     identity,
                                     "--executor-status-interval",
                                     "1h",
                                     "--executor-probe-interval",
                                     "1h"};
    args.insert(args.end(), more.begin(), more.end());
    return harness_.StartSbxd("sbxd-" + identity, args);
  };
  auto holder = replica("holder", {});
  ASSERT_TRUE(holder.ok()) << holder.status();
  ASSERT_EQ(harness_.Apply("fixer", WorkerYaml("fixer")).exit_code, 0);
  json w;
  ASSERT_TRUE(
      PollUntil([&] { return Ready(w = Worker("fixer")); }, In(kConverge), milliseconds(200)))
      << w.dump(2);
  ASSERT_TRUE((*holder)->WaitForLine(std::regex(R"(took a workspace.*default/default)"),
                                     In(kConverge), /*from_stderr=*/true))
      << "the holder did not log its workspace lease";
  const std::string session = S(w, "sessionId");
  const std::string environment = S(w, "environmentId");
  const int64_t old_pid = Pid(w);

  // The receiver: a replica with the webhook endpoint and no workspace (its share of one
  // workspace among two replicas is taken).
  auto receiver = replica("receiver", {"--webhook-addr", "127.0.0.1:0"});
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  sbxd_ = *receiver;
  auto line = sbxd_->WaitForLine(std::regex(R"(serving webhooks.*port=(\d+))"), In(kConverge),
                                 /*from_stderr=*/true);
  ASSERT_TRUE(line) << "the receiver did not log its webhook port";
  webhook_port_ = std::stoi((*line)[1]);
  metrics_port_ = SbxdHarness::MetricsPort(*sbxd_);
  ASSERT_GT(metrics_port_, 0);
  json config = {{"url", "http://127.0.0.1:" + std::to_string(webhook_port_) + "/webhooks/openai"},
                 {"secret", kSecret},
                 {"retry_base_ms", 200},
                 {"max_attempts", 5}};
  HttpResult r = oai_->Post("/_emulator/openai/webhooks", config.dump());
  ASSERT_EQ(r.status, 200) << r.body;

  // The executor dies behind sbx's back; the holder will not look for an hour.
  ASSERT_EQ(::kill(static_cast<pid_t>(old_pid), SIGKILL), 0);
  ASSERT_TRUE(PollUntil(
      [&] {
        const json env =
            json::parse(oai_->Get("/v1/agents/environments/" + environment).body, nullptr, false);
        return env.is_object() && env.value("status", "") == "disconnected";
      },
      In(kConverge), milliseconds(100)));

  HttpResult posted;
  std::thread app([&] {
    const json input = {
        {"events",
         {{{"type", "agent.session.input.message"},
           {"input",
            {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "hello"}}}}}}}}}}};
    try {
      posted = oai_->Post("/v1/agents/sessions/" + session + "/events", input.dump());
    } catch (const std::exception& e) {
      posted.body = e.what();
    }
  });
  const bool woke = PollUntil(
      [&] {
        w = Worker("fixer");
        return Restarts(w) >= 1 && Ready(w) && Pid(w) != old_pid;
      },
      In(milliseconds(30'000)), milliseconds(100));
  app.join();
  ASSERT_TRUE(woke) << "the holder was not woken: " << w.dump(2);
  EXPECT_EQ(posted.status, 202) << posted.body;
  EXPECT_TRUE(PollUntil([&] { return TurnsStarted(session) == 1; }, In(kConverge)));
  EXPECT_GE(Deliveries("accepted", "enqueued"), 1);  // the receiver's count
}

}  // namespace
