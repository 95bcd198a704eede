// GitSourceReconciler against the real SqliteStore (":memory:"), a FakeClock and a git that a
// fake ProcessRunner plays (one commit with a set of files): when a sync is due, what one sync
// applies or refuses, and what deletion does with prune on and off.
#include "controller/reconcilers/git_source_reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/defaults.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/fakes/recording_enqueuer.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

const api::ObjectKey kSource{api::Kind::kGitSource, "default", "apps"};

// git as the reconciler uses it: fetch, rev-parse, cat-file -t, ls-tree, cat-file --batch.
class ScriptedGit final : public gitops::ProcessRunner {
 public:
  api::StatusOr<gitops::ProcessResult> Run(const gitops::ProcessSpec& spec,
                                           std::stop_token stop) override {
    const auto has = [&](std::string_view word) {
      return std::find(spec.argv.begin(), spec.argv.end(), word) != spec.argv.end();
    };
    gitops::ProcessResult r;
    if (has("fetch")) {
      ++fetches;
      std::unique_lock lock(mu_);
      if (hold_) {
        // A repository that does not answer: until released, stopped, or 10 s.
        holding_ = true;
        cv_.wait_for(lock, stop, std::chrono::seconds(10), [&] { return !hold_; });
        holding_ = false;
        if (stop.stop_requested()) {
          return api::CancelledError("git fetch stopped");
        }
      }
      if (!fetch_error.empty()) {
        r.exit_code = 128;
        r.err = fetch_error;
      }
    } else if (has("rev-parse")) {
      r.out = commit + "\n";
    } else if (has("-t")) {
      r.out = "tree\n";
    } else if (has("ls-tree")) {
      int i = 0;
      for (const auto& [path, content] : files) {
        r.out += "100644 blob oid" + std::to_string(i++) + " " + std::to_string(content.size()) +
                 "\t" + path + '\0';
      }
    } else if (has("--batch")) {
      // One line of input an object: "<oid> blob <size>\n<content>\n".
      for (size_t at = 0; at < spec.input.size();) {
        const size_t nl = spec.input.find('\n', at);
        const std::string oid = spec.input.substr(at, nl - at);
        at = nl + 1;
        auto it = files.begin();
        std::advance(it, std::stoi(oid.substr(3)));
        r.out += oid + " blob " + std::to_string(it->second.size()) + "\n" + it->second + "\n";
      }
    }
    return r;
  }
  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      hold_ = false;
    }
    cv_.notify_all();
  }
  bool holding() {
    std::lock_guard lock(mu_);
    return holding_;
  }

  std::string commit = std::string(40, '1');
  std::map<std::string, std::string> files;
  std::string fetch_error;
  std::atomic<int> fetches{0};

 private:
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool hold_ = false;     // Guarded by mu_.
  bool holding_ = false;  // Guarded by mu_.
};

std::string Workspace(const std::string& name, const std::string& version,
                      const std::string& extra = "") {
  return "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: " + name +
         "\n  labels: {version: \"" + version + "\"}\n" + extra;
}

class GitSourceReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = SqliteStore::Open(":memory:", SqliteStore::Options{});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    gitops::GitClientOptions options;
    options.cache_dir = ::testing::TempDir() + "gitsource-cache";
    git_ = std::make_unique<gitops::GitClient>(runner_, options);
    reconciler_ = std::make_unique<GitSourceReconciler>(*store_, clouds_, *git_, clock_);
  }

  void ApplySource(bool prune, std::function<void(api::GitSourceSpec&)> edit = {}) {
    api::Object o = api::MakeObject(api::Kind::kGitSource, "apps");
    api::GitSourceSpec& spec = o.git_source_spec();
    spec.url = "https://git.example.com/apps.git";
    spec.ref.branch = "main";
    spec.path = "deploy";
    spec.prune.enabled = prune;
    if (edit) {
      edit(spec);
    }
    api::ApplyDefaults(o);
    auto applied = store_->Apply({o}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
  }

  api::StatusOr<ReconcileResult> Reconcile() { return reconciler_->Reconcile(kSource, {}); }

  api::Object Source() { return *store_->Get(kSource); }
  api::Condition Ready() {
    const api::Object source = Source();
    const api::Condition* c = api::FindCondition(source.conditions(), "Ready");
    return c == nullptr ? api::Condition{} : *c;
  }
  std::string Version(const std::string& workspace, const std::string& ns = "default") {
    auto o = store_->Get({api::Kind::kWorkspace, ns, workspace});
    return o.ok() ? o->metadata.labels["version"] : "<absent>";
  }

  testing::FakeClock clock_;
  testing::FakeCloudClients clouds_;
  ScriptedGit runner_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<gitops::GitClient> git_;
  std::unique_ptr<GitSourceReconciler> reconciler_;
};

