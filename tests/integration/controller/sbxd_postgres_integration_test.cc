// sbxd and sbxctl on PostgreSQL (issue #17): the BUILT binaries with `--db postgres://…` against
// the emulator, each test on a fresh database of the throwaway PostgreSQL 15
// (tests/support/postgres_server.h). A Sandbox converges to Ready and is deleted in the cloud,
// `sbxctl get -w` sees the controller's status writes (the watch over the change log, woken by
// NOTIFY), and when two replicas split the work and the one holding the workspace dies, the
// other takes it over, with no sandbox created twice. The password of the URL never reaches
// sbxd's log. A Workspace's limits.maxConcurrentTasks holds across two replicas and a kill -9
// of the one that works the workspace (#28).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/open_store.h"
#include "tests/support/http_test_client.h"
#include "tests/support/postgres_server.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

using json = nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr milliseconds kConverge{30'000};

std::string SandboxYaml(const std::string& name) {
  return "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: " + name +
         "\nspec:\n  displayName: \"" + name + "\"\n  deletionPolicy: Delete\n";
}

// A fresh database on the shared server; "" (and a failure) when there is none.
std::string NewDatabase() {
  std::string error;
  sbx::testing::PostgresServer* server = sbx::testing::SharedPostgresServer(&error);
  EXPECT_NE(server, nullptr) << error;
  if (server == nullptr) {
    return "";
  }
  auto url = server->NewDatabaseUrl();
  EXPECT_TRUE(url.ok()) << url.status();
  return url.ok() ? *url : "";
}

class SbxdPostgresTest : public ::testing::Test {
 protected:
  SbxdPostgresTest()
      : db_(NewDatabase()),
        harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbxd-pg-itest-",
                  .token = "dapi-itest-" + std::to_string(std::random_device{}()),
                  .app_key = "sk-app-itest-pg",
                  .executor_key = "sk-exec-itest-pg",
                  .db = db_}) {}

  void SetUp() override {
    ASSERT_FALSE(db_.empty());
    const sbx::api::Status started = harness_.StartEmulator();
    ASSERT_TRUE(started.ok()) << started;
    // sbxctl creates the schema before any sbxd starts.
    RunResult init = harness_.Sbxctl({"get", "sandboxes"});
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }
  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  Process* StartSbxd(const std::string& identity) {
    auto p = harness_.StartSbxd(identity, {"--workers", "4", "--identity", identity});
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : nullptr;
  }

  bool WaitReady(const std::string& name) {
    return PollUntil(
        [&] {
          last_ = harness_.Get("sandbox", name);
          return last_.is_object() && ConditionOf(last_, "Ready").first == "True" &&
                 last_["status"].value("state", "") == "RUNNING";
        },
        In(kConverge), milliseconds(100));
  }

  std::set<std::string> SandboxIds() {
    HttpResult r = harness_.databricks().Get("/api/2.0/sandboxes?page_size=100");
    EXPECT_EQ(r.status, 200) << r.body;
    std::set<std::string> ids;
    for (const json& s : json::parse(r.body).value("sandboxes", json::array())) {
      ids.insert(s["name"].get<std::string>().substr(std::string("sandboxes/").size()));
    }
    return ids;
  }

  // An unlabelled metric of the sbxd serving metrics on `port` (-1 when absent).
  int Metric(int port, const std::string& name) {
    try {
      const std::string text =
          HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get("/metrics").body;
      std::smatch m;
      if (std::regex_search(text, m, std::regex("\\n" + name + " ([0-9.]+)"))) {
        return static_cast<int>(std::stod(m[1].str()));
      }
    } catch (const std::exception&) {
    }
    return -1;
  }

  int HealthStatus(int port, const std::string& path) {
    try {
      return HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get(path).status;
    } catch (const std::exception&) {
      return 0;
    }
  }

  std::string db_;
  SbxdHarness harness_;
  json last_;
};

