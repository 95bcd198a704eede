// The Daemon class (controller/daemon, issue #26) run in the test's own process, against the
// built sbx-emulator and the test's SQLite store: what `sbxd` does, without the binary. It
// converges a Sandbox, serves /readyz and /metrics, refuses a --once pass next to itself, and on
// stop drains, closes its listeners and gives its lease up, so a pass then runs at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "controller/daemon/daemon.h"
#include "tests/support/http_test_client.h"
#include "tests/support/poll.h"
#include "tests/support/sbxd_harness.h"

namespace sbx::controller::daemon {
namespace {

using json = nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::SbxdHarness;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kConverge{30'000};

class DaemonTest : public ::testing::Test {
 protected:
  DaemonTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "daemon-itest-",
                  .token = "dapi-daemon-" + std::to_string(getpid())}) {}

  void SetUp() override {
    const api::Status started = harness_.StartEmulator();
    ASSERT_TRUE(started.ok()) << started;
    // The daemon reads the process environment, as sbxd does: the harness's, hermetic.
    for (const char* name : {"DATABRICKS_CONFIG_PROFILE", "DATABRICKS_CONFIG_FILE",
                             "DATABRICKS_CLIENT_ID", "DATABRICKS_CLIENT_SECRET", "SBX_DB"}) {
      unsetenv(name);
    }
    for (const auto& [name, value] : harness_.Env()) {
      setenv(name.c_str(), value.c_str(), 1);
    }
    ASSERT_EQ(harness_.Sbxctl({"get", "sandboxes"}).exit_code, 0);  // the store exists
  }

  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  // The flags the harness gives a built sbxd, resolved as sbxd resolves them.
  DaemonConfig Config(const std::string& identity, bool once) {
    DaemonFlags f;
    f.db = harness_.db().string();
    f.resync = "30s";
    f.sweep_interval = "1s";
    f.gc_grace = "2s";
    f.metrics_addr = "127.0.0.1:0";
    f.lease_duration = "3s";
    f.identity = identity;
    f.once = once;
    api::StatusOr<DaemonConfig> c = ResolveConfig(f, {"PATH=/usr/bin:/bin"});
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }

  // GET on the daemon's health server: the status, 0 when nothing answers.
  static int Status(int port, const std::string& path, std::string* body = nullptr) {
    try {
      auto r = HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get(path);
      if (body != nullptr) {
        *body = r.body;
      }
      return r.status;
    } catch (const std::exception&) {
      return 0;
    }
  }

  SbxdHarness harness_;
};

TEST_F(DaemonTest, RunsInProcessConvergesAndShutsDownOnStop) {
  api::StatusOr<std::unique_ptr<Daemon>> sbxd = Daemon::Create(Config("in-process-a", false));
  ASSERT_TRUE(sbxd.ok()) << sbxd.status();
  ASSERT_TRUE((*sbxd)->Serve().ok());
  const int port = (*sbxd)->metrics_port();
  ASSERT_NE(port, 0);
  EXPECT_EQ((*sbxd)->api_port(), 0);  // no --listen
  std::stop_source stop;
  int exit_code = -1;
  std::thread run([&] { exit_code = (*sbxd)->Run(stop.get_token()); });

  EXPECT_TRUE(
      PollUntil([&] { return Status(port, "/readyz") == 200; }, In(kConverge), milliseconds(100)));
  ASSERT_EQ(harness_
                .Apply("box",
                       "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n"
                       "  name: box\nspec:\n  displayName: box\n")
                .exit_code,
            0);
  json box;
  EXPECT_TRUE(PollUntil(
      [&] {
        box = harness_.Get("sandbox", "box");
        return box.is_object() && ConditionOf(box, "Ready").first == "True";
      },
      In(kConverge), milliseconds(100)))
      << box.dump();
  std::string metrics;
  EXPECT_EQ(Status(port, "/metrics", &metrics), 200);
  EXPECT_THAT(metrics, HasSubstr("sbx_leader 1"));
  EXPECT_THAT(metrics, HasSubstr("sbx_workqueue_depth"));
  EXPECT_THAT(metrics, HasSubstr("sbx_sandboxes{state=\"RUNNING\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("sbx_gitsource_syncs_total{result=\"failure\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("sbx_reconciles_total{kind=\"Sandbox\""));

  // A pass next to a running daemon does nothing and says who holds the store.
  {
    api::StatusOr<std::unique_ptr<Daemon>> pass = Daemon::Create(Config("in-process-once", true));
    ASSERT_TRUE(pass.ok()) << pass.status();
    std::ostringstream err;
    EXPECT_EQ((*pass)->RunOnce({}, err), kExitLeaseHeld);
    EXPECT_THAT(err.str(), HasSubstr("\"in-process-a\""));
  }

  stop.request_stop();
  run.join();
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(Status(port, "/healthz"), 0);  // the listener is closed
  // The lease was given up, not left to expire: a pass runs at once, and finds nothing to fix.
  api::StatusOr<std::unique_ptr<Daemon>> pass = Daemon::Create(Config("in-process-once", true));
  ASSERT_TRUE(pass.ok()) << pass.status();
  std::ostringstream err;
  EXPECT_EQ((*pass)->RunOnce({}, err), 0) << err.str();
  sbxd->reset();
  // Shutdown deletes nothing in the cloud.
  EXPECT_EQ(harness_.databricks().Get("/api/2.0/sandboxes/default-box").status, 200);
}

}  // namespace
}  // namespace sbx::controller::daemon