TEST_F(GitSourceReconcilerTest, AppliesTheCommitThenSyncsAgainOnlyAfterTheInterval) {
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "1")},
                   {"deploy/sub/b.yaml", Workspace("beta", "1")}};
  ApplySource(/*prune=*/true);
  api::StatusOr<ReconcileResult> r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->after, 60s);
  EXPECT_EQ(Ready().status, ConditionStatus::kTrue) << Ready().message;
  EXPECT_EQ(Ready().reason, "Applied");
  EXPECT_EQ(Source().git_source_status().revision, runner_.commit);
  EXPECT_EQ(Source().git_source_status().objects, 2);
  EXPECT_EQ(Version("alpha"), "1");
  EXPECT_EQ(reconciler_->syncs_succeeded(), 1);
  EXPECT_EQ(reconciler_->LastSuccess().count({"default", "apps"}), 1u);

  // Not due: the rest of the interval, and no fetch.
  clock_.Advance(20s);
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(r->after, 40s + 1ms);
  EXPECT_GT(r->after, 39s);
  EXPECT_EQ(runner_.fetches, 1);

  // Due again after the interval.
  clock_.Advance(41s);
  runner_.files["deploy/a.yaml"] = Workspace("alpha", "2");
  runner_.commit = std::string(40, '2');
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(runner_.fetches, 2);
  EXPECT_EQ(Version("alpha"), "2");

  // A spec change syncs at once.
  ApplySource(/*prune=*/true, [](api::GitSourceSpec& s) { s.interval = 1h; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(runner_.fetches, 3);
}

TEST_F(GitSourceReconcilerTest, ABrokenCommitAppliesNothingAndNamesFileLineAndCommit) {
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "1")}};
  ApplySource(/*prune=*/true);
  ASSERT_TRUE(Reconcile().ok());
  const std::string good = runner_.commit;

  runner_.commit = std::string(40, 'b');
  runner_.files["deploy/a.yaml"] = Workspace("alpha", "2");
  runner_.files["deploy/bad.yaml"] = Workspace("beta", "1", "spec:\n  limits: {maxSandboxes: x}\n");
  clock_.Advance(61s);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().status, ConditionStatus::kFalse);
  EXPECT_EQ(Ready().reason, "InvalidManifest");
  EXPECT_THAT(Ready().message, HasSubstr("commit " + runner_.commit +
                                         ": deploy/bad.yaml:7:12: spec.limits.maxSandboxes"));
  EXPECT_THAT(Ready().message, HasSubstr("spec.limits.maxSandboxes"));
  EXPECT_THAT(Ready().message, HasSubstr("(still at " + good + ")"));
  EXPECT_EQ(Source().git_source_status().revision, good);
  EXPECT_EQ(Source().git_source_status().last_attempted_revision, runner_.commit);
  EXPECT_EQ(Version("alpha"), "1");
  EXPECT_EQ(Version("beta"), "<absent>");
  EXPECT_EQ(reconciler_->syncs_failed(), 1);
}

TEST_F(GitSourceReconcilerTest, RefusesOtherNamespacesGitSourcesAndAnEmptyPath) {
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "1") + "  namespace: other\n"}};
  ApplySource(/*prune=*/true);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().reason, "ObjectNotAllowed");
  EXPECT_THAT(Ready().message, HasSubstr("deploy/a.yaml:1: metadata.namespace: \"other\""));
  EXPECT_EQ(Version("alpha", "other"), "<absent>");

  runner_.files = {{"deploy/gs.yaml",
                    "apiVersion: sbx.dev/v1alpha1\nkind: GitSource\nmetadata: {name: more}\n"
                    "spec: {url: \"https://h/r.git\", ref: {branch: main}}\n"}};
  clock_.Advance(61s);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().reason, "ObjectNotAllowed");
  EXPECT_THAT(Ready().message, HasSubstr("a GitSource cannot apply a GitSource"));

  runner_.files.clear();
  clock_.Advance(61s);
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().reason, "EmptyPath");
  EXPECT_THAT(Ready().message, HasSubstr("set prune.allowEmpty to allow it"));

  ApplySource(/*prune=*/true, [](api::GitSourceSpec& s) { s.prune.allow_empty = true; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().status, ConditionStatus::kTrue) << Ready().message;
}

