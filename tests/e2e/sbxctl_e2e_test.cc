// End-to-end tests of the BUILT sbxctl binary, driven like a user: each test gets a temp
// directory with its own database and manifests, runs `sbxctl …` as a real process and checks
// stdout, stderr, the exit code and the resulting store (read back with `get -o json`, and for
// controller-side writes through a second SqliteStore on the same file, as sbxd would).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/sqlite_store.h"
#include "tests/e2e/sbxctl_fixture.h"

namespace {

namespace fs = std::filesystem;
using sbx_e2e::CountLines;
using sbx_e2e::ReadAll;
using sbx_e2e::Result;
using sbx_e2e::SandboxManifest;
using sbx_e2e::SbxctlTest;
using sbx_e2e::WorkerManifest;
using sbx_e2e::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;

std::map<std::string, int64_t> ResourceVersions(const std::string& list_json) {
  std::map<std::string, int64_t> out;
  const auto j = nlohmann::json::parse(list_json);
  for (const auto& item : j.at("items")) {
    out[item.at("kind").get<std::string>() + "/" +
        item.at("metadata").at("name").get<std::string>()] =
        item.at("metadata").at("resourceVersion").get<int64_t>();
  }
  return out;
}

TEST_F(SbxctlTest, ApplyGetDiffPruneDeleteLifecycle) {
  const fs::path m = dir_ / "manifests";
  WriteFile(m / "a.yaml", SandboxManifest("sb-a", "Sandbox A"));
  WriteFile(m / "b.yml",
            SandboxManifest("sb-b", "Sandbox B") + "---\n" + WorkerManifest("w1", "sb-a"));
  WriteFile(m / "notes.txt", "not a manifest");

  Result r = Run({"apply", "-f", m.string(), "--applyset", "demo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sandbox/sb-a created\n"));
  EXPECT_THAT(r.out, HasSubstr("sandbox/sb-b created\n"));
  EXPECT_THAT(r.out, HasSubstr("agentworker/w1 created\n"));
  EXPECT_EQ(r.err, "");

  // Table.
  r = Run({"get", "sb"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAME   READY     STATE    SANDBOX-ID     AGE\n"));
  EXPECT_THAT(r.out, HasSubstr("sb-a   Unknown   <none>   default-sb-a   "));
  r = Run({"get", "sb", "-A", "-o", "wide"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAMESPACE"));
  EXPECT_THAT(r.out, HasSubstr("POWER"));
  r = Run({"get", "aw"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("w1     Unknown   sb-a"));

  // Output formats.
  r = Run({"get", "sandbox", "sb-a", "-o", "yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("kind: Sandbox"));
  EXPECT_THAT(r.out, HasSubstr("name: sb-a"));
  EXPECT_THAT(r.out, HasSubstr("displayName: Sandbox A"));
  r = Run({"get", "sb/sb-a", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("metadata").at("name"), "sb-a");
  r = Run({"get", "sandboxes", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("kind"), "List");
  EXPECT_EQ(nlohmann::json::parse(r.out).at("items").size(), 2u);
  r = Run({"get", "sb", "-o", "name"});
  EXPECT_EQ(r.out, "sandbox/sb-a\nsandbox/sb-b\n");
  r = Run({"get", "sb", "-l", "app=demo", "-o", "name"});
  EXPECT_EQ(r.out, "sandbox/sb-a\nsandbox/sb-b\n");
  r = Run({"get", "sb", "-l", "app=other"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "No resources found in default namespace.\n");

  // Re-apply: nothing changes, not even a revision.
  const std::string before = Snapshot();
  r = Run({"apply", "-f", m.string(), "--applyset", "demo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/sb-a unchanged\nsandbox/sb-b unchanged\nagentworker/w1 unchanged\n");
  EXPECT_EQ(ResourceVersions(Snapshot()), ResourceVersions(before));

  // Diff, then apply the change.
  r = Run({"diff", "-f", m.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  WriteFile(m / "a.yaml", SandboxManifest("sb-a", "Sandbox A2"));
  r = Run({"diff", "-f", m.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out,
              HasSubstr("--- live/sandbox/default/sb-a\n+++ manifest/sandbox/default/sb-a\n"));
  EXPECT_THAT(r.out, HasSubstr("\n-  displayName: Sandbox A\n+  displayName: Sandbox A2\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("sb-b")));
  r = Run({"apply", "-f", m.string(), "--applyset", "demo", "--dry-run"});
  EXPECT_THAT(r.out, HasSubstr("sandbox/sb-a configured (dry run)\n"));
  r = Run({"diff", "-f", m.string()});
  EXPECT_EQ(r.exit_code, 1) << "a dry run must not change anything";
  r = Run({"apply", "-f", m.string(), "--applyset", "demo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/sb-a configured\nsandbox/sb-b unchanged\nagentworker/w1 unchanged\n");
  r = Run({"diff", "-f", m.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out;

  // Prune: drop sb-b from the set.
  WriteFile(m / "b.yml", WorkerManifest("w1", "sb-a"));
  r = Run({"diff", "-f", m.string(), "--prune", "--applyset", "demo"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("--- live/sandbox/default/sb-b\n+++ /dev/null\n"));
  r = Run({"apply", "-f", m.string(), "--prune"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--prune requires --applyset"));
  r = Run({"apply", "-f", m.string(), "--prune", "--applyset", "demo"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sandbox/sb-b pruned\n"));
  r = Run({"get", "sb", "-o", "name"});
  EXPECT_EQ(r.out, "sandbox/sb-a\n");

  // Describe and events.
  r = Run({"describe", "sb", "sb-a"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Name:"));
  EXPECT_THAT(r.out, HasSubstr("app=demo"));
  EXPECT_THAT(r.out, HasSubstr("displayName: Sandbox A2"));
  EXPECT_THAT(r.out, HasSubstr("Events:"));

  // Delete.
  r = Run({"delete", "sb", "sb-a"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox \"sb-a\" deleted\n");
  r = Run({"get", "sb", "sb-a"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "Error from server (NotFound): sandboxes \"sb-a\" not found\n");
  r = Run({"delete", "sb", "sb-a"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "Error from server (NotFound): sandboxes \"sb-a\" not found\n");
  r = Run({"delete", "sb", "sb-a", "--ignore-not-found"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Run({"delete", "-f", (m / "b.yml").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "agentworker \"w1\" deleted\n");
  r = Run({"get", "sb,aw"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "No resources found in default namespace.\n");
}

TEST_F(SbxctlTest, ApplyReadsStdinAndNamespaces) {
  Result r = Run({"apply", "-f", "-", "-n", "team"}, SandboxManifest("s", "S"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/s created\n");
  r = Run({"get", "sb", "-o", "name"});
  EXPECT_EQ(r.err, "No resources found in default namespace.\n");
  r = Run({"get", "sb", "-n", "team", "-o", "name"});
  EXPECT_EQ(r.out, "sandbox/s\n");
  r = Run({"get", "sb", "-A"});
  EXPECT_THAT(r.out, HasSubstr("NAMESPACE   NAME"));
  EXPECT_THAT(r.out, HasSubstr("team        s "));
}

// Each bad input: one clear line on stderr, a non-zero exit and an unchanged store.
TEST_F(SbxctlTest, BadInputIsReportedAndChangesNothing) {
  const fs::path m = dir_ / "bad";
  WriteFile(dir_ / "good.yaml", SandboxManifest("keep", "Keep"));
  ASSERT_EQ(Run({"apply", "-f", (dir_ / "good.yaml").string()}).exit_code, 0);
  const std::string before = Snapshot();

  struct Case {
    std::string name;
    std::string content;
    std::string expect;  // substring of the error line
  };
  const std::vector<Case> cases = {
      {"malformed.yaml", "kind: Sandbox\nmetadata: [unclosed\n", "malformed.yaml:"},
      {"unknown-field.yaml",
       "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: x\nspec:\n  displayNme: "
       "y\n",
       "displayName"},
      {"unknown-kind.yaml", "apiVersion: sbx.dev/v1alpha1\nkind: Pod\nmetadata:\n  name: x\n",
       "Pod"},
      {"invalid-name.yaml", SandboxManifest("Bad_Name", "x"), "metadata.name"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path file = m / c.name;
    // A valid object in the same apply must not be applied either.
    WriteFile(file, SandboxManifest("new-one", "New") + "---\n" + c.content);
    const Result r = Run({"apply", "-f", file.string()});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("error: "));
    EXPECT_THAT(r.err, HasSubstr(c.name + ":"));
    EXPECT_THAT(r.err, HasSubstr(c.expect));
    EXPECT_EQ(Snapshot(), before);
  }

  // The same object twice, across files: one error naming both places.
  WriteFile(m / "dup" / "1.yaml", SandboxManifest("twin", "One"));
  WriteFile(m / "dup" / "2.yaml", SandboxManifest("twin", "Two"));
  Result r = Run({"apply", "-f", (m / "dup").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("1.yaml:"));
  EXPECT_THAT(r.err, HasSubstr("2.yaml:"));
  EXPECT_THAT(r.err, HasSubstr("twin"));
  EXPECT_EQ(Snapshot(), before);

  // Several broken files: every error is reported, one line each.
  r = Run({"apply", "-f", (m / "unknown-kind.yaml").string(), "-f",
           (m / "invalid-name.yaml").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(CountLines(r.err), 2) << r.err;

  r = Run({"apply", "-f", (dir_ / "missing.yaml").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("does not exist"));

  r = Run({"get", "pods"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("unknown kind \"pods\""));

  r = Run({"frobnicate"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: unknown command \"frobnicate\" for \"sbxctl\" (see sbxctl --help)\n");

  r = Run({"get", "sb", "-o", "xml"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;

  r = Run({"diff", "-f", (m / "malformed.yaml").string()});
  EXPECT_GT(r.exit_code, 1) << "diff errors exit > 1";
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(SbxctlTest, NonDatabaseFileIsOneLineNamingThePath) {
  const std::string garbage(8192, 'x');
  fs::create_directories(db_.parent_path());
  WriteFile(db_, garbage);
  WriteFile(dir_ / "good.yaml", SandboxManifest("x", "X"));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"apply", "-f", (dir_ / "good.yaml").string()},
        std::vector<std::string>{"get", "sb"}}) {
    const Result r = Run(args);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("error: "));
    EXPECT_THAT(r.err, HasSubstr(db_.string()));
  }
  EXPECT_EQ(ReadAll(db_), garbage);
}

TEST_F(SbxctlTest, WaitSeesControllerWritesAndFailsFastOnTerminalErrors) {
  WriteFile(dir_ / "s.yaml", SandboxManifest("s", "S"));
  ASSERT_EQ(Run({"apply", "-f", (dir_ / "s.yaml").string()}).exit_code, 0);

  Result r = Run({"wait", "sb/s", "--for=condition=Ready", "--timeout", "1s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: timed out waiting for the condition on sandboxes/s\n");

  // A waiter started first sees the controller's write from another process.
  const int n = ++runs_;
  const pid_t waiter =
      Start({"wait", "sb", "s", "--for=condition=Ready", "--timeout", "60s"}, "", n);
  const int m = ++runs_;
  const pid_t watcher = Start({"get", "sb", "-w", "--timeout", "60s"}, "", m);
  // Once the watcher has printed its table (Ready Unknown), the change must arrive as a row.
  sbx::testing::PollUntil(
      [&] {
        return ReadAll(dir_ / ("stdout" + std::to_string(m))).find("Unknown") != std::string::npos;
      },
      sbx::testing::In(std::chrono::seconds(30)), std::chrono::milliseconds(10));
  SetCondition("s", "Ready", sbx::api::ConditionStatus::kTrue, "Running");
  r = Finish(waiter, n);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/s condition met\n");
  kill(watcher, SIGTERM);
  r = Finish(watcher, m);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAME   READY"));
  EXPECT_THAT(r.out, HasSubstr("s      Unknown   <none>"));
  EXPECT_THAT(r.out, HasSubstr("s      True      RUNNING"));

  r = Run({"wait", "sb", "s", "--for=condition=Ready=True", "--timeout", "5s"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  SetCondition("s", "Synced", sbx::api::ConditionStatus::kFalse, "ImmutableFieldChanged");
  SetCondition("s", "Ready", sbx::api::ConditionStatus::kFalse, "ImmutableFieldChanged");
  const auto start = std::chrono::steady_clock::now();
  r = Run({"wait", "sb", "s", "--for=condition=Ready", "--timeout", "60s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("ImmutableFieldChanged"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));

  r = Run({"describe", "sb", "s"});
  EXPECT_THAT(r.out, HasSubstr("ImmutableFieldChanged"));
  EXPECT_THAT(r.out, HasSubstr("RUNNING"));
}

TEST_F(SbxctlTest, ApplyWaitAndDeleteWaitFollowTheController) {
  WriteFile(dir_ / "s.yaml", SandboxManifest("s", "S"));
  Result r = Run({"apply", "-f", (dir_ / "s.yaml").string(), "--wait", "--timeout", "1s"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "sandbox/s created\n");
  EXPECT_EQ(r.err, "error: timed out waiting for the condition on sandboxes/s\n");

  // A finalizer (as the controller sets) keeps the object until it is removed.
  {
    auto store = OpenStore();
    auto object = store->Get({sbx::api::Kind::kSandbox, "default", "s"});
    ASSERT_TRUE(object.ok()) << object.status();
    object->metadata.finalizers = {std::string(sbx::api::kControllerFinalizer)};
    ASSERT_TRUE(store->UpdateControllerMetadata(*object).ok());
  }
  r = Run({"delete", "sb", "s"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox \"s\" marked for deletion\n");
  const int n = ++runs_;
  const pid_t waiter = Start({"delete", "sb/s", "--wait", "--timeout", "60s"}, "", n);
  // Let the waiter issue its delete first (it prints before it blocks).
  sbx::testing::PollUntil(
      [&] {
        return ReadAll(dir_ / ("stdout" + std::to_string(n))).find("marked for deletion") !=
               std::string::npos;
      },
      sbx::testing::In(std::chrono::seconds(30)), std::chrono::milliseconds(10));
  {
    auto store = OpenStore();
    auto object = store->Get({sbx::api::Kind::kSandbox, "default", "s"});
    ASSERT_TRUE(object.ok()) << object.status();
    EXPECT_NE(object->metadata.deletion_timestamp, "");
    object->metadata.finalizers.clear();
    ASSERT_TRUE(store->UpdateControllerMetadata(*object).ok());
  }
  r = Finish(waiter, n);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("sandbox \"s\" deleted\n"));
  r = Run({"get", "sb", "s"});
  EXPECT_EQ(r.exit_code, 1);
}

TEST_F(SbxctlTest, EventsAreListed) {
  WriteFile(dir_ / "s.yaml", SandboxManifest("s", "S"));
  ASSERT_EQ(Run({"apply", "-f", (dir_ / "s.yaml").string()}).exit_code, 0);
  Result r = Run({"events"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "No events found in default namespace.\n");
  {
    auto store = OpenStore();
    sbx::controller::Store::Event e;
    e.involved = {sbx::api::Kind::kSandbox, "default", "s"};
    e.type = "Warning";
    e.reason = "ExternalDeletion";
    e.message = "sandbox was deleted behind our back";
    ASSERT_TRUE(store->RecordEvent(e).ok());
    ASSERT_TRUE(store->RecordEvent(e).ok());
  }
  r = Run({"events"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("LAST SEEN"));
  EXPECT_THAT(r.out, HasSubstr("Warning   ExternalDeletion   sandbox/s   2       sandbox was"));
  r = Run({"describe", "sb/s"});
  EXPECT_THAT(r.out, HasSubstr("ExternalDeletion"));
  EXPECT_THAT(r.out, HasSubstr("(x2 over"));
}

TEST_F(SbxctlTest, VersionNamesTheBuild) {
  const Result r = Run({"version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("sbxctl v0.1.0\n"));
  EXPECT_THAT(r.out, HasSubstr("store schema: "));
}

TEST_F(SbxctlTest, ExampleManifestsApply) {
  const fs::path examples = fs::path(SBX_SOURCE_DIR) / "manifests" / "examples";
  bool any = false;
  for (const auto& e : fs::directory_iterator(examples)) {
    any = any || e.path().extension() == ".yaml";
  }
  if (!any) {
    GTEST_SKIP() << "no example manifests yet";
  }
  Result r = Run({"apply", "-R", "-f", examples.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"diff", "-R", "-f", examples.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// ---- Security review, issue #10 (findings 6-8) ------------------------------------------------
// Kept together at the end of the file: file modes of the store, control characters from
// sandboxes and clouds on the operator's terminal, `apply --prune` with no objects.

fs::perms PermsOf(const fs::path& p) { return fs::status(p).permissions() & fs::perms::mask; }

// Finding 6: the database sbxctl creates, and the directory it creates for it, are 0600 and 0700.
TEST_F(SbxctlTest, CreatesTheDatabaseAndItsDirectoryForTheUserOnly) {
  WriteFile(dir_ / "s.yaml", SandboxManifest("s", "S"));
  ASSERT_FALSE(fs::exists(db_.parent_path()));
  // Under the usual umask, which gave 0755 and 0644 before.
  const mode_t old_umask = ::umask(022);
  const Result r = Run({"apply", "-f", (dir_ / "s.yaml").string()});
  ::umask(old_umask);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(PermsOf(db_.parent_path()), fs::perms::owner_all);
  EXPECT_EQ(PermsOf(db_), fs::perms::owner_read | fs::perms::owner_write);
}

// Finding 7: an OSC title change ended by BEL, then a clear screen, as a hostile setup script or
// cloud message would hold them. No verb may put the raw ESC or BEL bytes on stdout.
constexpr char kHostileText[] = "boom\x1b]0;pwned\x07\x1b[2J";

void ExpectNoTerminalControls(const std::string& out, const std::string& what) {
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << what << " printed a raw ESC:\n" << out;
  EXPECT_EQ(out.find('\x07'), std::string::npos) << what << " printed a raw BEL:\n" << out;
}

TEST_F(SbxctlTest, ControlCharactersFromTheControllerDoNotReachTheTerminal) {
  WriteFile(dir_ / "s.yaml", SandboxManifest("s", "S"));
  ASSERT_EQ(Run({"apply", "-f", (dir_ / "s.yaml").string()}).exit_code, 0);
  {
    auto store = OpenStore();
    auto object = store->Get({sbx::api::Kind::kSandbox, "default", "s"});
    ASSERT_TRUE(object.ok()) << object.status();
    sbx::api::Condition ready;
    ready.type = "Ready";
    ready.status = sbx::api::ConditionStatus::kFalse;
    ready.reason = "SetupFailed";
    ready.message = std::string("setup step 1 failed: ") + kHostileText;
    sbx::api::SetCondition(object->conditions(), ready, "2026-01-01T00:00:00Z");
    sbx::api::SetupResult setup;
    setup.name = "install";
    setup.exit_code = 2;
    setup.message = std::string("last output: ") + kHostileText + "\nsecond line";
    object->sandbox_status().setup.push_back(setup);
    ASSERT_TRUE(store->UpdateStatus(*object).ok());
    sbx::controller::Store::Event e;
    e.involved = {sbx::api::Kind::kSandbox, "default", "s"};
    e.type = "Warning";
    e.reason = "SetupFailed";
    e.message = std::string("step install: ") + kHostileText;
    ASSERT_TRUE(store->RecordEvent(e).ok());
  }

  Result r = Run({"get", "sb", "-o", "wide"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectNoTerminalControls(r.out, "get -o wide");
  EXPECT_THAT(r.out, HasSubstr("setup step 1 failed: boom\\x1b]0;pwned\\x07\\x1b[2J"));

  r = Run({"describe", "sb", "s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectNoTerminalControls(r.out, "describe");
  EXPECT_THAT(r.out, HasSubstr("last output: boom\\x1b]0;pwned\\x07\\x1b[2J\\nsecond line"));
  EXPECT_THAT(r.out, HasSubstr("step install: boom\\x1b]0;pwned\\x07\\x1b[2J"));

  r = Run({"events"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectNoTerminalControls(r.out, "events");
  EXPECT_THAT(r.out, HasSubstr("step install: boom\\x1b]0;pwned\\x07\\x1b[2J"));

  // The encoders escape in their own syntax, and the text reads back unchanged.
  r = Run({"get", "sb", "s", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectNoTerminalControls(r.out, "get -o json");
  EXPECT_THAT(r.out, HasSubstr("\\u001b]0;pwned\\u0007\\u001b[2J"));
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json.at("status").at("setup").at(0).at("message").get<std::string>(),
            std::string("last output: ") + kHostileText + "\nsecond line");
  r = Run({"get", "sb", "s", "-o", "yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectNoTerminalControls(r.out, "get -o yaml");
  EXPECT_THAT(r.out, HasSubstr("\"setup step 1 failed: boom\\x1b]0;pwned\\x07\\x1b[2J\""));
}

// Finding 8: `apply --prune` with a directory that holds no manifests would prune the whole set
// (and deletionPolicy: Delete would then delete the sandboxes).
TEST_F(SbxctlTest, PruneWithNoObjectsIsRefusedUnlessAllowed) {
  const fs::path m = dir_ / "manifests";
  WriteFile(m / "a.yaml", SandboxManifest("sb-a", "A") + "---\n" + SandboxManifest("sb-b", "B"));
  Result r = Run({"apply", "-f", m.string(), "--prune", "--applyset", "a"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path empty = dir_ / "empty";
  WriteFile(empty / "README.txt", "the manifests moved elsewhere\n");
  const std::string before = Snapshot();
  const std::string refusal =
      "error: apply --prune: no objects passed to apply; refusing to prune every member of "
      "applyset \"a\" (use --prune-allow-empty to allow it)\n";

  r = Run({"apply", "-f", empty.string(), "--prune", "--applyset", "a"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, refusal);
  EXPECT_EQ(r.out, "");
  r = Run({"apply", "-f", empty.string(), "--prune", "--applyset", "a", "--dry-run"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, refusal);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Run({"get", "sb", "-o", "name"}).out, "sandbox/sb-a\nsandbox/sb-b\n");

  r = Run({"apply", "-f", empty.string(), "--prune", "--applyset", "a", "--prune-allow-empty",
           "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/sb-a pruned (dry run)\nsandbox/sb-b pruned (dry run)\n");
  EXPECT_EQ(Snapshot(), before);
  r = Run({"apply", "-f", empty.string(), "--prune", "--applyset", "a", "--prune-allow-empty"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/sb-a pruned\nsandbox/sb-b pruned\n");
  r = Run({"get", "sb"});
  EXPECT_EQ(r.err, "No resources found in default namespace.\n");
}

// Editing a created Sandbox's sandboxId is stored (the manifest is the user's) but warned about
// at once, by apply and by diff: the controller will refuse it.
TEST_F(SbxctlTest, ApplyAndDiffWarnThatTheControllerRefusesANewSandboxId) {
  const fs::path file = dir_ / "sb.yaml";
  WriteFile(file, SandboxManifest("dev", "Dev"));
  ASSERT_EQ(Run({"apply", "-f", file.string()}).exit_code, 0);
  {
    auto store = OpenStore();
    auto object = store->Get({sbx::api::Kind::kSandbox, "default", "dev"});
    ASSERT_TRUE(object.ok()) << object.status();
    object->sandbox_status().sandbox_name = "sandboxes/default-dev";
    object->sandbox_status().workspace_ref = "default";
    ASSERT_TRUE(store->UpdateStatus(*object).ok());
  }
  WriteFile(file, SandboxManifest("dev", "Dev") + "  sandboxId: dev-2\n");
  const std::string warning =
      "Warning: sandbox/dev: spec.sandboxId changed from \"default-dev\" to \"dev-2\" after its "
      "sandbox was created; the controller refuses it (Synced=False, "
      "reason=ImmutableFieldChanged) and creates or deletes nothing until it is changed back\n";
  const Result diff = Run({"diff", "-f", file.string()});
  EXPECT_EQ(diff.exit_code, 1) << diff.err;
  EXPECT_EQ(diff.err, warning);
  const Result applied = Run({"apply", "-f", file.string()});
  EXPECT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_EQ(applied.out, "sandbox/dev configured\n");
  EXPECT_EQ(applied.err, warning);
  // A display name change alone warns of nothing.
  WriteFile(file, SandboxManifest("dev", "Dev2") + "  sandboxId: default-dev\n");
  EXPECT_EQ(Run({"apply", "-f", file.string()}).err, "");
}

// Review #10, findings 3–5: manifests built to hurt are refused with one line at their place,
// quickly and with little memory, and nothing of the apply happens.
class SbxctlHostileManifestTest : public SbxctlTest {
 protected:
  void SetUp() override {
    SbxctlTest::SetUp();
    WriteFile(dir_ / "good.yaml", SandboxManifest("keep", "Keep"));
    ASSERT_EQ(Run({"apply", "-f", (dir_ / "good.yaml").string()}).exit_code, 0);
    before_ = Snapshot();
    // What sbxctl takes to refuse a small manifest: the yardstick for the hostile ones (an
    // ASan build starts at ~120 MB, a debug build at ~12 MB).
    WriteFile(dir_ / "small" / "typo.yaml", "apiVersion: sbx.dev/v1alpha1\nkind: Sandboxx\n");
    const Result r = RunMeasuringMemory({"apply", "-f", (dir_ / "small" / "typo.yaml").string()},
                                        &baseline_rss_kb_);
    ASSERT_EQ(r.exit_code, 1) << r.err;
  }

  // Run, also returning the child's peak resident set size (wait4 reports it per child).
  Result RunMeasuringMemory(const std::vector<std::string>& args, long* max_rss_kb,
                            const std::string& input = "") {
    const int n = ++runs_;
    const pid_t pid = Start(args, input, n);
    Result r;
    int status = 0;
    rusage usage{};
    EXPECT_EQ(wait4(pid, &status, 0, &usage), pid);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = ReadAll(dir_ / ("stdout" + std::to_string(n)));
    r.err = ReadAll(dir_ / ("stderr" + std::to_string(n)));
    *max_rss_kb = usage.ru_maxrss;
    return r;
  }

  // `apply -f file` and `diff -f file` both fail with exactly `error: <expected>`, apply with
  // 1 and diff with 2 (like diff(1)), each with a peak RSS less than `max_extra_mb` above
  // that of refusing a small manifest, and the store is unchanged.
  void ExpectRefused(const fs::path& file, const std::string& expected, long max_extra_mb) {
    for (const std::string verb : {"apply", "diff"}) {
      SCOPED_TRACE(verb);
      long rss_kb = 0;
      const Result r = RunMeasuringMemory({verb, "-f", file.string()}, &rss_kb);
      EXPECT_EQ(r.exit_code, verb == "apply" ? 1 : 2) << r.err;
      EXPECT_EQ(r.err, "error: " + expected + "\n");
      EXPECT_EQ(r.out, "");
      EXPECT_LT(rss_kb, baseline_rss_kb_ + max_extra_mb * 1024) << "peak RSS of sbxctl " << verb;
    }
    EXPECT_EQ(Snapshot(), before_);
  }

  std::string before_;
  long baseline_rss_kb_ = 0;
};

std::string SandboxHeader(const std::string& name) {
  return "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n  name: " + name + "\n";
}

TEST_F(SbxctlHostileManifestTest, AliasBombIsRefusedAtTheFirstAliasWithLittleMemory) {
  // A 1 MiB scalar and aliases of it: 2,000 of them took 4 GB, and the old decoder needed
  // ~2 MB per alias, so 256 (~530 MB) tell the difference without endangering a shared machine.
  std::string yaml =
      SandboxHeader("bomb") + "  annotations:\n    big: &big " + std::string(1 << 20, 'x') + "\n";
  for (int i = 0; i < 256; ++i) {
    yaml += "    a" + std::to_string(i) + ": *big\n";
  }
  const fs::path file = dir_ / "bomb.yaml";
  WriteFile(file, yaml);
  ExpectRefused(file,
                file.string() +
                    ":7:9: metadata.annotations.a0: aliases (*name) are not allowed in sbx "
                    "manifests",
                /*max_extra_mb=*/100);
}

TEST_F(SbxctlHostileManifestTest, OversizedManifestIsRefusedBeforeItIsRead) {
  // Sparse: 100 MB that take no disk. Reading it whole would take 100 MB of memory more.
  const fs::path file = dir_ / "huge.yaml";
  WriteFile(file, SandboxHeader("huge"));
  fs::resize_file(file, 100'000'000);
  ExpectRefused(file,
                file.string() +
                    ": manifest is 100000000 bytes, more than the limit of 8388608 bytes "
                    "(--max-manifest-bytes)",
                /*max_extra_mb=*/50);
  // In a directory too.
  const Result dir = Run({"apply", "-f", dir_.string()});
  EXPECT_EQ(dir.exit_code, 1);
  EXPECT_THAT(dir.err, HasSubstr(file.string() + ": manifest is 100000000 bytes"));
  // stdin has no size to check: it is read up to the limit and no further.
  long rss_kb = 0;
  const Result in = RunMeasuringMemory({"apply", "-f", "-"}, &rss_kb,
                                       SandboxHeader("piped") + std::string(8 << 20, '\n'));
  EXPECT_EQ(in.exit_code, 1);
  EXPECT_EQ(in.err,
            "error: -: manifest is more than the limit of 8388608 bytes (--max-manifest-bytes)\n");
  EXPECT_EQ(Snapshot(), before_);
  // The operator's own limit.
  const fs::path small = dir_ / "small.yaml";
  WriteFile(small, SandboxHeader("small"));
  const Result limited = Run({"--max-manifest-bytes", "10", "apply", "-f", small.string()});
  EXPECT_EQ(limited.exit_code, 1);
  EXPECT_THAT(limited.err, HasSubstr("more than the limit of 10 bytes (--max-manifest-bytes)"));
}

TEST_F(SbxctlHostileManifestTest, DeepNestingIsRefusedWithItsPlace) {
  // yaml-cpp said "invalid YAML: bad file" at 1:1 for this; it must not overflow the stack.
  const fs::path file = dir_ / "deep.yaml";
  WriteFile(file, SandboxHeader("deep") + "spec: " + std::string(100'000, '['));
  ExpectRefused(file, file.string() + ":5:39: yaml: nesting deeper than 64 levels",
                /*max_extra_mb=*/100);
}

TEST_F(SbxctlHostileManifestTest, HugeFlowCollectionIsCutShortWithLittleMemory) {
  // Just under the size limit. yaml-cpp buffered all of it before the first event: 2 GB.
  const fs::path file = dir_ / "brackets.yaml";
  WriteFile(file, SandboxHeader("brackets") + "spec: " + std::string((8 << 20) - 100, '['));
  ExpectRefused(file,
                file.string() +
                    ":5:7: yaml: a flow collection ([…] or {…}) with more than 262144 entries; "
                    "write it in block style",
                /*max_extra_mb=*/150);
}

TEST_F(SbxctlHostileManifestTest, TextThatIsNotUtf8IsRefusedWithItsPlace) {
  // This aborted sbxctl (exit 134) in the store's JSON encoder.
  const fs::path file = dir_ / "latin1.yaml";
  WriteFile(file, SandboxHeader("bytes") + "  annotations:\n    note: \"\xff\xfe\"\n");
  ExpectRefused(file, file.string() + ":6:11: metadata.annotations.note: not valid UTF-8",
                /*max_extra_mb=*/100);
}

TEST_F(SbxctlHostileManifestTest, DurationsAreBounded) {
  const fs::path overflow = dir_ / "overflow.yaml";
  WriteFile(overflow, SandboxHeader("late") + "spec:\n  inactivityTimeout: 99999999999h\n");
  ExpectRefused(overflow,
                overflow.string() +
                    ":6:3: spec.inactivityTimeout: invalid duration \"99999999999h\": more than "
                    "the maximum of 876000h (100 years)",
                /*max_extra_mb=*/100);
  const fs::path day = dir_ / "day.yaml";
  WriteFile(day, SandboxHeader("late") +
                     "spec:\n  inactivityTimeout: 25h\n  setup:\n    - name: a\n      run: x\n"
                     "      timeout: 24h\n");
  ExpectRefused(day, day.string() + ":6:3: spec.inactivityTimeout: must be at most 24h",
                /*max_extra_mb=*/100);
  // The flags share the parser.
  const Result r =
      Run({"apply", "--wait", "--timeout", "99999999999h", "-f", (dir_ / "good.yaml").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "error: invalid --timeout: invalid duration \"99999999999h\": more than the maximum "
            "of 876000h (100 years)\n");
  EXPECT_EQ(Snapshot(), before_);
}

// A manifest may name only the secret sources the operator allowed (SECURITY.md): apply and diff
// refuse sbxd's own variables and any file path with file:line:col, and store nothing.
TEST_F(SbxctlTest, SecretReferencesOutsideTheAllowedSourcesAreRefusedWithTheirPlace) {
  const fs::path file = dir_ / "ws.yaml";
  WriteFile(file,
            "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: evil\nspec:\n"
            "  databricks:\n    host: https://attacker.example.com\n"
            "    tokenFrom:\n      env: DATABRICKS_TOKEN\n"
            "---\napiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: evil2\n"
            "spec:\n  openai:\n    apiKeyFrom: {file: /proc/self/environ}\n");
  for (const char* verb : {"apply", "diff"}) {
    const Result r = Run({verb, "-f", file.string()});
    EXPECT_EQ(r.exit_code, std::string(verb) == "diff" ? 2 : 1) << verb << r.err;
    EXPECT_THAT(r.err, HasSubstr(file.string() +
                                 ":9:7: spec.databricks.tokenFrom.env: environment variable "
                                 "\"DATABRICKS_TOKEN\" is not an allowed secret source"))
        << verb;
    EXPECT_THAT(r.err, HasSubstr(file.string() + ":17:18: spec.openai.apiKeyFrom.file: must be a "
                                                 "plain file name inside the controller's "
                                                 "secrets directory"))
        << verb;
  }
  EXPECT_EQ(Run({"get", "workspaces", "-o", "name"}).out, "");
  // The operator's prefix, told to the CLI.
  WriteFile(file,
            "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: team\nspec:\n"
            "  databricks:\n    host: https://dbc-1.cloud.databricks.com\n"
            "    tokenFrom: {env: TEAM_A_TOKEN}\n");
  EXPECT_EQ(Run({"apply", "-f", file.string()}).exit_code, 1);
  ::setenv("SBX_SECRET_ENV_PREFIX", "TEAM_A_", 1);
  const Result allowed = Run({"apply", "-f", file.string()});
  ::unsetenv("SBX_SECRET_ENV_PREFIX");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
}

}  // namespace
