// GitSource (DESIGN §7.3, issue #16) end to end: the BUILT sbxd pulls a local bare repository
// (file://, made with the git CLI and a fixed author) and applies its manifests. The scenario of
// the issue, in order: commit → sync (objects exist, status.revision is the commit); an edit →
// updated; a broken commit → nothing applied, Ready=False naming file:line:col and the commit;
// a revert → Ready again; a deleted file → its objects pruned; the GitSource deleted with prune
// off → its objects stay. And a GitSource deleted with prune on deletes them; a repository may
// not reach outside the GitSource's namespace.
//
// Everything waits by polling with a deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/support/http_test_client.h"
#include "tests/support/notification_receiver.h"
#include "tests/support/process.h"
#include "tests/support/sbxd_harness.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using sbx::testing::ConditionOf;
using sbx::testing::In;
using sbx::testing::PollUntil;
using sbx::testing::RunProcess;
using sbx::testing::RunResult;
using sbx::testing::SbxdHarness;
using sbx::testing::WriteFile;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr milliseconds kSync{30'000};  // one fetch + apply on a loaded machine, with margin

std::string Workspace(const std::string& name, const std::string& version,
                      const std::string& namespace_ = "") {
  std::string y =
      "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: " + name + "\n";
  if (!namespace_.empty()) {
    y += "  namespace: " + namespace_ + "\n";
  }
  return y + "  labels:\n    version: \"" + version + "\"\nspec:\n  limits:\n    maxSandboxes: 3\n";
}

class GitSourceTest : public ::testing::Test {
 protected:
  GitSourceTest()
      : harness_({.binaries = {SBXD_PATH, SBXCTL_PATH, SBX_EMULATOR_PATH},
                  .dir_prefix = "gitsource-itest-",
                  .token = "dapi-itest-" + std::to_string(std::random_device{}())}) {}

  void SetUp() override {
    const sbx::api::Status started = harness_.StartEmulator();
    ASSERT_TRUE(started.ok()) << started;
    RunResult init = harness_.Sbxctl({"get", "gitsources"});  // creates the store
    ASSERT_EQ(init.exit_code, 0) << init.err;
    remote_ = harness_.dir() / "remote.git";
    work_ = harness_.dir() / "work";
    Git({"init", "--quiet", "--bare", remote_.string()});
    Git({"init", "--quiet", "--initial-branch=main", work_.string()});
  }

  void TearDown() override { harness_.Finish(/*keep_dir=*/HasFailure()); }

  // git with a fixed author and no configuration of the machine.
  std::string Git(std::vector<std::string> args, const fs::path& cwd = {}) {
    if (!cwd.empty()) {
      args.insert(args.begin(), {"-C", cwd.string()});
    }
    const std::map<std::string, std::string> env = {
        {"GIT_AUTHOR_NAME", "sbx test"},    {"GIT_AUTHOR_EMAIL", "test@sbx.dev"},
        {"GIT_COMMITTER_NAME", "sbx test"}, {"GIT_COMMITTER_EMAIL", "test@sbx.dev"},
        {"GIT_CONFIG_NOSYSTEM", "1"},       {"GIT_CONFIG_GLOBAL", "/dev/null"},
        {"HOME", harness_.dir().string()},  {"GIT_TERMINAL_PROMPT", "0"}};
    RunResult r = RunProcess("/usr/bin/git", args, harness_.dir(), env);
    EXPECT_EQ(r.exit_code, 0) << "git " << ::testing::PrintToString(args) << ": " << r.err;
    while (!r.out.empty() && r.out.back() == '\n') {
      r.out.pop_back();
    }
    return r.out;
  }

  // Commits everything in the work tree, pushes main, returns the commit id.
  std::string CommitAndPush(const std::string& message) {
    Git({"add", "--all"}, work_);
    Git({"commit", "--quiet", "-m", message}, work_);
    Git({"push", "--quiet", remote_.string(), "main"}, work_);
    return Git({"rev-parse", "HEAD"}, work_);
  }

  void WriteRepoFile(const std::string& path, const std::string& content) {
    WriteFile(work_ / path, content);
  }

  std::string SourceYaml(const std::string& name, bool prune, const std::string& extra = "") {
    return "apiVersion: sbx.dev/v1alpha1\nkind: GitSource\nmetadata:\n  name: " + name +
           "\nspec:\n  url: file://" + remote_.string() +
           "\n  ref:\n    branch: main\n  path: deploy\n  interval: 1s\n  prune: " +
           (prune ? "true" : "false") + "\n" + extra;
  }

  void ApplySource(const std::string& name, bool prune, const std::string& extra = "") {
    RunResult r = harness_.Apply("gitsource-" + name, SourceYaml(name, prune, extra));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  void StartSbxd(const std::string& log_name = "sbxd") {
    auto p = harness_.StartSbxd(log_name, {"--git-allow-file-urls"});
    ASSERT_TRUE(p.ok()) << p.status();
    sbxd_ = *p;
  }

  json Source(const std::string& name) { return harness_.Get("gitsource", name); }

  // Polls until the GitSource has applied `commit` and is Ready.
  ::testing::AssertionResult WaitApplied(const std::string& name, const std::string& commit) {
    json last;
    const bool ok = PollUntil(
        [&] {
          last = Source(name);
          return last.is_object() && last["status"].value("revision", "") == commit &&
                 ConditionOf(last, "Ready").first == "True";
        },
        In(kSync), milliseconds(100));
    if (ok) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "GitSource " << name << " did not apply " << commit
                                         << "; last seen: " << last.dump(2);
  }

  std::string LabelOf(const std::string& workspace, const std::string& namespace_ = "default") {
    RunResult r = harness_.Sbxctl({"get", "workspace", workspace, "-n", namespace_, "-o",
                                   "jsonpath={.metadata.labels.version}"});
    return r.exit_code == 0 ? r.out : "<absent>";
  }

  bool Exists(const std::string& kind, const std::string& name) {
    return harness_.Sbxctl({"get", kind, name}).exit_code == 0;
  }

  SbxdHarness harness_;
  fs::path remote_;
  fs::path work_;
  sbx::testing::Process* sbxd_ = nullptr;  // the last started; owned by the harness
};

TEST_F(GitSourceTest, CommitEditBrokenCommitRevertDeletedFileAndDeletionWithoutPrune) {
  WriteRepoFile("deploy/alpha.yaml", Workspace("alpha", "1"));
  WriteRepoFile("deploy/team/beta.yml", Workspace("beta", "1"));
  WriteRepoFile("README.md", "not a manifest\n");
  const std::string first = CommitAndPush("alpha and beta");
  StartSbxd();
  ApplySource("apps", /*prune=*/true);

  // Commit → sync: the objects exist and status.revision is the commit.
  ASSERT_TRUE(WaitApplied("apps", first));
  EXPECT_EQ(LabelOf("alpha"), "1");
  EXPECT_EQ(LabelOf("beta"), "1");
  json source = Source("apps");
  EXPECT_EQ(source["status"].value("objects", 0), 2);
  EXPECT_NE(source["status"].value("lastAppliedAt", ""), "");
  EXPECT_EQ(source["spec"].value("applyset", ""), "gitsource-default-apps");

  // An edit → updated.
  WriteRepoFile("deploy/alpha.yaml", Workspace("alpha", "2"));
  const std::string second = CommitAndPush("alpha v2");
  ASSERT_TRUE(WaitApplied("apps", second));
  EXPECT_EQ(LabelOf("alpha"), "2");

  // A broken commit applies nothing — not even its good edit — and says where and which commit.
  WriteRepoFile("deploy/alpha.yaml", Workspace("alpha", "3"));
  WriteRepoFile("deploy/broken.yaml",
                "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: gamma\n"
                "spec:\n  limits:\n    maxSandboxs: 3\n");
  const std::string broken = CommitAndPush("broken");
  json seen;
  ASSERT_TRUE(PollUntil(
      [&] {
        seen = Source("apps");
        return seen.is_object() && seen["status"].value("lastAttemptedRevision", "") == broken &&
               ConditionOf(seen, "Ready").first == "False";
      },
      In(kSync), milliseconds(100)))
      << seen.dump(2);
  EXPECT_EQ(ConditionOf(seen, "Ready").second, "InvalidManifest");
  std::string message;
  for (const json& c : seen["status"]["conditions"]) {
    if (c.value("type", "") == "Ready") {
      message = c.value("message", "");
    }
  }
  EXPECT_THAT(message, HasSubstr("commit " + broken));
  EXPECT_THAT(message, HasSubstr("deploy/broken.yaml:7:5: spec.limits.maxSandboxs: unknown field"));
  EXPECT_THAT(message, HasSubstr("still at " + second));
  EXPECT_EQ(seen["status"].value("revision", ""), second);
  EXPECT_EQ(LabelOf("alpha"), "2");
  EXPECT_FALSE(Exists("workspace", "gamma"));
  RunResult table = harness_.Sbxctl({"get", "gs"});
  EXPECT_THAT(table.out, HasSubstr("URL"));
  EXPECT_THAT(table.out, HasSubstr(second.substr(0, 12)));

  // A revert → Ready again, at the revert commit.
  Git({"revert", "--no-edit", "HEAD"}, work_);
  Git({"push", "--quiet", remote_.string(), "main"}, work_);
  const std::string reverted = Git({"rev-parse", "HEAD"}, work_);
  ASSERT_TRUE(WaitApplied("apps", reverted));
  EXPECT_EQ(LabelOf("alpha"), "2");

  // A deleted file → its objects are pruned on the next sync.
  Git({"rm", "--quiet", "deploy/team/beta.yml"}, work_);
  const std::string without_beta = CommitAndPush("drop beta");
  ASSERT_TRUE(WaitApplied("apps", without_beta));
  EXPECT_TRUE(PollUntil([&] { return !Exists("workspace", "beta"); }, In(kSync)))
      << "beta was not pruned";
  EXPECT_TRUE(Exists("workspace", "alpha"));

  // Deleting the GitSource with prune off leaves its objects.
  ApplySource("apps", /*prune=*/false);
  ASSERT_TRUE(PollUntil(
      [&] {
        const json s = Source("apps");
        return s.is_object() && !s["spec"].value("prune", false) &&
               s["status"].value("observedGeneration", 0) == s["metadata"].value("generation", -1);
      },
      In(kSync)));
  RunResult deleted = harness_.Sbxctl({"delete", "gitsource", "apps"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  ASSERT_TRUE(PollUntil([&] { return !Exists("gitsource", "apps"); }, In(kSync)));
  EXPECT_TRUE(Exists("workspace", "alpha"));
  EXPECT_EQ(LabelOf("alpha"), "2");
}

TEST_F(GitSourceTest, DeletionWithPruneDeletesItsObjectsAndOtherNamespacesAreRefused) {
  WriteRepoFile("deploy/alpha.yaml", Workspace("alpha", "1"));
  const std::string first = CommitAndPush("alpha");
  StartSbxd();
  ApplySource("apps", /*prune=*/true);
  ASSERT_TRUE(WaitApplied("apps", first));

  // An object of another namespace refuses the whole commit.
  WriteRepoFile("deploy/other.yaml", Workspace("intruder", "1", "kube-system"));
  WriteRepoFile("deploy/alpha.yaml", Workspace("alpha", "2"));
  const std::string outside = CommitAndPush("outside");
  json seen;
  ASSERT_TRUE(PollUntil(
      [&] {
        seen = Source("apps");
        return seen.is_object() && seen["status"].value("lastAttemptedRevision", "") == outside &&
               ConditionOf(seen, "Ready").first == "False";
      },
      In(kSync), milliseconds(100)))
      << seen.dump(2);
  EXPECT_EQ(ConditionOf(seen, "Ready").second, "ObjectNotAllowed");
  EXPECT_EQ(LabelOf("alpha"), "1");
  EXPECT_EQ(LabelOf("intruder", "kube-system"), "<absent>");

  Git({"rm", "--quiet", "deploy/other.yaml"}, work_);
  const std::string fixed = CommitAndPush("inside again");
  ASSERT_TRUE(WaitApplied("apps", fixed));
  EXPECT_EQ(LabelOf("alpha"), "2");

  RunResult deleted = harness_.Sbxctl({"delete", "gitsource", "apps"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_TRUE(PollUntil([&] { return !Exists("gitsource", "apps"); }, In(kSync)));
  EXPECT_TRUE(PollUntil([&] { return !Exists("workspace", "alpha"); }, In(kSync)))
      << "prune: true did not delete the GitSource's objects";
}

// DESIGN §8.3 end to end: a broken commit is one GitSourceFailed notification, committed with the
// status that says so; sbxd is killed -9 while the receiver refuses it, and the next sbxd delivers
// it, signed, under the same webhook-id — the receiver keeps exactly one. The GitSource's writes
// are in the audit log under the commit.
TEST_F(GitSourceTest, ABrokenCommitIsNotifiedOnceThoughSbxdIsKilledBeforeItIsDelivered) {
  const std::string secret = "whsec_Z2l0LXNvdXJjZS1ub3RpZmllci1pdGVzdA==";
  sbx::testing::NotificationReceiver receiver(secret);
  const std::string url = receiver.Start();
  receiver.AnswerWith(503);
  harness_.SetEnv("SBX_SECRET_DEFAULT_HOOK", url);
  harness_.SetEnv("SBX_SECRET_DEFAULT_SIGNING", secret);
  RunResult applied =
      harness_.Apply("notifier",
                     "apiVersion: sbx.dev/v1alpha1\nkind: Notifier\nmetadata:\n  name: alerts\n"
                     "spec:\n  type: webhook\n  urlFrom: {env: SBX_SECRET_DEFAULT_HOOK}\n"
                     "  signingSecretFrom: {env: SBX_SECRET_DEFAULT_SIGNING}\n"
                     "  events: [GitSourceFailed]\n");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  WriteRepoFile("deploy/alpha.yaml", Workspace("alpha", "1"));
  const std::string good = CommitAndPush("alpha");
  StartSbxd();
  ApplySource("apps", /*prune=*/false);
  ASSERT_TRUE(WaitApplied("apps", good));
  EXPECT_TRUE(receiver.deliveries().empty());  // Ready=True tells nothing

  WriteRepoFile("deploy/broken.yaml", "kind: Nonsense\n");
  const std::string broken = CommitAndPush("broken");
  ASSERT_TRUE(
      PollUntil([&] { return !receiver.deliveries().empty(); }, In(kSync), milliseconds(100)));
  ASSERT_NE(sbxd_, nullptr);
  sbxd_->Kill();  // after the commit of the notification, before its delivery
  receiver.AnswerWith(200);
  StartSbxd("sbxd-2");
  ASSERT_TRUE(
      PollUntil([&] { return receiver.Accepted().size() == 1; }, In(kSync), milliseconds(100)))
      << receiver.deliveries().size() << " attempts";
  const auto all = receiver.deliveries();
  for (const auto& d : all) {
    EXPECT_EQ(d.webhook_id, all.front().webhook_id);
    EXPECT_TRUE(d.signature_ok) << d.signature;
  }
  const json body = json::parse(receiver.Accepted().front().body);
  EXPECT_EQ(body["reason"], "GitSourceFailed");
  EXPECT_EQ(body["object"]["kind"], "GitSource");
  EXPECT_EQ(body["object"]["name"], "apps");
  EXPECT_THAT(body["message"].get<std::string>(), HasSubstr(broken));
  json notifier;
  EXPECT_TRUE(PollUntil(
      [&] {
        notifier = harness_.Get("notifier", "alerts");
        return notifier.is_object() && notifier["status"].value("delivered", 0) == 1 &&
               notifier["status"].value("pending", 0) == 0;  // 0 is left out
      },
      In(kSync), milliseconds(100)))
      << notifier.dump(2);
  EXPECT_EQ(ConditionOf(notifier, "Ready").first, "True");
  // The second sbxd's counters: the delivery, and an empty outbox.
  const int port = SbxdHarness::MetricsPort(*sbxd_, kSync);
  ASSERT_GT(port, 0);
  const std::string metrics =
      sbx::testing::HttpTestClient("http://127.0.0.1:" + std::to_string(port)).Get("/metrics").body;
  EXPECT_EQ(
      sbx::testing::MetricSample(metrics, "sbx_notifications_total", {"result=\"delivered\""}), 1)
      << metrics;
  EXPECT_NE(metrics.find("\nsbx_notification_queue_depth 0\n"), std::string::npos) << metrics;

  // The audit log names the commit that created alpha.
  const RunResult audit = harness_.Sbxctl({"audit", "-o", "json"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  bool found = false;
  const json records = json::parse(audit.out);
  for (const json& r : records["items"]) {
    if (r["object"]["name"] == "alpha") {
      found = true;
      EXPECT_EQ(r["actor"], "git:" + good);
      EXPECT_EQ(r["role"], "gitops");
      EXPECT_EQ(r["source"], "gitsource/default/apps");
      EXPECT_EQ(r["result"], "created");
    }
  }
  EXPECT_TRUE(found) << audit.out;
}

}  // namespace