TEST_F(GitSourceReconcilerTest, FetchErrorsAndRefusedSecretsAreTheSourcesStatus) {
  ApplySource(/*prune=*/false,
              [](api::GitSourceSpec& s) { s.credentials.token_from.env = "SBX_SECRET_GIT"; });
  runner_.fetch_error = "fatal: could not read from remote repository secret:SBX_SECRET_GIT";
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().reason, "FetchFailed");
  EXPECT_THAT(Ready().message, Not(HasSubstr("secret:SBX_SECRET_GIT")));
  EXPECT_THAT(Ready().message, HasSubstr("[REDACTED]"));

  // A reference the operator did not allow (written to the store by hand, past validation).
  ApplySource(/*prune=*/false,
              [](api::GitSourceSpec& s) { s.credentials.token_from.env = "HOME"; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().reason, "SecretNotAllowed");
}

TEST_F(GitSourceReconcilerTest, APruneNeverReachesAnotherNamespaceOrAnotherSourcesSet) {
  // A set that already has a member in another namespace (sbxctl apply --applyset shared -n other).
  api::Object theirs = api::MakeObject(api::Kind::kWorkspace, "theirs", "other");
  ApplyOptions shared;
  shared.applyset = "shared";
  ASSERT_TRUE(store_->Apply({theirs}, shared).ok());
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "1")}};
  ApplySource(/*prune=*/true, [](api::GitSourceSpec& s) { s.applyset = "shared"; });
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().reason, "ApplysetConflict");
  EXPECT_THAT(Ready().message, HasSubstr("Workspace/other/theirs"));
  EXPECT_TRUE(store_->Get({api::Kind::kWorkspace, "other", "theirs"}).ok());
  EXPECT_EQ(Version("alpha"), "<absent>");

  // Deleting it (prune on) deletes nothing outside its namespace either.
  ASSERT_TRUE(store_->Delete(kSource).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(store_->Get(kSource).status().code(), api::StatusCode::kNotFound);
  auto kept = store_->Get({api::Kind::kWorkspace, "other", "theirs"});
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->metadata.deletion_timestamp.empty());

  // Two GitSources on one applyset would prune each other.
  ApplySource(/*prune=*/false, [](api::GitSourceSpec& s) { s.applyset = "apps-set"; });
  api::Object second = api::MakeObject(api::Kind::kGitSource, "second");
  second.git_source_spec().url = "https://h/r.git";
  second.git_source_spec().ref.branch = "main";
  second.git_source_spec().applyset = "apps-set";
  ASSERT_TRUE(store_->Apply({second}, {}).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Ready().reason, "ApplysetConflict");
  EXPECT_THAT(Ready().message, HasSubstr("GitSource default/second"));
}

TEST_F(GitSourceReconcilerTest, DeletionPrunesOnlyWithPrune) {
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "1")}};
  ApplySource(/*prune=*/false);
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(store_->Delete(kSource).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(store_->Get(kSource).status().code(), api::StatusCode::kNotFound);
  EXPECT_EQ(Version("alpha"), "1");

  ApplySource(/*prune=*/true);
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(store_->Delete(kSource).ok());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(store_->Get(kSource).status().code(), api::StatusCode::kNotFound);
  auto alpha = store_->Get({api::Kind::kWorkspace, "default", "alpha"});
  EXPECT_TRUE(!alpha.ok() || !alpha->metadata.deletion_timestamp.empty())
      << "prune: true left alpha in place";
}

