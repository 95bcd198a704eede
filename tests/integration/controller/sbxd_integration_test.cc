// Integration tests of the controller as shipped: the BUILT sbxd, sbxctl and sbx-emulator
// binaries, each test with its own temp directory, emulator (200 ms PENDING/STOPPING delays),
// SQLite store and sbxd (1 s sweeps, 2 s GC grace, 3 s leader lease). Desired state goes in with
// `sbxctl apply -f`, status comes back with `sbxctl get -o json`, and the cloud side is checked
// through the emulator: its Databricks API (with the token) and its admin API (call counters,
// stopping a sandbox behind the controller's back, sandbox home directories on disk).
//
// Everything waits by polling with a deadline; nothing sleeps for a fixed time to "let it
// settle". Deadlines are generous for a loaded 2-core CI machine; the tests are still fast
// because they return as soon as the state is reached.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "api/resources.h"
#include "controller/store/sqlite_store.h"
#include "tests/support/http_test_client.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::Deadline;
using sbx::testing::HttpResult;
using sbx::testing::HttpTestClient;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::Process;
using sbx::testing::ProcessOptions;
using sbx::testing::RunProcess;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using sbx::testing::WriteFile;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr milliseconds kConverge{30'000};  // create → Ready and friends, on a loaded machine

struct SandboxManifest {
  SandboxManifest(std::string n, std::string d) : name(std::move(n)), display_name(std::move(d)) {}

  std::string name;
  std::string display_name;
  std::string inactivity_timeout = "15m";
  std::string power = "Running";
  std::string deletion_policy = "Delete";
  std::string setup;  // `run` of one setup step named "marker"; empty = no setup

  std::string Yaml() const {
    std::string y = "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: " + name +
                    "\nspec:\n  displayName: \"" + display_name +
                    "\"\n  inactivityTimeout: " + inactivity_timeout + "\n  power: " + power +
                    "\n  deletionPolicy: " + deletion_policy + "\n";
    if (!setup.empty()) {
      y += "  setup:\n  - name: marker\n    run: " + json(setup).dump() + "\n";
    }
    return y;
  }
};

std::string SandboxId(const std::string& name) { return "default-" + name; }

class SbxdTest : public ::testing::Test {
 protected:
  SbxdTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "sbxd-itest-",
                  .token = "dapi-itest-" + std::to_string(std::random_device{}())}) {}

  void SetUp() override {
    dir_ = harness_.dir();
    db_ = harness_.db();
    token_ = harness_.options().token;
    const sbx::api::Status started = harness_.StartEmulator();
    ASSERT_TRUE(started.ok()) << started;
    url_ = harness_.databricks_url();
    emu_ = &harness_.databricks();
    // Create the store before any test starts sbxd and sbxctl side by side: under heavy load an
    // sbxd opening a FRESH file while `sbxctl apply` creates its schema once failed at once with
    // "database … is locked by another writer" (SQLITE_BUSY without waiting the busy timeout).
    // That startup race is reported separately; these tests are about the controller.
    RunResult init = Sbxctl({"get", "sandboxes"});
    ASSERT_EQ(init.exit_code, 0) << init.err;
  }

  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  ProcessOptions Options(const std::string& log_name, std::vector<std::string> args) {
    return harness_.ChildOptions(log_name, std::move(args));
  }

  // Starts an sbxd on this test's store (4 workers, 2 s GC grace). Returns it (owned by the
  // harness).
  Process* StartSbxd(const std::string& identity = "sbxd-a", std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), {"--workers", "4", "--gc-grace", "2s", "--identity", identity});
    auto p = harness_.StartSbxd(identity + "-" + std::to_string(++starts_), std::move(extra));
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : nullptr;
  }

  // The port sbxd's health/metrics server bound (from its startup log line).
  int MetricsPort(Process& sbxd) {
    const int port = SbxdHarness::MetricsPort(sbxd, kConverge);
    EXPECT_NE(port, 0) << "no metrics port in sbxd's log:\n" << sbxd.Stderr();
    return port;
  }

  RunResult Sbxctl(std::vector<std::string> args, milliseconds timeout = milliseconds(60'000)) {
    return harness_.Sbxctl(std::move(args), timeout);
  }

  void Apply(const SandboxManifest& m) {
    RunResult r = harness_.Apply(m.name, m.Yaml());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // The Sandbox object as `sbxctl get -o json` prints it; null when it does not exist.
  json Get(const std::string& name) { return harness_.Get("sandbox", name); }

  // True once the controller observed the current generation and `type` has `status` (and
  // `reason`, if given) and status.state is `state` (if given).
  bool Has(const std::string& name, const std::string& type, const std::string& status,
           const std::string& reason = "", const std::string& state = "") {
    last_ = Get(name);
    if (!last_.is_object() || !last_.contains("status")) {
      return false;
    }
    const json& s = last_["status"];
    if (s.value("observedGeneration", int64_t{-1}) < last_["metadata"].value("generation", 0)) {
      return false;
    }
    auto [st, rs] = ConditionOf(last_, type);
    return st == status && (reason.empty() || rs == reason) &&
           (state.empty() || s.value("state", "") == state);
  }

  bool WaitFor(const std::string& name, const std::string& type, const std::string& status,
               const std::string& reason = "", const std::string& state = "",
               milliseconds timeout = kConverge) {
    return PollUntil([&] { return Has(name, type, status, reason, state); }, In(timeout),
                     milliseconds(100));
  }

  bool WaitRunningAndReady(const std::string& name, milliseconds timeout = kConverge) {
    return WaitFor(name, "Ready", "True", "", "RUNNING", timeout);
  }

  std::map<std::string, int64_t> Counters() {
    HttpResult r = emu_->Get("/_emulator/counters");
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::string, int64_t> out;
    const json counters = json::parse(r.body);
    for (const auto& [k, v] : counters.items()) {
      out[k] = v.get<int64_t>();
    }
    return out;
  }
  int64_t Counter(const std::string& endpoint) { return Counters()[endpoint]; }

  HttpResult EmuGet(const std::string& id) { return emu_->Get("/api/2.0/sandboxes/" + id); }

  // Every sandbox id in the emulator, through the paged LIST.
  std::set<std::string> ListIds() {
    std::set<std::string> ids;
    std::string token;
    do {
      HttpResult r = emu_->Get("/api/2.0/sandboxes?page_size=50" +
                               (token.empty() ? "" : "&page_token=" + token));
      EXPECT_EQ(r.status, 200) << r.body;
      json j = json::parse(r.body);
      for (const json& s : j.value("sandboxes", json::array())) {
        ids.insert(s["name"].get<std::string>().substr(std::string("sandboxes/").size()));
      }
      token = j.value("next_page_token", "");
    } while (!token.empty());
    return ids;
  }

  std::string Events() {
    RunResult r = Sbxctl({"events", "-A"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }

  bool WaitForEvent(const std::string& reason, milliseconds timeout = kConverge) {
    return PollUntil([&] { return Events().find(reason) != std::string::npos; }, In(timeout),
                     milliseconds(200));
  }

  // GET <port><path> on sbxd's health server; the HTTP status (0 when unreachable).
  int HealthStatus(int port, const std::string& path) {
    try {
      return HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get(path).status;
    } catch (const std::exception&) {
      return 0;
    }
  }

  SbxdHarness harness_;
  fs::path dir_;
  fs::path db_;
  std::string token_;
  std::string url_;                // the emulator's Databricks API
  HttpTestClient* emu_ = nullptr;  // its client, with the token
  int starts_ = 0;
  json last_;  // the last object Has() read, for failure messages
};

// 1. create → Ready: the sandbox runs, the setup step ran inside it, `sbxctl wait` agrees, and
//    `sbxctl exec` runs commands in it with their exit code.
TEST_F(SbxdTest, CreatesASandboxRunsSetupAndReportsReady) {
  ASSERT_NE(StartSbxd(), nullptr);
  SandboxManifest m("alpha", "Alpha");
  m.setup = "echo set-up > /home/sandbox-agent/setup-ran";
  Apply(m);

  RunResult wait = Sbxctl({"wait", "sandbox/alpha", "--for=condition=Ready", "--timeout", "30s"});
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  ASSERT_TRUE(WaitRunningAndReady("alpha")) << last_.dump(2);
  EXPECT_EQ(ConditionOf(last_, "Synced").first, "True");
  EXPECT_EQ(last_["status"].value("sandboxName", ""), "sandboxes/default-alpha");
  EXPECT_FALSE(last_["status"].value("bootId", "").empty());

  HttpResult live = EmuGet(SandboxId("alpha"));
  ASSERT_EQ(live.status, 200) << live.body;
  EXPECT_EQ(json::parse(live.body)["display_name"], "Alpha");
  EXPECT_EQ(json::parse(live.body)["status"]["state"], "SANDBOX_STATE_RUNNING");
  // The setup step's effect, on disk in the sandbox's home directory …
  HttpResult admin = emu_->Get("/_emulator/sandboxes/" + SandboxId("alpha"));
  ASSERT_EQ(admin.status, 200) << admin.body;
  const fs::path home = json::parse(admin.body)["home_dir"].get<std::string>();
  std::ifstream marker(home / "setup-ran");
  std::string content;
  std::getline(marker, content);
  EXPECT_EQ(content, "set-up");
  // … and through sbxctl exec, which also passes the command's exit code through.
  RunResult exec = Sbxctl({"exec", "sandbox/alpha", "--", "/bin/bash", "-c",
                           "cat /home/sandbox-agent/setup-ran; echo oops >&2; exit 3"});
  EXPECT_EQ(exec.exit_code, 3) << exec.err;
  EXPECT_EQ(exec.out, "set-up\n");
  EXPECT_EQ(exec.err, "oops\n");
  exec = Sbxctl({"exec", "alpha", "--", "true"});
  EXPECT_EQ(exec.exit_code, 0) << exec.err;
  exec = Sbxctl({"exec", "sandbox/nope", "--", "true"});
  EXPECT_EQ(exec.exit_code, 1);
  EXPECT_THAT(exec.err, HasSubstr("not found"));

  // Steady state costs one LIST per sweep and nothing else: no GET, PATCH or exec per object.
  std::map<std::string, int64_t> before = Counters();
  ASSERT_TRUE(PollUntil([&] { return Counter("databricks.list") >= before["databricks.list"] + 2; },
                        In(kConverge)));
  std::map<std::string, int64_t> after = Counters();
  for (const auto& [endpoint, n] : after) {
    if (endpoint != "databricks.list") {
      EXPECT_EQ(n, before[endpoint]) << endpoint << " called in steady state";
    }
  }
}

// 2. Two drifted fields → exactly one PATCH carrying both.
TEST_F(SbxdTest, ChangesDisplayNameAndInactivityTimeoutWithOnePatch) {
  ASSERT_NE(StartSbxd(), nullptr);
  SandboxManifest m("beta", "Beta");
  Apply(m);
  ASSERT_TRUE(WaitRunningAndReady("beta")) << last_.dump(2);
  const int64_t patches_before = Counter("databricks.update");

  m.display_name = "Beta Two";
  m.inactivity_timeout = "45m";
  Apply(m);
  ASSERT_TRUE(PollUntil(
      [&] {
        HttpResult r = EmuGet(SandboxId("beta"));
        const json j = json::parse(r.body);
        return r.status == 200 && j.value("display_name", "") == "Beta Two" &&
               j.value(json::json_pointer("/spec/compute/inactivity_timeout"), "") == "2700s";
      },
      In(kConverge)))
      << EmuGet(SandboxId("beta")).body;
  ASSERT_TRUE(WaitRunningAndReady("beta")) << last_.dump(2);
  EXPECT_EQ(Counter("databricks.update") - patches_before, 1);
}

// 3. power: Stopped → STOPPED with Ready=True/Stopped; Running → RUNNING again.
TEST_F(SbxdTest, FollowsSpecPowerStoppedAndRunning) {
  ASSERT_NE(StartSbxd(), nullptr);
  SandboxManifest m("gamma", "Gamma");
  Apply(m);
  ASSERT_TRUE(WaitRunningAndReady("gamma")) << last_.dump(2);

  m.power = "Stopped";
  Apply(m);
  ASSERT_TRUE(WaitFor("gamma", "Ready", "True", "Stopped", "STOPPED")) << last_.dump(2);
  HttpResult live = EmuGet(SandboxId("gamma"));
  EXPECT_EQ(json::parse(live.body)["status"]["state"], "SANDBOX_STATE_STOPPED");

  m.power = "Running";
  Apply(m);
  ASSERT_TRUE(WaitRunningAndReady("gamma")) << last_.dump(2);
  live = EmuGet(SandboxId("gamma"));
  EXPECT_EQ(json::parse(live.body)["status"]["state"], "SANDBOX_STATE_RUNNING");
}

// 4. A stop behind the controller's back (like an idle auto-stop) is undone without any user
//    action, and the controller says so in an event.
TEST_F(SbxdTest, StartsASandboxStoppedBehindItsBack) {
  ASSERT_NE(StartSbxd(), nullptr);
  SandboxManifest m("delta", "Delta");
  m.setup = "echo boot >> /home/sandbox-agent/boots";  // home survives a stop; /tmp does not
  Apply(m);
  ASSERT_TRUE(WaitRunningAndReady("delta")) << last_.dump(2);
  const std::string first_boot = last_["status"].value("bootId", "");
  ASSERT_FALSE(first_boot.empty());
  const int64_t starts_before = Counter("databricks.start");

  HttpResult stop = emu_->Post("/_emulator/sandboxes/" + SandboxId("delta") + "/stop");
  ASSERT_EQ(stop.status, 200) << stop.body;
  // It must actually go down and come back: the start call, then Ready for a NEW boot (the
  // status of the old one says Ready too until the controller notices).
  ASSERT_TRUE(
      PollUntil([&] { return Counter("databricks.start") > starts_before; }, In(kConverge)));
  ASSERT_TRUE(PollUntil(
      [&] {
        return Has("delta", "Ready", "True", "", "RUNNING") &&
               last_["status"].value("bootId", "") != first_boot;
      },
      In(kConverge), milliseconds(100)))
      << last_.dump(2);
  EXPECT_EQ(json::parse(EmuGet(SandboxId("delta")).body)["status"]["state"],
            "SANDBOX_STATE_RUNNING");
  // setup ran again for the new boot, and only once per boot.
  RunResult boots = Sbxctl({"exec", "sandbox/delta", "--", "cat", "/home/sandbox-agent/boots"});
  EXPECT_EQ(boots.exit_code, 0) << boots.err;
  EXPECT_EQ(boots.out, "boot\nboot\n");
  RunResult events = Sbxctl({"events", "sandbox/delta"});
  EXPECT_EQ(events.exit_code, 0) << events.err;
  EXPECT_THAT(events.out, HasSubstr("Starting"));
  EXPECT_THAT(events.out, HasSubstr("Rebooted"));
}

// 5. Deleted through the Databricks API behind the controller's back → created again, with a
//    Warning event.
TEST_F(SbxdTest, RecreatesASandboxDeletedExternally) {
  ASSERT_NE(StartSbxd(), nullptr);
  SandboxManifest eps("eps", "Eps");
  eps.setup = "true";  // with a setup step the boot id is tracked: it tells the new sandbox apart
  Apply(eps);
  ASSERT_TRUE(WaitRunningAndReady("eps")) << last_.dump(2);
  const std::string first_boot = last_["status"].value("bootId", "");
  ASSERT_FALSE(first_boot.empty());
  const int64_t creates_before = Counter("databricks.create");

  HttpResult del = emu_->Call("DELETE", "/api/2.0/sandboxes/" + SandboxId("eps"));
  ASSERT_EQ(del.status, 200) << del.body;
  ASSERT_TRUE(
      PollUntil([&] { return Counter("databricks.create") > creates_before; }, In(kConverge)));
  // Ready again, for the NEW sandbox (the old status says Ready until the controller notices).
  ASSERT_TRUE(PollUntil(
      [&] {
        return Has("eps", "Ready", "True", "", "RUNNING") &&
               last_["status"].value("bootId", "") != first_boot;
      },
      In(kConverge), milliseconds(100)))
      << last_.dump(2);
  EXPECT_EQ(Counter("databricks.create"), creates_before + 1);
  EXPECT_EQ(EmuGet(SandboxId("eps")).status, 200);
  RunResult events = Sbxctl({"events", "sandbox/eps"});
  EXPECT_THAT(events.out, HasSubstr("ExternalDeletion"));
  EXPECT_THAT(events.out, HasSubstr("Warning"));
}

// 6. deletionPolicy Delete removes the cloud sandbox; Orphan leaves it; both leave the store.
TEST_F(SbxdTest, DeletionPoliciesDeleteAndOrphan) {
  ASSERT_NE(StartSbxd(), nullptr);
  SandboxManifest gone("gone", "Gone");
  gone.deletion_policy = "Delete";
  SandboxManifest kept("kept", "Kept");
  kept.deletion_policy = "Orphan";
  Apply(gone);
  Apply(kept);
  // A third Sandbox keeps the workspace known, so the sweeper keeps listing (and collecting) it
  // after the other two are gone.
  Apply(SandboxManifest("stay", "Stay"));
  ASSERT_TRUE(WaitRunningAndReady("gone")) << last_.dump(2);
  ASSERT_TRUE(WaitRunningAndReady("kept")) << last_.dump(2);

  RunResult r = Sbxctl({"delete", "sandbox", "gone", "kept", "--wait", "--timeout", "30s"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Sbxctl({"get", "sandbox", "gone"}).exit_code, 1);
  EXPECT_EQ(Sbxctl({"get", "sandbox", "kept"}).exit_code, 1);
  EXPECT_EQ(EmuGet(SandboxId("gone")).status, 404);
  EXPECT_EQ(EmuGet(SandboxId("kept")).status, 200);
  // The orphan is forgotten, so garbage collection leaves it alone too: after two more sweeps
  // past the grace period it is still there.
  const int64_t lists = Counter("databricks.list");
  ASSERT_TRUE(PollUntil([&] { return Counter("databricks.list") >= lists + 3; }, In(kConverge)));
  EXPECT_EQ(EmuGet(SandboxId("kept")).status, 200);
  EXPECT_EQ(Counter("databricks.delete"), 1);
  EXPECT_EQ(ListIds(), (std::set<std::string>{SandboxId("kept"), SandboxId("stay")}));
}

// 7. GC deletes only what sbx created and nobody wants: an orphaned inventory record's sandbox
//    goes after the grace period (with an event); a sandbox made outside sbx stays.
TEST_F(SbxdTest, GarbageCollectsOnlyOrphansFromInventory) {
  Process* sbxd = StartSbxd();
  ASSERT_NE(sbxd, nullptr);
  Apply(SandboxManifest("orphan", "Orphan"));
  ASSERT_TRUE(WaitRunningAndReady("orphan")) << last_.dump(2);
  HttpResult foreign =
      emu_->Post("/api/2.0/sandboxes?sandbox_id=not-ours", R"({"display_name":"made by hand"})");
  ASSERT_EQ(foreign.status, 200) << foreign.body;

  // Make an orphan the way it happens in real life: the object disappears without the
  // controller finalizing it (a user strips the finalizer, like `kubectl patch … finalizers:
  // null`, and deletes the object). With sbxd stopped so that it cannot put the finalizer back,
  // we remove the finalizer through the Store API, as any store client could, and delete the
  // object with sbxctl — which removes a finalizer-free object at once. The inventory still
  // records the sandbox as sbx's, owned by an object that is gone: an orphan.
  sbxd->Signal(SIGTERM);
  ASSERT_EQ(sbxd->Wait(In(kConverge)), 0) << sbxd->Stderr();
  {
    auto store = sbx::controller::SqliteStore::Open(db_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    auto object = (*store)->Get({sbx::api::Kind::kSandbox, "default", "orphan"});
    ASSERT_TRUE(object.ok()) << object.status();
    object->metadata.finalizers.clear();
    ASSERT_TRUE((*store)->UpdateControllerMetadata(*object).ok());
  }
  RunResult del = Sbxctl({"delete", "sandbox", "orphan"});
  ASSERT_EQ(del.exit_code, 0) << del.err;
  ASSERT_EQ(Sbxctl({"get", "sandbox", "orphan"}).exit_code, 1);
  ASSERT_EQ(EmuGet(SandboxId("orphan")).status, 200);

  ASSERT_NE(StartSbxd(), nullptr);
  ASSERT_TRUE(PollUntil([&] { return EmuGet(SandboxId("orphan")).status == 404; }, In(kConverge),
                        milliseconds(100)));
  EXPECT_TRUE(WaitForEvent("GarbageCollected")) << Events();
  // The foreign sandbox survives this and later sweeps.
  const int64_t lists = Counter("databricks.list");
  ASSERT_TRUE(PollUntil([&] { return Counter("databricks.list") >= lists + 2; }, In(kConverge)));
  EXPECT_EQ(EmuGet("not-ours").status, 200);
  EXPECT_EQ(ListIds(), std::set<std::string>{"not-ours"});
}

// 8. Two sbxd on one store: one leads, the other waits; kill -9 the leader and the standby
//    takes over within about a lease duration and converges new work.
TEST_F(SbxdTest, StandbyTakesOverWhenTheLeaderDies) {
  Process* a = StartSbxd("sbxd-a");
  ASSERT_NE(a, nullptr);
  const int port_a = MetricsPort(*a);
  ASSERT_TRUE(PollUntil([&] { return HealthStatus(port_a, "/readyz") == 200; }, In(kConverge)));
  Process* b = StartSbxd("sbxd-b");
  ASSERT_NE(b, nullptr);
  const int port_b = MetricsPort(*b);
  ASSERT_TRUE(PollUntil([&] { return HealthStatus(port_b, "/healthz") == 200; }, In(kConverge)));
  EXPECT_EQ(HealthStatus(port_b, "/readyz"), 503);
  EXPECT_EQ(HealthStatus(port_a, "/readyz"), 200);
  const std::string metrics_b =
      HttpTestClient("http://127.0.0.1:" + std::to_string(port_b)).Get("/metrics").body;
  EXPECT_THAT(metrics_b, HasSubstr("sbx_leader 0"));
  const std::string metrics_a =
      HttpTestClient("http://127.0.0.1:" + std::to_string(port_a)).Get("/metrics").body;
  EXPECT_THAT(metrics_a, HasSubstr("sbx_leader 1"));

  Apply(SandboxManifest("before", "Before"));
  ASSERT_TRUE(WaitRunningAndReady("before")) << last_.dump(2);

  a->Kill();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(PollUntil([&] { return HealthStatus(port_b, "/readyz") == 200; }, In(kConverge),
                        milliseconds(50)));
  const auto takeover = std::chrono::steady_clock::now() - killed_at;
  std::cerr << "takeover after " << std::chrono::duration_cast<milliseconds>(takeover).count()
            << " ms\n";
  EXPECT_LE(takeover, milliseconds(3000 + 3000));  // lease + margin for a loaded machine

  Apply(SandboxManifest("after", "After"));
  ASSERT_TRUE(WaitRunningAndReady("after")) << last_.dump(2);
  EXPECT_EQ(ListIds(), (std::set<std::string>{SandboxId("before"), SandboxId("after")}));
}

// 9. kill -9 while creates are in flight, restart: every sandbox converges, none is created
//    twice, none leaks.
TEST_F(SbxdTest, CrashDuringCreatesNeitherDuplicatesNorLeaks) {
  // Slow creates down so that several are in flight when the kill comes.
  HttpResult slow =
      emu_->Post("/_emulator/latency", R"({"endpoint":"databricks.create","latency":"300ms"})");
  ASSERT_EQ(slow.status, 200) << slow.body;
  Process* sbxd = StartSbxd();
  ASSERT_NE(sbxd, nullptr);
  constexpr int kSandboxes = 20;
  std::string all;
  std::set<std::string> expected;
  for (int i = 0; i < kSandboxes; ++i) {
    const std::string name = "crash-" + std::to_string(i);
    all += (i == 0 ? "" : "---\n") + SandboxManifest(name, "Crash " + std::to_string(i)).Yaml();
    expected.insert(SandboxId(name));
  }
  WriteFile(dir_ / "manifests" / "crash.yaml", all);
  RunResult apply = Sbxctl({"apply", "-f", (dir_ / "manifests" / "crash.yaml").string()});
  ASSERT_EQ(apply.exit_code, 0) << apply.err;

  ASSERT_TRUE(PollUntil([&] { return Counter("databricks.create") >= 5; }, In(kConverge),
                        milliseconds(10)));
  sbxd->Kill();
  const int64_t creates_at_kill = Counter("databricks.create");
  EXPECT_LT(creates_at_kill, kSandboxes) << "the kill came too late to test anything";
  // The crash left intents behind: creates that were sent but whose answer sbxd never saw (the
  // 5th create was still inside the emulator's 300 ms latency when the counter showed it).
  int intents = 0;
  {
    auto store = sbx::controller::SqliteStore::Open(db_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    auto records = (*store)->ListInventory(std::nullopt);
    ASSERT_TRUE(records.ok()) << records.status();
    for (const auto& record : *records) {
      intents += record.state == sbx::controller::Store::InventoryState::kIntent ? 1 : 0;
    }
  }
  std::cerr << "killed sbxd after " << creates_at_kill << " create calls, with " << intents
            << " intents unsettled\n";
  EXPECT_GE(intents, 1);

  ASSERT_NE(StartSbxd(), nullptr);
  for (const std::string& id : expected) {
    const std::string name = id.substr(std::string("default-").size());
    ASSERT_TRUE(WaitRunningAndReady(name, milliseconds(60'000))) << last_.dump(2);
  }
  EXPECT_EQ(ListIds(), expected);
  {
    auto store = sbx::controller::SqliteStore::Open(db_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    auto records = (*store)->ListInventory(std::nullopt);
    ASSERT_TRUE(records.ok()) << records.status();
    std::set<std::string> live;
    for (const auto& record : *records) {
      EXPECT_EQ(record.state, sbx::controller::Store::InventoryState::kLive) << record.external_id;
      live.insert(record.external_id);
    }
    EXPECT_EQ(live, expected);
  }
  // Every create call either created one of the 20 ids or was answered 409 (the id existed —
  // a create the crash interrupted after it reached the API) and then adopted, which the
  // Ready above proves. So the calls are 20 + the 409s; more than a handful would mean blind
  // retries.
  const int64_t creates = Counter("databricks.create");
  std::cerr << "create calls: " << creates << " (" << creates - kSandboxes << " answered 409)\n";
  EXPECT_GE(creates, kSandboxes);
  EXPECT_LE(creates - kSandboxes, 4);
  EXPECT_EQ(Counter("databricks.delete"), 0);
}

// 10. SIGTERM drains and exits 0; --once exits 0 on a healthy setup, non-zero when the cloud
//     is down.
TEST_F(SbxdTest, ExitsCleanlyOnSigtermAndOnceReportsFailures) {
  // --once against an emulator that is down (started, then stopped: nothing listens on its
  // port). The client retries a refused connection with backoff, for the LIST and again for the
  // GET, which takes 10-30 s; so this pass runs in the background, on a store of its own holding
  // one Sandbox, while the rest of the test runs.
  auto dead = Process::Start(
      SBX_EMULATOR_PATH, Options("dead-emulator", {"--databricks-port", "0", "--root",
                                                   (dir_ / "dead").string(), "--token", token_}));
  ASSERT_TRUE(dead.ok()) << dead.status();
  auto dead_url = (*dead)->WaitForLine(std::regex(R"(^databricks: (http://\S+))"), In(kConverge));
  ASSERT_TRUE(dead_url.has_value()) << (*dead)->Stderr();
  (*dead)->Signal(SIGTERM);
  ASSERT_EQ((*dead)->Wait(In(kConverge)), 0);
  const fs::path down_db = dir_ / "down" / "sbx.db";
  WriteFile(dir_ / "manifests" / "down.yaml", SandboxManifest("down", "Down").Yaml());
  RunResult applied = RunProcess(
      SBXCTL_PATH,
      {"--db", down_db.string(), "apply", "-f", (dir_ / "manifests" / "down.yaml").string()},
      dir_ / "logs", harness_.Env());
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  ProcessOptions down_options = Options("sbxd-once-down", {"--db", down_db.string(), "--once"});
  down_options.env["DATABRICKS_HOST"] = (*dead_url)[1];
  auto down = Process::Start(SBXD_PATH, down_options);
  ASSERT_TRUE(down.ok()) << down.status();

  Process* sbxd = StartSbxd();
  ASSERT_NE(sbxd, nullptr);
  Apply(SandboxManifest("zeta", "Zeta"));
  ASSERT_TRUE(WaitRunningAndReady("zeta")) << last_.dump(2);
  sbxd->Signal(SIGTERM);
  const auto sent = std::chrono::steady_clock::now();
  std::optional<int> code = sbxd->Wait(In(milliseconds(10'000)));
  ASSERT_TRUE(code.has_value()) << "sbxd did not exit on SIGTERM";
  EXPECT_EQ(*code, 0) << sbxd->Stderr();
  EXPECT_LE(std::chrono::steady_clock::now() - sent, milliseconds(5000));
  EXPECT_THAT(sbxd->Stderr(), HasSubstr("stopped"));

  RunResult r =
      RunProcess(SBXD_PATH, {"--db", db_.string(), "--once"}, dir_ / "logs", harness_.Env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(EmuGet(SandboxId("zeta")).status, 200);

  std::optional<int> down_code = (*down)->Wait(In(milliseconds(90'000)));
  ASSERT_TRUE(down_code.has_value()) << "sbxd --once hung with the emulator down";
  EXPECT_NE(*down_code, 0) << (*down)->Stderr();
  EXPECT_EQ((*down)->Stderr().find(token_), std::string::npos) << "the token leaked into the log";
}

// A Workspace whose token the API rejects, with 10 Sandboxes: each fails once with
// Synced=False/Unauthenticated, and then the fleet stays quiet — no reconcile loop through its
// own status writes (condition messages carry no request id, a status-only change does not
// re-enqueue the object), no retry storm (a 401 stops every call of that workspace for a growing
// cool-down, terminal errors back off to minutes). Measured before the fix: 145 calls in 10 s.
TEST_F(SbxdTest, ABadTokenCostsAHandfulOfCallsNotAHotLoop) {
  harness_.SetEnv("SBX_SECRET_DEFAULT_BAD_TOKEN", "dapi-not-the-right-one");
  const fs::path file = dir_ / "manifests" / "bad.yaml";
  std::string yaml =
      "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: bad\n"
      "spec:\n  databricks:\n    host: " +
      url_ + "\n    tokenFrom: {env: SBX_SECRET_DEFAULT_BAD_TOKEN}\n";
  for (int i = 0; i < 10; ++i) {
    yaml += "---\napiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: bad-" +
            std::to_string(i) + "\nspec:\n  workspaceRef: bad\n";
  }
  WriteFile(file, yaml);
  RunResult applied = Sbxctl({"apply", "-f", file.string()});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  ASSERT_NE(StartSbxd(), nullptr);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(WaitFor("bad-" + std::to_string(i), "Synced", "False", "Unauthenticated"))
        << last_.dump(2);
  }
  EXPECT_EQ(last_.dump().find("request_id"), std::string::npos) << last_.dump(2);
  const int64_t version = last_["metadata"].value("resourceVersion", int64_t{0});

  // 20 s of a running sbxd (its sweep runs every second): at most a few calls in all.
  ASSERT_EQ(emu_->Delete("/_emulator/counters").status, 200);
  const auto calls = [&] {
    int64_t n = 0;
    for (const auto& [endpoint, count] : Counters()) {
      n += endpoint.starts_with("databricks.") ? count : 0;
    }
    return n;
  };
  const bool storm =
      PollUntil([&] { return calls() > 3; }, In(milliseconds(20'000)), milliseconds(500));
  EXPECT_FALSE(storm) << "calls in 20 s: " << calls();
  // And no status write loop: the object was not written again.
  EXPECT_EQ(Get("bad-9")["metadata"].value("resourceVersion", int64_t{0}), version);
}

// #24 item 8, DESIGN §8.4: namespaces are a boundary for secret sources. With sbxd's defaults, a
// Workspace of namespace team-b that names namespace default's variable is refused
// (SecretNotAllowed) and nothing is sent with it; its own SBX_SECRET_TEAM_B_… works; and the
// operator can grant it the other one (--secret-grants).
TEST_F(SbxdTest, ANamespaceResolvesOnlyItsOwnSecretsOrWhatTheOperatorGrantsIt) {
  harness_.SetEnv("SBX_SECRET_DEFAULT_TOKEN", token_);
  harness_.SetEnv("SBX_SECRET_TEAM_B_TOKEN", token_);
  const fs::path file = dir_ / "manifests" / "team-b.yaml";
  std::string yaml;
  for (const auto& [name, var] : {std::pair<std::string, std::string>{"stolen", "DEFAULT_TOKEN"},
                                  std::pair<std::string, std::string>{"own", "TEAM_B_TOKEN"}}) {
    yaml += "---\napiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: " + name +
            "\n  namespace: team-b\nspec:\n  databricks:\n    host: " + url_ +
            "\n    tokenFrom: {env: SBX_SECRET_" + var + "}\n";
  }
  WriteFile(file, yaml);
  RunResult applied = Sbxctl({"apply", "-f", file.string()});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  const fs::path grants = dir_ / "grants";
  WriteFile(grants, "# shared on purpose\nteam-b env:SBX_SECRET_DEFAULT_TOKEN\n");
  using Cond = std::pair<std::string, std::string>;
  json workspace;
  const auto databricks_ready = [&](const std::string& name) {
    RunResult r = Sbxctl({"get", "workspace", name, "-n", "team-b", "-o", "json"});
    workspace = r.exit_code == 0 ? json::parse(r.out, nullptr, false) : json(nullptr);
    return workspace.is_object() ? ConditionOf(workspace, "DatabricksReady") : Cond();
  };
  for (const bool granted : {false, true}) {
    Process* sbxd =
        StartSbxd("sbxd-a", granted ? std::vector<std::string>{"--secret-grants", grants.string()}
                                    : std::vector<std::string>{});
    ASSERT_NE(sbxd, nullptr);
    const Cond stolen = granted ? Cond("True", "Authenticated") : Cond("False", "SecretNotAllowed");
    ASSERT_TRUE(PollUntil([&] { return databricks_ready("stolen") == stolen; }, In(kConverge),
                          milliseconds(200)))
        << "granted=" << granted << " " << workspace.dump(2);
    ASSERT_TRUE(PollUntil([&] { return databricks_ready("own") == Cond("True", "Authenticated"); },
                          In(kConverge), milliseconds(200)))
        << workspace.dump(2);
    EXPECT_EQ(workspace.dump().find(token_), std::string::npos);
    sbxd->Signal(SIGTERM);
    ASSERT_EQ(sbxd->Wait(In(kConverge)), 0) << sbxd->Stderr();
  }
}

// A Workspace has a status and a finalizer (issue #12 item 10): a rejected token is
// Ready=False/Unauthenticated, a good one Ready=True, and `sbxctl get workspaces` shows it.
// Deleting a Workspace that a Sandbox still uses waits for the Sandbox, whose finalizer then
// deletes the cloud sandbox with the Workspace's own credentials; after that the Workspace goes.
TEST_F(SbxdTest, WorkspaceReportsReadyAndOutlivesTheSandboxesThatUseIt) {
  harness_.SetEnv("SBX_SECRET_DEFAULT_GOOD_TOKEN", token_);
  harness_.SetEnv("SBX_SECRET_DEFAULT_BAD_TOKEN", "dapi-not-the-right-one");
  const fs::path file = dir_ / "manifests" / "workspaces.yaml";
  std::string yaml;
  for (const char* name : {"good", "bad"}) {
    yaml += std::string("---\napiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: ") +
            name + "\nspec:\n  databricks:\n    host: " + url_ +
            "\n    tokenFrom: {env: SBX_SECRET_DEFAULT_" +
            (name == std::string("good") ? "GOOD" : "BAD") + "_TOKEN}\n";
  }
  yaml +=
      "---\napiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: in-good\n"
      "spec:\n  workspaceRef: good\n";
  WriteFile(file, yaml);
  RunResult applied = Sbxctl({"apply", "-f", file.string()});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  ASSERT_NE(StartSbxd(), nullptr);

  json workspace;
  // True once Workspace `name`'s current generation has condition `type` = (status, reason).
  const auto workspace_has = [&](const std::string& name, const std::string& type,
                                 const std::string& status, const std::string& reason) {
    RunResult r = Sbxctl({"get", "workspace", name, "-o", "json"});
    workspace = r.exit_code == 0 ? json::parse(r.out, nullptr, false) : json(nullptr);
    if (!workspace.is_object() || !workspace.contains("status") ||
        workspace["status"].value("observedGeneration", int64_t{-1}) <
            workspace["metadata"].value("generation", 0)) {
      return false;
    }
    return ConditionOf(workspace, type) == std::pair<std::string, std::string>(status, reason);
  };
  ASSERT_TRUE(PollUntil([&] { return workspace_has("good", "Ready", "True", "Ready"); },
                        In(kConverge), milliseconds(200)))
      << workspace.dump(2);
  using Cond = std::pair<std::string, std::string>;
  EXPECT_EQ(ConditionOf(workspace, "DatabricksReady"), Cond("True", "Authenticated"));
  EXPECT_EQ(ConditionOf(workspace, "OpenAIReady"), Cond("", ""));  // unset: not checked
  ASSERT_TRUE(PollUntil([&] { return workspace_has("bad", "Ready", "False", "Unauthenticated"); },
                        In(kConverge), milliseconds(200)))
      << workspace.dump(2);
  EXPECT_EQ(workspace.dump().find("dapi-not-the-right-one"), std::string::npos);

  RunResult table = Sbxctl({"get", "workspaces"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(std::regex_search(table.out, std::regex(R"(NAME\s+READY\s+HOST)"))) << table.out;
  EXPECT_TRUE(std::regex_search(table.out, std::regex(R"((^|\n)bad\s+False\s)"))) << table.out;
  EXPECT_TRUE(std::regex_search(table.out, std::regex(R"((^|\n)good\s+True\s)"))) << table.out;

  ASSERT_TRUE(WaitRunningAndReady("in-good")) << last_.dump(2);

  // The Workspace first: it waits for the Sandbox that uses it.
  RunResult deleted = Sbxctl({"delete", "workspace", "good"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  ASSERT_TRUE(PollUntil([&] { return workspace_has("good", "Deleting", "True", "InUse"); },
                        In(kConverge), milliseconds(200)))
      << workspace.dump(2);
  EXPECT_THAT(workspace.dump(), HasSubstr("Sandbox in-good"));
  EXPECT_EQ(EmuGet(SandboxId("in-good")).status, 200);

  // Then the Sandbox: its finalizer still has the credentials, and the Workspace goes after it.
  deleted = Sbxctl({"delete", "sandbox", "in-good"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  ASSERT_TRUE(PollUntil(
      [&] {
        return Sbxctl({"get", "workspace", "good"}).exit_code != 0;
      },
      In(kConverge), milliseconds(200)))
      << "Workspace good was not removed once no Sandbox used it";
  EXPECT_TRUE(Get("in-good").is_null());
  EXPECT_TRUE(PollUntil([&] { return EmuGet(SandboxId("in-good")).status == 404; }, In(kConverge),
                        milliseconds(200)))
      << "the Sandbox's finalizer did not delete the cloud sandbox";
}

// `sbxd --once` next to a running sbxd takes the same leader lease or does nothing: exit 3,
// naming the lease and its holder. Once the daemon has stopped (SIGTERM releases the lease) the
// pass runs, and it gives the lease back when done.
TEST_F(SbxdTest, OnceRefusesToRunNextToALeaderAndRunsOnceItHasStopped) {
  Process* sbxd = StartSbxd("sbxd-leader");
  ASSERT_NE(sbxd, nullptr);
  const int port = MetricsPort(*sbxd);
  ASSERT_TRUE(PollUntil([&] { return HealthStatus(port, "/readyz") == 200; }, In(kConverge)));
  Apply(SandboxManifest("solo", "Solo"));
  ASSERT_TRUE(WaitRunningAndReady("solo")) << last_.dump(2);

  const std::vector<std::string> once = {"--db", db_.string(), "--once", "--identity", "sbxd-once"};
  RunResult refused = RunProcess(SBXD_PATH, once, dir_ / "logs", harness_.Env());
  EXPECT_EQ(refused.exit_code, 3) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("lease \"sbxd\""));
  EXPECT_THAT(refused.err, HasSubstr("held by \"sbxd-leader\""));
  EXPECT_THAT(refused.err, ::testing::Not(HasSubstr("reconciled")));
  EXPECT_TRUE(sbxd->Running()) << "the daemon must be left alone";

  sbxd->Signal(SIGTERM);
  std::optional<int> code = sbxd->Wait(In(milliseconds(10'000)));
  ASSERT_TRUE(code.has_value()) << "sbxd did not exit on SIGTERM";
  ASSERT_EQ(*code, 0) << sbxd->Stderr();

  RunResult ran = RunProcess(SBXD_PATH, once, dir_ / "logs", harness_.Env());
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_THAT(ran.err, HasSubstr("took the leader lease"));
  EXPECT_THAT(ran.err, HasSubstr("reconciled"));
  auto store = sbx::controller::SqliteStore::Open(db_.string());
  ASSERT_TRUE(store.ok()) << store.status();
  auto lease = (*store)->GetLease("sbxd");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->has_value()) << "--once kept the lease: " << (*lease)->holder;
}

// The leader compacts the store's change log (here every second) and nobody who keeps up
// notices: sbxd's own watch never has to re-list, new work still converges, and a running
// `sbxctl get -w` goes on printing changes across compactions.
TEST_F(SbxdTest, CompactsTheChangeLogWhileWatchersKeepUp) {
  Process* sbxd = StartSbxd("sbxd-a", {"--compaction-interval", "1s"});
  ASSERT_NE(sbxd, nullptr);
  auto watch = Process::Start(SBXCTL_PATH,
                              Options("get-w", {"--db", db_.string(), "get", "sandboxes", "-w"}));
  ASSERT_TRUE(watch.ok()) << watch.status();
  Apply(SandboxManifest("first", "First"));
  ASSERT_TRUE(WaitRunningAndReady("first")) << last_.dump(2);

  auto stats = [&] {
    auto store = sbx::controller::SqliteStore::Open(db_.string());
    EXPECT_TRUE(store.ok()) << store.status();
    auto s = store.ok() ? (*store)->ReadStats() : store.status();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : sbx::controller::SqliteStore::Stats{};
  };
  const int64_t ready_at = stats().revision;
  ASSERT_TRUE(PollUntil([&] { return stats().compacted_revision >= ready_at; }, In(kConverge),
                        milliseconds(200)))
      << "the change log was not compacted";

  Apply(SandboxManifest("second", "Second"));
  ASSERT_TRUE(WaitRunningAndReady("second")) << last_.dump(2);
  EXPECT_TRUE((*watch)->WaitForLine(std::regex(R"(^second\s)"), In(kConverge)).has_value())
      << (*watch)->Stdout() << (*watch)->Stderr();
  EXPECT_TRUE((*watch)->Running()) << (*watch)->Stderr();
  EXPECT_THAT(sbxd->Stderr(), ::testing::Not(HasSubstr("re-listing")));
}

// Issue #12 item 12: while the Databricks API fails every LIST, the Sandbox keeps Ready=True and
// its state as last observed (an error while observing is not evidence), but Synced=False,
// reason=Unavailable says the observation is stale; sbx_sweep_errors_total{workspace} counts the
// failed sweeps for an alert. More failed sweeps do not write the object again (a stable
// message), and the first LIST that succeeds brings Synced back to True.
TEST_F(SbxdTest, AListOutageMarksSandboxesStaleAndCountsSweepErrors) {
  Process* sbxd = StartSbxd();
  ASSERT_NE(sbxd, nullptr);
  const int port = MetricsPort(*sbxd);
  Apply(SandboxManifest("steady", "Steady"));
  ASSERT_TRUE(WaitRunningAndReady("steady")) << last_.dump(2);
  ASSERT_TRUE(WaitFor("steady", "Synced", "True")) << last_.dump(2);

  // sbx_sweep_errors_total of the default workspace; 0 before its first failure.
  const auto sweep_errors = [&] {
    const std::string text =
        HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get("/metrics").body;
    std::smatch m;
    static const std::regex line(R"(sbx_sweep_errors_total\{workspace="default/default"\} (\d+))");
    return std::regex_search(text, m, line) ? std::stoll(m[1]) : int64_t{0};
  };
  EXPECT_EQ(sweep_errors(), 0);

  HttpResult fault =
      emu_->Post("/_emulator/faults", R"({"endpoint":"databricks.list","status":500,"rate":1})");
  ASSERT_EQ(fault.status, 200) << fault.body;
  ASSERT_TRUE(WaitFor("steady", "Synced", "False", "Unavailable", "", milliseconds(60'000)))
      << last_.dump(2);
  EXPECT_EQ(ConditionOf(last_, "Ready").first, "True") << last_.dump(2);
  EXPECT_EQ(last_["status"].value("state", ""), "RUNNING");
  std::string message;
  for (const json& c : last_["status"]["conditions"]) {
    if (c.value("type", "") == "Synced") {
      message = c.value("message", "");
    }
  }
  EXPECT_THAT(message, HasSubstr("the LIST sweeps of workspace default/default have failed since"));
  const int64_t version = last_["metadata"].value("resourceVersion", int64_t{0});
  const int64_t errors = sweep_errors();
  EXPECT_GE(errors, 1);
  ASSERT_TRUE(
      PollUntil([&] { return sweep_errors() >= errors + 2; }, In(kConverge), milliseconds(200)))
      << "sweeps are not retried, or not counted: " << sweep_errors();
  EXPECT_EQ(Get("steady")["metadata"].value("resourceVersion", int64_t{0}), version)
      << "a failed sweep wrote the object again";

  ASSERT_EQ(emu_->Delete("/_emulator/faults").status, 200);
  ASSERT_TRUE(WaitFor("steady", "Synced", "True")) << last_.dump(2);
  EXPECT_EQ(ConditionOf(last_, "Ready").first, "True") << last_.dump(2);
}

}  // namespace
