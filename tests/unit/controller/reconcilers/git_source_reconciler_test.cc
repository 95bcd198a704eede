// GitSourceReconciler against the real SqliteStore (":memory:"), a FakeClock and a git that a
// fake ProcessRunner plays (one commit with a set of files): when a sync is due, what one sync
// applies or refuses, and what deletion does with prune on and off.
#include "controller/reconcilers/git_source_reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "api/defaults.h"
#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_cloud_clients.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

const api::ObjectKey kSource{api::Kind::kGitSource, "default", "apps"};

// git as the reconciler uses it: fetch, rev-parse, cat-file -t, ls-tree, cat-file blob.
class ScriptedGit final : public gitops::ProcessRunner {
 public:
  api::StatusOr<gitops::ProcessResult> Run(const gitops::ProcessSpec& spec,
                                           std::stop_token) override {
    const auto has = [&](std::string_view word) {
      return std::find(spec.argv.begin(), spec.argv.end(), word) != spec.argv.end();
    };
    gitops::ProcessResult r;
    if (has("fetch")) {
      ++fetches;
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
    } else if (has("blob")) {
      const std::string oid = spec.argv.back();
      auto it = files.begin();
      std::advance(it, std::stoi(oid.substr(3)));
      r.out = it->second;
    }
    return r;
  }
  std::string commit = std::string(40, '1');
  std::map<std::string, std::string> files;
  std::string fetch_error;
  int fetches = 0;
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

}  // namespace
}  // namespace sbx::controller