// #24 item 5: a fetch runs on the pool's threads, never a reconcile worker. A repository that does
// not answer leaves the reconcile free at once; the pool wakes the GitSource when the fetch ends,
// and that pass applies the commit. Deleting the GitSource meanwhile stops the fetch first.
TEST_F(GitSourceReconcilerTest, AFetchThatDoesNotAnswerHoldsNoReconcileWorker) {
  sbx::testing::RecordingEnqueuer enqueuer;
  GitSourceReconcilerOptions options;
  options.enqueuer = &enqueuer;
  reconciler_ = std::make_unique<GitSourceReconciler>(*store_, clouds_, *git_, clock_, options);
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "1")}};
  runner_.Hold();
  ApplySource(/*prune=*/true);
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(sbx::testing::PollUntil([&] { return runner_.holding(); },
                                      sbx::testing::In(std::chrono::seconds(5))));
  ASSERT_TRUE(Reconcile().ok());  // again, while it hangs: no second fetch
  EXPECT_TRUE(runner_.holding()) << "a reconcile waited for the fetch";
  EXPECT_EQ(runner_.fetches.load(), 1);
  EXPECT_EQ(Version("alpha"), "<absent>");

  runner_.Release();
  ASSERT_TRUE(sbx::testing::PollUntil([&] { return enqueuer.Count("apps") >= 1; },
                                      sbx::testing::In(std::chrono::seconds(10))));
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(Version("alpha"), "1");
  EXPECT_EQ(Ready().reason, "Applied");

  // A spec change fetches again; the GitSource is deleted while that fetch hangs.
  runner_.Hold();
  ApplySource(/*prune=*/true, [](api::GitSourceSpec& spec) { spec.path = "deploy/"; });
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(sbx::testing::PollUntil([&] { return runner_.holding(); },
                                      sbx::testing::In(std::chrono::seconds(5))));
  ASSERT_TRUE(store_->Delete(kSource).ok());
  ASSERT_TRUE(Reconcile().ok());  // the finalizer stops the fetch before the cache goes
  EXPECT_FALSE(runner_.holding());
  EXPECT_EQ(store_->Get(kSource).status().code(), api::StatusCode::kNotFound);
}

// A spec changed while a fetch of the old one ran: that outcome is dropped and the new spec is
// fetched at once, not an interval later.
TEST_F(GitSourceReconcilerTest, ASpecChangedWhileItsFetchRanIsFetchedAgainAtOnce) {
  sbx::testing::RecordingEnqueuer enqueuer;
  GitSourceReconcilerOptions options;
  options.enqueuer = &enqueuer;
  reconciler_ = std::make_unique<GitSourceReconciler>(*store_, clouds_, *git_, clock_, options);
  const auto woken = [&] {
    return sbx::testing::PollUntil([&] { return !enqueuer.Take().empty(); },
                                   sbx::testing::In(std::chrono::seconds(10)));
  };
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "1")}};
  ApplySource(/*prune=*/true);
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(woken());
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_EQ(Version("alpha"), "1");

  runner_.Hold();
  ApplySource(/*prune=*/true, [](api::GitSourceSpec& spec) { spec.path = "deploy/"; });
  ASSERT_TRUE(Reconcile().ok());
  ASSERT_TRUE(sbx::testing::PollUntil([&] { return runner_.holding(); },
                                      sbx::testing::In(std::chrono::seconds(5))));
  runner_.files = {{"deploy/a.yaml", Workspace("alpha", "2")}};
  ApplySource(/*prune=*/true, [](api::GitSourceSpec& spec) { spec.path = "./deploy"; });
  ASSERT_TRUE(Reconcile().ok());  // the old spec's fetch still runs
  runner_.Release();
  ASSERT_TRUE(woken());
  ASSERT_TRUE(Reconcile().ok());  // its outcome is stale: the new spec is fetched now
  ASSERT_TRUE(woken());
  ASSERT_TRUE(Reconcile().ok());
  EXPECT_EQ(runner_.fetches.load(), 3);
  EXPECT_EQ(Version("alpha"), "2");
  EXPECT_EQ(Source().git_source_status().observed_generation, Source().metadata.generation);
}

// #24: the cache key is made from store values, checked at every use: a name that is not a DNS
// label makes no key (and GitClient refuses any key that is not one file name in its cache).
TEST(GitCacheKeyTest, IsMadeOnlyFromDnsLabels) {
  api::StatusOr<std::string> key = GitCacheKey({api::Kind::kGitSource, "team-a", "deploy"});
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, "team-a_deploy");
  for (const auto& [ns, name] :
       std::vector<std::pair<std::string, std::string>>{{"..", "x"},
                                                        {"../../home/op/repo", "x"},
                                                        {"default", "../x"},
                                                        {"", "x"},
                                                        {"default", ""},
                                                        {"a/b", "x"},
                                                        {"Default", "x"}}) {
    EXPECT_EQ(GitCacheKey({api::Kind::kGitSource, ns, name}).status().code(),
              api::StatusCode::kInvalidArgument)
        << ns << "/" << name;
  }
}

}  // namespace
}  // namespace sbx::controller