TEST_F(SbxdPostgresTest, ConvergesASandboxAndDeletesItInTheCloud) {
  Process* sbxd = StartSbxd("sbxd-pg");
  ASSERT_NE(sbxd, nullptr);
  // `sbxctl get -w` on the same database: it must see the controller's status writes.
  Process* watch = nullptr;
  {
    auto started = Process::Start(
        SBXCTL_PATH, harness_.ChildOptions("get-w", {"--db", db_, "get", "sandboxes", "-w"}));
    ASSERT_TRUE(started.ok()) << started.status();
    watch = started->release();
  }
  std::unique_ptr<Process> watch_owner(watch);

  RunResult applied = harness_.Apply("one", SandboxYaml("one"));
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  ASSERT_TRUE(WaitReady("one")) << last_.dump(2);
  EXPECT_EQ(SandboxIds(), std::set<std::string>{"default-one"});
  EXPECT_TRUE(watch->WaitForLine(std::regex("one .*True"), In(kConverge)).has_value())
      << watch->Stdout();

  RunResult deleted = harness_.Sbxctl({"delete", "sandbox", "one"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  ASSERT_TRUE(PollUntil([&] { return harness_.Get("sandbox", "one").is_null(); }, In(kConverge),
                        milliseconds(100)));
  EXPECT_TRUE(SandboxIds().empty());
}

// With PostgreSQL, replicas split the workspaces (--work-split auto → workspace): both are
// ready and reconcile; the env-backed "default" workspace is held by one of them; kill -9 that
// one and the other takes the workspace over, with nothing created twice.
TEST_F(SbxdPostgresTest, AReplicaTakesAWorkspaceOverWhenItsHolderDiesAndNothingIsCreatedTwice) {
  Process* a = StartSbxd("sbxd-a");  // the harness gives --lease-duration 3s
  ASSERT_NE(a, nullptr);
  const int port_a = SbxdHarness::MetricsPort(*a, kConverge);
  Process* b = StartSbxd("sbxd-b");
  ASSERT_NE(b, nullptr);
  const int port_b = SbxdHarness::MetricsPort(*b, kConverge);
  for (int port : {port_a, port_b}) {
    ASSERT_TRUE(PollUntil([&] { return HealthStatus(port, "/readyz") == 200; }, In(kConverge)))
        << "every replica is ready: each reconciles its share";
  }

  ASSERT_EQ(harness_.Apply("before", SandboxYaml("before")).exit_code, 0);
  ASSERT_TRUE(WaitReady("before")) << last_.dump(2);
  const int held_a = Metric(port_a, "sbx_workspace_leases_held");
  const int held_b = Metric(port_b, "sbx_workspace_leases_held");
  ASSERT_EQ(held_a + held_b, 1) << "one workspace, one holder";

  Process* holder = held_a == 1 ? a : b;
  const int survivor_port = held_a == 1 ? port_b : port_a;
  const auto killed_at = std::chrono::steady_clock::now();
  holder->Kill();
  ASSERT_TRUE(PollUntil([&] { return Metric(survivor_port, "sbx_workspace_leases_held") == 1; },
                        In(kConverge), milliseconds(20)));
  // Reported, not asserted (a timing on a shared machine): the lease is 3 s, renewed every 1 s.
  std::cout << "takeover after kill -9: "
            << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() -
                                                        killed_at)
                   .count()
            << " ms\n";
  ASSERT_EQ(harness_.Apply("after", SandboxYaml("after")).exit_code, 0);
  ASSERT_TRUE(WaitReady("after")) << last_.dump(2);
  EXPECT_EQ(Metric(survivor_port, "sbx_workspace_leases_held"), 1);
  EXPECT_EQ(SandboxIds(), (std::set<std::string>{"default-before", "default-after"}));
  HttpResult counters = harness_.databricks().Get("/_emulator/counters");
  ASSERT_EQ(counters.status, 200);
  EXPECT_EQ(json::parse(counters.body).value("databricks.create", int64_t{-1}), 2) << counters.body;
}

// limits.maxConcurrentTasks (#28): 30 tasks on 4 workers of a workspace limited to 3, two
// replicas on PostgreSQL, the one that works the workspace killed (-9) halfway: sampling the
// store every 100 ms never sees more than 3 tasks Submitted or Running, and all 30 succeed.
TEST_F(SbxdPostgresTest, MaxConcurrentTasksHoldsAcrossTwoReplicasAndAKill) {
  Process* a = StartSbxd("sbxd-a");
  ASSERT_NE(a, nullptr);
  const int port_a = SbxdHarness::MetricsPort(*a, kConverge);
  Process* b = StartSbxd("sbxd-b");
  ASSERT_NE(b, nullptr);
  ASSERT_GT(SbxdHarness::MetricsPort(*b, kConverge), 0);  // up
  ASSERT_EQ(harness_
                .Apply("workspace",
                       "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: default\n"
                       "spec:\n  limits: {maxConcurrentTasks: 3}\n")
                .exit_code,
            0);
  std::string workers;
  for (int w = 1; w <= 4; ++w) {
    workers +=
        "---\n" + SbxdHarness::InlineWorkerYaml("w" + std::to_string(w), "/home/sandbox-agent/ws");
  }
  RunResult applied = harness_.Apply("workers", workers);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  for (int w = 1; w <= 4; ++w) {
    ASSERT_TRUE(PollUntil(
        [&] {
          last_ = harness_.Get("agentworker", "w" + std::to_string(w));
          return ConditionOf(last_, "Ready").first == "True";
        },
        In(std::chrono::seconds(90)), milliseconds(100)))
        << last_.dump(2);
  }

  auto store = sbx::controller::OpenStore(db_);
  ASSERT_TRUE(store.ok()) << store.status();
  std::atomic<bool> sampling{true};
  std::atomic<int> most{0};
  std::atomic<int> samples{0};
  std::atomic<bool> limited_seen{false};
  std::thread sampler([&] {
    sbx::controller::ListOptions tasks;
    tasks.kind = sbx::api::Kind::kAgentTask;
    while (sampling) {
      auto listed = (*store)->List(tasks);
      if (listed.ok()) {
        int active = 0;
        for (const sbx::api::Object& t : *listed) {
          const auto& st = t.agent_task_status();
          active += st.phase == sbx::api::TaskPhase::kSubmitted ||
                    st.phase == sbx::api::TaskPhase::kRunning;
          for (const sbx::api::Condition& c : st.conditions) {
            limited_seen = limited_seen || c.reason == "ConcurrencyLimited";
          }
        }
        most = std::max(most.load(), active);
        ++samples;
      }
      std::this_thread::sleep_for(milliseconds(100));  // the sampling cadence, not a wait
    }
  });

  std::string tasks;
  for (int i = 1; i <= 30; ++i) {
    tasks += "---\napiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: t" +
             std::to_string(i) + "\nspec:\n  workerRef: w" + std::to_string(i % 4 + 1) +
             "\n  timeout: 5m\n  input: \"$ sleep 1\"\n";
  }
  applied = harness_.Apply("tasks", tasks);
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  auto succeeded = [&] {
    int n = 0;
    for (int i = 1; i <= 30; ++i) {
      n += harness_.Get("agenttask", "t" + std::to_string(i))["status"].value("phase", "") ==
           "Succeeded";
    }
    return n;
  };
  ASSERT_TRUE(
      PollUntil([&] { return succeeded() >= 10; }, In(std::chrono::minutes(3)), milliseconds(500)));
  const bool a_holds = Metric(port_a, "sbx_workspace_leases_held") == 1;
  (a_holds ? a : b)->Kill();
  const bool all =
      PollUntil([&] { return succeeded() == 30; }, In(std::chrono::minutes(4)), milliseconds(500));
  sampling = false;
  sampler.join();
  ASSERT_TRUE(all) << succeeded() << " of 30 succeeded";
  EXPECT_LE(most.load(), 3) << "over " << samples.load() << " samples";
  EXPECT_EQ(most.load(), 3) << "the limit, not fewer, ran at once";
  EXPECT_TRUE(limited_seen.load());
  EXPECT_GT(samples.load(), 50);
}

TEST_F(SbxdPostgresTest, ThePasswordOfTheUrlNeverReachesTheLog) {
  // The throwaway server trusts loopback, so any password is accepted and must stay hidden.
  const std::string with_password = "postgres://postgres:pw-" +
                                    std::to_string(std::random_device{}()) + "@" +
                                    db_.substr(db_.find('@') + 1);
  const std::string password = with_password.substr(
      with_password.find(":pw-") + 1, with_password.find('@') - with_password.find(":pw-") - 1);
  auto p = Process::Start(
      SBXD_PATH, harness_.ChildOptions("sbxd-secret", {"--db", with_password, "--metrics-addr",
                                                       "127.0.0.1:0", "--identity", "s"}));
  ASSERT_TRUE(p.ok()) << p.status();
  Process& sbxd = **p;
  ASSERT_TRUE(PollUntil(
      [&] {
        return (sbxd.Stdout() + sbxd.Stderr()).find("took the global lease") != std::string::npos;
      },
      In(kConverge)))
      << sbxd.Stderr();
  const std::string log = sbxd.Stdout() + sbxd.Stderr();
  EXPECT_THAT(log, HasSubstr("postgres:***@127.0.0.1"));
  EXPECT_THAT(log, Not(HasSubstr(password)));
}

}  // namespace
