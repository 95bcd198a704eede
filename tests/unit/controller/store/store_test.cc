// The Store contract, run against both backends (store_backends.h): SqliteStore and
// PostgresStore must pass the same tests. SQLite-only behaviour (files, WAL, busy timeouts) is
// tested in tests/integration.
#include "controller/store/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fake_clock.h"
#include "tests/unit/controller/store/store_backends.h"

namespace sbx::controller {
namespace {

using api::Kind;
using api::StatusCode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Object Sandbox(const std::string& name, const std::string& image = "python:3.12",
               const std::string& ns = "default") {
  Object o = api::MakeObject(Kind::kSandbox, name, ns);
  o.sandbox_spec().image = image;
  o.sandbox_spec().sandbox_id = ns + "-" + name;
  return o;
}

ObjectKey Key(const std::string& name, Kind kind = Kind::kSandbox,
              const std::string& ns = "default") {
  return ObjectKey{kind, ns, name};
}

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto store = OpenTestStore(GetParam(), TestStoreOptions{.clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  std::vector<ApplyResult> MustApply(const std::vector<Object>& objects,
                                     const ApplyOptions& options = {}) {
    auto results = store_->Apply(objects, options);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? *results : std::vector<ApplyResult>{};
  }
  int64_t Revision() {
    auto revision = store_->CurrentRevision();
    EXPECT_TRUE(revision.ok()) << revision.status();
    return revision.ok() ? *revision : -1;
  }
  Object MustGet(const ObjectKey& key) {
    auto object = store_->Get(key);
    EXPECT_TRUE(object.ok()) << object.status();
    return object.ok() ? *object : Object{};
  }
  // Puts the controller finalizer on an object.
  Object AddFinalizer(const ObjectKey& key) {
    Object object = MustGet(key);
    object.metadata.finalizers.push_back(std::string(api::kControllerFinalizer));
    auto updated = store_->UpdateControllerMetadata(object);
    EXPECT_TRUE(updated.ok()) << updated.status();
    return updated.ok() ? *updated : Object{};
  }

  testing::FakeClock clock_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, StoreBackends(), BackendName);

TEST_P(StoreTest, NewStoreIsAtRevisionZero) {
  EXPECT_EQ(Revision(), 0);
  auto changes = store_->WatchSince(0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->empty());
}

TEST_P(StoreTest, CreateSetsServerMetadata) {
  auto results = MustApply({Sandbox("a")});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, ApplyAction::kCreated);
  EXPECT_EQ(results[0].key, Key("a"));
  const Object& stored = results[0].object;
  EXPECT_EQ(stored.metadata.generation, 1);
  EXPECT_EQ(stored.metadata.resource_version, 1);
  EXPECT_EQ(stored.metadata.creation_timestamp, "2026-09-01T12:00:00Z");
  EXPECT_TRUE(stored.metadata.deletion_timestamp.empty());
  ASSERT_EQ(stored.metadata.uid.size(), 36u);
  EXPECT_EQ(stored.metadata.uid[14], '4');  // UUID version 4
  EXPECT_EQ(stored.sandbox_spec().image, "python:3.12");
  EXPECT_EQ(MustGet(Key("a")), stored);
  EXPECT_EQ(Revision(), 1);
}

TEST_P(StoreTest, UidsAreDistinct) {
  auto results = MustApply({Sandbox("a"), Sandbox("b")});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(results[0].object.metadata.uid, results[1].object.metadata.uid);
  EXPECT_EQ(results[1].object.metadata.resource_version, 2);  // one revision per object
}

TEST_P(StoreTest, ReapplyingUnchangedManifestWritesNothing) {
  const Object first = MustApply({Sandbox("a")})[0].object;
  clock_.Advance(std::chrono::minutes(1));
  auto results = MustApply({Sandbox("a")});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, ApplyAction::kUnchanged);
  EXPECT_EQ(results[0].object, first);
  EXPECT_EQ(Revision(), 1);
  auto changes = store_->WatchSince(1);
  ASSERT_TRUE(changes.ok());
  EXPECT_TRUE(changes->empty());
}

TEST_P(StoreTest, ChangedSpecBumpsGenerationAndResourceVersion) {
  MustApply({Sandbox("a")});
  auto results = MustApply({Sandbox("a", "python:3.13")});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, ApplyAction::kConfigured);
  EXPECT_EQ(results[0].object.metadata.generation, 2);
  EXPECT_EQ(results[0].object.metadata.resource_version, 2);
  EXPECT_EQ(MustGet(Key("a")).sandbox_spec().image, "python:3.13");
}

TEST_P(StoreTest, LabelOnlyChangeBumpsResourceVersionNotGeneration) {
  MustApply({Sandbox("a")});
  Object labelled = Sandbox("a");
  labelled.metadata.labels["team"] = "infra";
  labelled.metadata.annotations["note"] = "hi";
  auto results = MustApply({labelled});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, ApplyAction::kConfigured);
  EXPECT_EQ(results[0].object.metadata.generation, 1);
  EXPECT_EQ(results[0].object.metadata.resource_version, 2);
  Object stored = MustGet(Key("a"));
  EXPECT_EQ(stored.metadata.labels.at("team"), "infra");
  EXPECT_EQ(stored.metadata.annotations.at("note"), "hi");
}

TEST_P(StoreTest, IgnoresServerSetMetadataAndStatusInManifests) {
  Object object = Sandbox("a");
  object.metadata.uid = "not-a-uid";
  object.metadata.generation = 42;
  object.metadata.resource_version = 42;
  object.metadata.finalizers = {"x"};
  object.sandbox_status().state = "RUNNING";
  const Object stored = MustApply({object})[0].object;
  EXPECT_NE(stored.metadata.uid, "not-a-uid");
  EXPECT_EQ(stored.metadata.generation, 1);
  EXPECT_EQ(stored.metadata.resource_version, 1);
  EXPECT_TRUE(stored.metadata.finalizers.empty());
  EXPECT_EQ(stored.sandbox_status().state, "");
}

TEST_P(StoreTest, RequiredResourceVersionRefusesAChangeMadeSinceItWasRead) {
  MustApply({Sandbox("a")});
  Object read = MustGet(Key("a"));           // as `sbxctl edit` reads it
  MustApply({Sandbox("a", "python:3.13")});  // someone else changes it meanwhile
  const int64_t before = Revision();

  ApplyOptions cas;
  cas.require_resource_version = true;
  read.sandbox_spec().image = "python:3.14";
  auto stale = store_->Apply({read}, cas);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kAborted);
  EXPECT_EQ(MustGet(Key("a")).sandbox_spec().image, "python:3.13");
  EXPECT_EQ(Revision(), before);

  Object fresh = MustGet(Key("a"));
  fresh.sandbox_spec().image = "python:3.14";
  auto results = MustApply({fresh}, cas);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].action, ApplyAction::kConfigured);
  EXPECT_EQ(results[0].object.metadata.generation, 3);

  auto gone = store_->Apply({Sandbox("never-stored")}, cas);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, DuplicateKeyInOneApplyIsInvalidArgumentNamingIt) {
  auto results = store_->Apply({Sandbox("a"), Sandbox("b"), Sandbox("a", "other")}, {});
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(results.status().message(), HasSubstr("Sandbox/default/a"));
  EXPECT_EQ(Revision(), 0);
}

TEST_P(StoreTest, SameNameInDifferentKindsOrNamespacesIsFine) {
  Object worker = api::MakeObject(Kind::kAgentWorker, "a");
  worker.agent_worker_spec().sandbox_ref = "a";
  auto results = MustApply({Sandbox("a"), Sandbox("a", "img", "other"), worker});
  EXPECT_EQ(results.size(), 3u);
}

TEST_P(StoreTest, ApplyIsAllOrNothing) {
  MustApply({Sandbox("doomed"), Sandbox("kept")});
  AddFinalizer(Key("doomed"));
  auto outcome = store_->Delete(Key("doomed"));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_EQ(*outcome, DeleteOutcome::kMarkedForDeletion);
  const int64_t before = Revision();

  // "new" would be created and "kept" changed, but "doomed" is being deleted: nothing happens.
  auto results = store_->Apply({Sandbox("new"), Sandbox("kept", "changed"), Sandbox("doomed")}, {});
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(results.status().message(), HasSubstr("Sandbox/default/doomed"));
  EXPECT_EQ(store_->Get(Key("new")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(MustGet(Key("kept")).sandbox_spec().image, "python:3.12");
  EXPECT_EQ(Revision(), before);
  auto changes = store_->WatchSince(before);
  ASSERT_TRUE(changes.ok());
  EXPECT_TRUE(changes->empty());
}

TEST_P(StoreTest, UpdateStatusIsCompareAndSwap) {
  Object object = MustApply({Sandbox("a")})[0].object;
  Object stale = object;
  object.sandbox_status().state = "PENDING";
  auto updated = store_->UpdateStatus(object);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->metadata.resource_version, 2);
  EXPECT_EQ(updated->metadata.generation, 1);
  EXPECT_EQ(updated->sandbox_status().state, "PENDING");

  stale.sandbox_status().state = "RUNNING";
  auto conflict = store_->UpdateStatus(stale);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.status().code(), StatusCode::kAborted);
  EXPECT_EQ(MustGet(Key("a")).sandbox_status().state, "PENDING");
}

TEST_P(StoreTest, UpdateStatusDoesNotTouchSpec) {
  Object object = MustApply({Sandbox("a")})[0].object;
  object.sandbox_spec().image = "sneaky";
  object.metadata.labels["x"] = "y";
  object.sandbox_status().state = "RUNNING";
  ASSERT_TRUE(store_->UpdateStatus(object).ok());
  Object stored = MustGet(Key("a"));
  EXPECT_EQ(stored.sandbox_spec().image, "python:3.12");
  EXPECT_TRUE(stored.metadata.labels.empty());
  EXPECT_EQ(stored.sandbox_status().state, "RUNNING");
}

TEST_P(StoreTest, UnchangedStatusWritesNothing) {
  Object object = MustApply({Sandbox("a")})[0].object;
  auto updated = store_->UpdateStatus(object);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->metadata.resource_version, 1);
  EXPECT_EQ(Revision(), 1);
}

TEST_P(StoreTest, UpdateStatusOfMissingObjectIsNotFound) {
  EXPECT_EQ(store_->UpdateStatus(Sandbox("ghost")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateControllerMetadata(Sandbox("ghost")).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete(Key("ghost")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->Get(Key("ghost")).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, ControllerMetadataUpdateIsCompareAndSwap) {
  Object object = MustApply({Sandbox("a")})[0].object;
  Object stale = object;
  object.metadata.owner_references.push_back({Kind::kAgentWorker, "w", "uid-1", true});
  object.metadata.finalizers.push_back("sbx.dev/controller");
  auto updated = store_->UpdateControllerMetadata(object);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->metadata.resource_version, 2);
  EXPECT_EQ(updated->metadata.generation, 1);
  Object stored = MustGet(Key("a"));
  EXPECT_EQ(stored.metadata.owner_references, object.metadata.owner_references);
  EXPECT_THAT(stored.metadata.finalizers, ElementsAre("sbx.dev/controller"));
  EXPECT_EQ(store_->UpdateControllerMetadata(stale).status().code(), StatusCode::kAborted);
}

TEST_P(StoreTest, DeleteWithoutFinalizersRemovesTheObject) {
  MustApply({Sandbox("a")});
  auto outcome = store_->Delete(Key("a"));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, DeleteOutcome::kDeleted);
  EXPECT_EQ(store_->Get(Key("a")).status().code(), StatusCode::kNotFound);
  auto changes = store_->WatchSince(1);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 1u);
  EXPECT_EQ((*changes)[0].type, Store::ChangeType::kDeleted);
  EXPECT_EQ((*changes)[0].revision, 2);
  EXPECT_EQ((*changes)[0].key, Key("a"));
  EXPECT_FALSE((*changes)[0].object.has_value());
}

TEST_P(StoreTest, DeleteWithFinalizersMarksUntilTheLastFinalizerGoes) {
  MustApply({Sandbox("a")});
  AddFinalizer(Key("a"));
  clock_.Advance(std::chrono::seconds(5));
  auto outcome = store_->Delete(Key("a"));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, DeleteOutcome::kMarkedForDeletion);
  Object marked = MustGet(Key("a"));
  EXPECT_EQ(marked.metadata.deletion_timestamp, "2026-09-01T12:00:05Z");
  EXPECT_EQ(marked.metadata.generation, 1);

  auto again = store_->Delete(Key("a"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, DeleteOutcome::kAlreadyDeleting);
  EXPECT_EQ(MustGet(Key("a")).metadata.resource_version, marked.metadata.resource_version);

  // The controller can still write status while it cleans up.
  marked.sandbox_status().state = "DELETING";
  auto with_status = store_->UpdateStatus(marked);
  ASSERT_TRUE(with_status.ok()) << with_status.status();

  Object released = *with_status;
  released.metadata.finalizers.clear();
  ASSERT_TRUE(store_->UpdateControllerMetadata(released).ok());
  EXPECT_EQ(store_->Get(Key("a")).status().code(), StatusCode::kNotFound);
  auto changes = store_->WatchSince(marked.metadata.resource_version);
  ASSERT_TRUE(changes.ok());
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].type, Store::ChangeType::kModified);
  EXPECT_EQ((*changes)[1].type, Store::ChangeType::kDeleted);
}

TEST_P(StoreTest, PruneDeletesMembersMissingFromTheApply) {
  ApplyOptions with_set;
  with_set.applyset = "demo";
  MustApply({Sandbox("a"), Sandbox("b"), Sandbox("c")}, with_set);
  MustApply({Sandbox("outsider")});  // not in the applyset
  AddFinalizer(Key("c"));

  ApplyOptions prune = with_set;
  prune.prune = true;
  auto results = MustApply({Sandbox("a")}, prune);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].action, ApplyAction::kUnchanged);
  EXPECT_EQ(results[1].action, ApplyAction::kPruned);
  EXPECT_EQ(results[1].key, Key("b"));
  EXPECT_EQ(results[2].action, ApplyAction::kPruned);
  EXPECT_EQ(results[2].key, Key("c"));
  EXPECT_FALSE(results[2].object.metadata.deletion_timestamp.empty());

  EXPECT_EQ(store_->Get(Key("b")).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(MustGet(Key("c")).metadata.deletion_timestamp.empty());  // waits for finalizer
  EXPECT_TRUE(store_->Get(Key("a")).ok());
  EXPECT_TRUE(store_->Get(Key("outsider")).ok());

  // Pruning again reports nothing new: c is already on its way out.
  auto again = MustApply({Sandbox("a")}, prune);
  EXPECT_EQ(again.size(), 1u);
}

TEST_P(StoreTest, PruneWithoutApplysetIsInvalidArgument) {
  ApplyOptions options;
  options.prune = true;
  EXPECT_EQ(store_->Apply({Sandbox("a")}, options).status().code(), StatusCode::kInvalidArgument);
}

// An empty apply with prune would delete the whole set: the store refuses it for every client,
// dry run included, unless asked to allow it.
TEST_P(StoreTest, PruneWithNoObjectsIsRefusedUnlessAllowed) {
  ApplyOptions with_set;
  with_set.applyset = "demo";
  MustApply({Sandbox("a"), Sandbox("b")}, with_set);
  ApplyOptions prune = with_set;
  prune.prune = true;
  for (bool dry_run : {true, false}) {
    prune.dry_run = dry_run;
    auto refused = store_->Apply({}, prune);
    EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << dry_run;
  }
  EXPECT_TRUE(store_->Get(Key("a")).ok());
  EXPECT_TRUE(store_->Get(Key("b")).ok());
  prune.dry_run = false;
  prune.prune_allow_empty = true;
  auto pruned = MustApply({}, prune);
  EXPECT_EQ(pruned.size(), 2u);
  EXPECT_EQ(store_->Get(Key("a")).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, DryRunComputesResultsAndWritesNothing) {
  ApplyOptions with_set;
  with_set.applyset = "demo";
  MustApply({Sandbox("a"), Sandbox("b")}, with_set);

  ApplyOptions dry = with_set;
  dry.dry_run = true;
  dry.prune = true;
  auto results = MustApply({Sandbox("a", "new-image"), Sandbox("c")}, dry);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].action, ApplyAction::kConfigured);
  EXPECT_EQ(results[0].object.metadata.generation, 2);
  EXPECT_EQ(results[1].action, ApplyAction::kCreated);
  EXPECT_EQ(results[2].action, ApplyAction::kPruned);
  EXPECT_EQ(results[2].key, Key("b"));

  EXPECT_EQ(Revision(), 2);
  EXPECT_EQ(MustGet(Key("a")).sandbox_spec().image, "python:3.12");
  EXPECT_TRUE(store_->Get(Key("b")).ok());
  EXPECT_EQ(store_->Get(Key("c")).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, ListFiltersAndSorts) {
  Object worker = api::MakeObject(Kind::kAgentWorker, "w");
  worker.agent_worker_spec().sandbox_ref = "b";
  Object labelled = Sandbox("b");
  labelled.metadata.labels = {{"team", "infra"}, {"tier", "gpu"}};
  MustApply({Sandbox("c"), worker, labelled, Sandbox("a", "img", "zz"),
             api::MakeObject(Kind::kWorkspace, "default")});

  auto all = store_->List({});
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<ObjectKey> keys;
  for (const Object& o : *all) {
    keys.push_back(api::KeyOf(o));
  }
  EXPECT_THAT(keys, ElementsAre(Key("default", Kind::kWorkspace), Key("b"), Key("c"),
                                Key("a", Kind::kSandbox, "zz"), Key("w", Kind::kAgentWorker)));

  ListOptions sandboxes_in_default;
  sandboxes_in_default.kind = Kind::kSandbox;
  sandboxes_in_default.namespace_ = "default";
  auto listed = store_->List(sandboxes_in_default);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);

  ListOptions in_zz;
  in_zz.namespace_ = "zz";
  EXPECT_EQ(store_->List(in_zz)->size(), 1u);

  ListOptions selector;
  selector.label_selector = {{"team", "infra"}};
  auto selected = store_->List(selector);
  ASSERT_TRUE(selected.ok());
  ASSERT_EQ(selected->size(), 1u);
  EXPECT_EQ((*selected)[0].metadata.name, "b");
  selector.label_selector["tier"] = "cpu";
  EXPECT_TRUE(store_->List(selector)->empty());
}

// unfinished_only: a task leaves the list when a status write finishes it, and comes back if one
// takes it out of a finished phase (a retry is written as Queued); an Apply (spec, labels) keeps
// what the status says; other kinds never finish.
TEST_P(StoreTest, ListUnfinishedOnlyLeavesOutFinishedTasks) {
  auto task = [](const std::string& name, const std::string& ns = "default") {
    Object t = api::MakeObject(Kind::kAgentTask, name, ns);
    t.agent_task_spec().worker_ref = "w";
    t.agent_task_spec().input = "hi";
    return t;
  };
  MustApply({task("a"), task("b"), task("c"), task("d", "other"), Sandbox("s")});
  auto set_phase = [&](const std::string& name, api::TaskPhase phase) {
    Object o = MustGet(Key(name, Kind::kAgentTask));
    o.agent_task_status().phase = phase;
    auto updated = store_->UpdateStatus(o);
    ASSERT_TRUE(updated.ok()) << updated.status();
  };
  set_phase("a", api::TaskPhase::kSucceeded);
  set_phase("b", api::TaskPhase::kRunning);
  set_phase("c", api::TaskPhase::kTimedOut);
  auto names = [&](ListOptions options) {
    options.unfinished_only = true;
    auto listed = store_->List(options);
    EXPECT_TRUE(listed.ok()) << listed.status();
    std::vector<std::string> out;
    for (const Object& o : listed.ok() ? *listed : std::vector<Object>{}) {
      out.push_back(o.metadata.name);
    }
    return out;
  };
  ListOptions tasks_in_default;
  tasks_in_default.kind = Kind::kAgentTask;
  tasks_in_default.namespace_ = "default";
  EXPECT_THAT(names(tasks_in_default), ElementsAre("b"));
  EXPECT_THAT(names({}), ElementsAre("s", "b", "d"));     // by kind: Sandbox before AgentTask
  EXPECT_EQ(store_->List(tasks_in_default)->size(), 3u);  // without the option: all of them

  // A re-apply of the finished task (a label) leaves it finished.
  Object relabelled = task("a");
  relabelled.metadata.labels = {{"team", "infra"}};
  MustApply({relabelled});
  EXPECT_THAT(names(tasks_in_default), ElementsAre("b"));
  // A status write that takes it out of a finished phase brings it back; finishing removes it.
  set_phase("a", api::TaskPhase::kQueued);
  set_phase("b", api::TaskPhase::kFailed);
  EXPECT_THAT(names(tasks_in_default), ElementsAre("a"));
  // Labels still select among the unfinished ones.
  ListOptions infra = tasks_in_default;
  infra.label_selector = {{"team", "infra"}};
  EXPECT_THAT(names(infra), ElementsAre("a"));
  infra.label_selector = {{"team", "gpu"}};
  EXPECT_TRUE(names(infra).empty());
}

TEST_P(StoreTest, WatchReturnsEveryChangeInOrderWithTheObject) {
  MustApply({Sandbox("a"), Sandbox("b")});
  Object a = MustGet(Key("a"));
  a.sandbox_status().state = "RUNNING";
  a.sandbox_status().conditions.push_back(
      {"Ready", api::ConditionStatus::kTrue, "Running", "ok", "2026-09-01T12:00:00Z", 1});
  ASSERT_TRUE(store_->UpdateStatus(a).ok());
  ASSERT_TRUE(store_->Delete(Key("b")).ok());

  auto changes = store_->WatchSince(0);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*changes)[i].revision, i + 1);
  }
  EXPECT_EQ((*changes)[0].type, Store::ChangeType::kAdded);
  EXPECT_EQ((*changes)[1].type, Store::ChangeType::kAdded);
  EXPECT_EQ((*changes)[2].type, Store::ChangeType::kModified);
  EXPECT_EQ((*changes)[3].type, Store::ChangeType::kDeleted);
  ASSERT_TRUE((*changes)[2].object.has_value());
  EXPECT_EQ(*(*changes)[2].object, MustGet(Key("a")));

  auto limited = store_->WatchSince(1, 2);
  ASSERT_TRUE(limited.ok());
  ASSERT_EQ(limited->size(), 2u);
  EXPECT_EQ((*limited)[0].revision, 2);
  EXPECT_EQ((*limited)[1].revision, 3);
}

// A wake hint (#25: a webhook received by a replica that does not hold the object's workspace)
// is one write that changes only the resourceVersion, logged as a kModified change marked
// wake_hint; ordinary changes are not marked; a missing object is kNotFound and writes nothing.
TEST_P(StoreTest, AWakeHintIsAMarkedChangeOfNothingButTheResourceVersion) {
  MustApply({Sandbox("a")});
  const Object before = MustGet(Key("a"));
  const int64_t revision = Revision();

  auto hinted = store_->PostWakeHint(Key("a"));
  ASSERT_TRUE(hinted.ok()) << hinted.status();
  EXPECT_EQ(hinted->metadata.resource_version, revision + 1);
  EXPECT_EQ(hinted->metadata.generation, before.metadata.generation);
  EXPECT_EQ(hinted->sandbox_spec().image, "python:3.12");
  EXPECT_EQ(MustGet(Key("a")).metadata.resource_version, revision + 1);

  Object status = MustGet(Key("a"));
  status.sandbox_status().state = "RUNNING";
  ASSERT_TRUE(store_->UpdateStatus(status).ok());
  auto changes = store_->WatchSince(revision);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 2u);
  EXPECT_EQ((*changes)[0].type, Store::ChangeType::kModified);
  EXPECT_EQ((*changes)[0].key, Key("a"));
  EXPECT_TRUE((*changes)[0].wake_hint);
  ASSERT_TRUE((*changes)[0].object.has_value());
  EXPECT_EQ((*changes)[0].object->metadata.resource_version, revision + 1);
  EXPECT_FALSE((*changes)[1].wake_hint);

  // A stale reader's CAS write loses to the hint, as to any write.
  Object stale = before;
  stale.sandbox_status().state = "STOPPED";
  EXPECT_EQ(store_->UpdateStatus(stale).status().code(), StatusCode::kAborted);

  const int64_t after = Revision();
  EXPECT_EQ(store_->PostWakeHint(Key("missing")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Revision(), after);
}

TEST_P(StoreTest, WaitForChangeWakesOnOwnWritesAndTimesOut) {
  ASSERT_TRUE(store_->WatchSince(0).ok());
  EXPECT_FALSE(store_->WaitForChange(std::chrono::milliseconds(30)));
  MustApply({Sandbox("a")});
  EXPECT_TRUE(store_->WaitForChange(std::chrono::seconds(5)));
  // Consumed: the next wait times out again.
  EXPECT_FALSE(store_->WaitForChange(std::chrono::milliseconds(30)));
}

TEST_P(StoreTest, EventsAreDeduplicated) {
  Store::Event event;
  event.involved = Key("a");
  event.type = "Warning";
  event.reason = "ExternalDeletion";
  event.message = "sandbox default-a vanished";
  ASSERT_TRUE(store_->RecordEvent(event).ok());
  clock_.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(store_->RecordEvent(event).ok());
  Store::Event other = event;
  other.involved = Key("b");
  ASSERT_TRUE(store_->RecordEvent(other).ok());
  Store::Event different_message = event;
  different_message.message = "something else";
  ASSERT_TRUE(store_->RecordEvent(different_message).ok());

  auto for_a = store_->ListEvents(Key("a"));
  ASSERT_TRUE(for_a.ok()) << for_a.status();
  ASSERT_EQ(for_a->size(), 2u);
  EXPECT_EQ((*for_a)[0].count, 2);
  EXPECT_EQ((*for_a)[0].first_seen, "2026-09-01T12:00:00Z");
  EXPECT_EQ((*for_a)[0].last_seen, "2026-09-01T12:00:30Z");
  EXPECT_EQ((*for_a)[0].reason, "ExternalDeletion");
  EXPECT_EQ((*for_a)[1].count, 1);
  EXPECT_EQ((*for_a)[1].message, "something else");

  auto all = store_->ListEvents(std::nullopt);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
  EXPECT_EQ(Revision(), 0);  // events are not object writes
}

TEST_P(StoreTest, InventoryKeepsAbandonedRecords) {
  Store::InventoryRecord record;
  record.workspace = "default/default";
  record.resource_type = "session";
  record.external_id = "sess_1";
  record.state = Store::InventoryState::kAbandoned;
  record.owner = {api::Kind::kAgentWorker, "default", "w"};
  record.owner_uid = "uid-w";
  ASSERT_TRUE(store_->PutInventory(record).ok());
  auto got = store_->GetInventory("default/default", "session", "sess_1");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->state, Store::InventoryState::kAbandoned);
  EXPECT_EQ((*got)->owner.kind, api::Kind::kAgentWorker);
}

// The usage ledger (DESIGN §8.2): one record per (task uid, attempt), first write wins, summed
// per workspace over a period, kept when the task is deleted, and no revision bump.
TEST_P(StoreTest, UsageRecordsAreKeptOncePerAttemptAndSummedPerWorkspaceAndPeriod) {
  Object task = api::MakeObject(Kind::kAgentTask, "t");
  task.agent_task_spec().worker_ref = "w";
  task.agent_task_spec().input = "hi";
  MustApply({task});
  const std::string uid = MustGet(api::KeyOf(task)).metadata.uid;
  const int64_t revision = Revision();
  Store::UsageRecord first{"default/ws", uid, 1, api::KeyOf(task), 1'000, 100, 40, 30, 5, 0, false};
  ASSERT_TRUE(store_->RecordUsage(first).ok());
  // The same attempt again (a pass retried after a conflict): ignored, the first stays.
  Store::UsageRecord again = first;
  again.input_tokens = 999;
  ASSERT_TRUE(store_->RecordUsage(again).ok());
  Store::UsageRecord last = first;
  last.attempt = 2;
  last.finished_at_ms = 5'000;
  last.task_finished = true;
  ASSERT_TRUE(store_->RecordUsage(last).ok());
  Store::UsageRecord other = first;
  other.workspace = "default/other";
  other.task_uid = "uid-other";
  ASSERT_TRUE(store_->RecordUsage(other).ok());
  EXPECT_EQ(Revision(), revision);

  auto both = store_->SumUsage("default/ws", 0, 10'000);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(*both, (api::UsageSum{200, 80, 60, 10, 0, 1}));
  // [from, to): the second attempt ended at 5 s, outside [0, 5 s).
  EXPECT_EQ(*store_->SumUsage("default/ws", 0, 5'000), (api::UsageSum{100, 40, 30, 5, 0, 0}));
  EXPECT_EQ(*store_->SumUsage("default/none", 0, 10'000), api::UsageSum{});

  ASSERT_TRUE(store_->Delete(api::KeyOf(task)).ok());
  EXPECT_EQ(*store_->SumUsage("default/ws", 0, 10'000), *both);
}

TEST_P(StoreTest, InventoryCrud) {
  Store::InventoryRecord record;
  record.workspace = "default";
  record.resource_type = "sandbox";
  record.external_id = "default-a";
  record.state = Store::InventoryState::kIntent;
  record.owner = Key("a");
  record.owner_uid = "uid-a";
  ASSERT_TRUE(store_->PutInventory(record).ok());

  auto got = store_->GetInventory("default", "sandbox", "default-a");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->state, Store::InventoryState::kIntent);
  EXPECT_EQ((*got)->owner, Key("a"));
  EXPECT_EQ((*got)->owner_uid, "uid-a");
  EXPECT_EQ((*got)->created_at, "2026-09-01T12:00:00Z");

  clock_.Advance(std::chrono::seconds(10));
  record.state = Store::InventoryState::kLive;
  ASSERT_TRUE(store_->PutInventory(record).ok());
  got = store_->GetInventory("default", "sandbox", "default-a");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->state, Store::InventoryState::kLive);
  EXPECT_EQ((*got)->created_at, "2026-09-01T12:00:00Z");  // kept on replace
  EXPECT_EQ((*got)->updated_at, "2026-09-01T12:00:10Z");

  Store::InventoryRecord elsewhere = record;
  elsewhere.workspace = "prod";
  elsewhere.resource_type = "session";
  elsewhere.external_id = "sess_1";
  ASSERT_TRUE(store_->PutInventory(elsewhere).ok());
  EXPECT_EQ(store_->ListInventory(std::nullopt)->size(), 2u);
  auto in_prod = store_->ListInventory("prod");
  ASSERT_TRUE(in_prod.ok());
  ASSERT_EQ(in_prod->size(), 1u);
  EXPECT_EQ((*in_prod)[0].external_id, "sess_1");

  ASSERT_TRUE(store_->DeleteInventory("default", "sandbox", "default-a").ok());
  got = store_->GetInventory("default", "sandbox", "default-a");
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(got->has_value());
  EXPECT_TRUE(store_->DeleteInventory("default", "sandbox", "default-a").ok());  // absent is OK
  EXPECT_EQ(store_->ListInventory(std::nullopt)->size(), 1u);
}

TEST_P(StoreTest, LeaseAcquireRenewExpireAndTakeover) {
  using std::chrono::seconds;
  auto acquire = [&](const std::string& holder) {
    auto held = store_->TryAcquireLease("sbxd", holder, seconds(15));
    EXPECT_TRUE(held.ok()) << held.status();
    return held.ok() && *held;
  };
  EXPECT_TRUE(acquire("a"));
  EXPECT_FALSE(acquire("b"));
  clock_.Advance(seconds(10));
  EXPECT_TRUE(acquire("a"));  // renew: expires 15 s from now
  clock_.Advance(seconds(10));
  EXPECT_FALSE(acquire("b"));  // still held thanks to the renewal
  clock_.Advance(seconds(6));
  EXPECT_TRUE(acquire("b"));  // expired: taken over
  EXPECT_FALSE(acquire("a"));

  ASSERT_TRUE(store_->ReleaseLease("sbxd", "a").ok());  // not the holder: no effect
  EXPECT_FALSE(acquire("a"));
  ASSERT_TRUE(store_->ReleaseLease("sbxd", "b").ok());
  EXPECT_TRUE(acquire("a"));
  EXPECT_EQ(store_->TryAcquireLease("sbxd", "", seconds(1)).status().code(),
            StatusCode::kInvalidArgument);
}

// Fencing tokens (DESIGN §7.4): one token per tenure, never reused — not after an expiry, not
// after a release (the row stays), not by the same holder coming back.
TEST_P(StoreTest, LeaseTokensGrowWithEveryNewTenureAndSurviveRelease) {
  using std::chrono::seconds;
  auto acquire = [&](const std::string& holder) -> std::optional<int64_t> {
    auto token = store_->AcquireLease("workspace/team/w1", holder, seconds(15));
    EXPECT_TRUE(token.ok()) << token.status();
    return token.ok() ? *token : std::nullopt;
  };
  EXPECT_EQ(acquire("a"), 1);
  EXPECT_EQ(acquire("a"), 1);  // a renewal keeps the tenure
  EXPECT_EQ(acquire("b"), std::nullopt);
  clock_.Advance(seconds(16));
  EXPECT_EQ(acquire("b"), 2);  // taken over after expiry
  ASSERT_TRUE(store_->ReleaseLease("workspace/team/w1", "b").ok());
  EXPECT_EQ(acquire("b"), 3);  // the same holder after a release: a new tenure
  clock_.Advance(seconds(16));
  EXPECT_EQ(acquire("b"), 4);  // the same holder after its own expiry: a new tenure
  auto lease = store_->GetLease("workspace/team/w1");
  ASSERT_TRUE(lease.ok() && lease->has_value());
  EXPECT_EQ((*lease)->token, 4);
  EXPECT_EQ((*lease)->holder, "b");
}

TEST_P(StoreTest, ListLeasesByPrefixSkipsReleasedOnesAndTakesThePrefixLiterally) {
  using std::chrono::seconds;
  for (const char* name : {"member/r1", "member/r2", "members", "workspace/a/w", "member%/x"}) {
    ASSERT_TRUE(store_->TryAcquireLease(name, "r1", seconds(15)).ok());
  }
  ASSERT_TRUE(store_->ReleaseLease("member/r2", "r1").ok());
  clock_.Advance(seconds(20));  // expired leases are still listed (the caller judges expiry)
  auto members = store_->ListLeases("member/");
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 1u);
  EXPECT_EQ((*members)[0].name, "member/r1");
  EXPECT_EQ((*members)[0].holder, "r1");
  EXPECT_EQ((*members)[0].token, 1);
  auto literal = store_->ListLeases("member%");
  ASSERT_TRUE(literal.ok()) << literal.status();
  ASSERT_EQ(literal->size(), 1u);
  EXPECT_EQ((*literal)[0].name, "member%/x");
  EXPECT_EQ(store_->ListLeases("")->size(), 4u);
}

TEST_P(StoreTest, AllKindsRoundTrip) {
  Object workspace = api::MakeObject(Kind::kWorkspace, "default");
  workspace.workspace_spec().databricks.host = "https://example";
  workspace.workspace_spec().databricks.token_from.env = "DATABRICKS_TOKEN";
  Object worker = api::MakeObject(Kind::kAgentWorker, "w");
  worker.agent_worker_spec().sandbox = api::SandboxSpec{};
  worker.agent_worker_spec().sandbox->image = "img";
  worker.agent_worker_spec().agent.model = "gpt";
  worker.agent_worker_spec().executor.args = {"--x", "y"};
  auto results = MustApply({workspace, worker});
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(MustGet(Key("default", Kind::kWorkspace)).workspace_spec(), workspace.workspace_spec());
  EXPECT_EQ(MustGet(Key("w", Kind::kAgentWorker)).agent_worker_spec(), worker.agent_worker_spec());
}

// ---- bounded growth (issue #12) -------------------------------------------------------------

// Writes a new status.state to `name`, returning the stored object.
Object WriteState(Store& store, const ObjectKey& key, const std::string& state) {
  auto object = store.Get(key);
  EXPECT_TRUE(object.ok()) << object.status();
  if (!object.ok()) {
    return Object{};
  }
  object->sandbox_status().state = state;
  auto updated = store.UpdateStatus(*object);
  EXPECT_TRUE(updated.ok()) << updated.status();
  return updated.ok() ? *updated : Object{};
}

std::vector<int64_t> Revisions(const std::vector<Store::Change>& changes) {
  std::vector<int64_t> out;
  for (const Store::Change& change : changes) {
    out.push_back(change.revision);
  }
  return out;
}

TEST_P(StoreTest, WatchingFromACompactedRevisionIsOutOfRangeNotASilentGap) {
  MustApply({Sandbox("a"), Sandbox("b"), Sandbox("c")});  // revisions 1-3
  WriteState(*store_, Key("a"), "PENDING");               // 4
  WriteState(*store_, Key("b"), "PENDING");               // 5
  auto deleted = store_->CompactChanges(3);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 3);

  for (int64_t behind : {0, 1, 2}) {
    auto changes = store_->WatchSince(behind);
    ASSERT_FALSE(changes.ok()) << "since " << behind;
    EXPECT_EQ(changes.status().code(), StatusCode::kOutOfRange);
    EXPECT_THAT(changes.status().message(), HasSubstr("too old"));
    EXPECT_THAT(changes.status().message(), HasSubstr("compacted up to revision 3"));
  }
  auto from_compaction_point = store_->WatchSince(3);
  ASSERT_TRUE(from_compaction_point.ok()) << from_compaction_point.status();
  EXPECT_THAT(Revisions(*from_compaction_point), ElementsAre(4, 5));
  auto limited = store_->WatchSince(3, 1);
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_THAT(Revisions(*limited), ElementsAre(4));

  // Compacting everything: an up-to-date watcher is fine, one that is behind is told so, and
  // the log goes on from there.
  deleted = store_->CompactChanges(1000);  // clamped to the current revision
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);
  auto up_to_date = store_->WatchSince(5);
  ASSERT_TRUE(up_to_date.ok()) << up_to_date.status();
  EXPECT_TRUE(up_to_date->empty());
  EXPECT_EQ(store_->WatchSince(4).status().code(), StatusCode::kOutOfRange);
  WriteState(*store_, Key("c"), "PENDING");  // 6
  auto after = store_->WatchSince(5);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(Revisions(*after), ElementsAre(6));
  EXPECT_EQ(store_->WatchSince(4).status().code(), StatusCode::kOutOfRange);

  auto stats = ReadTestStoreStats(*store_);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->revision, 6);
  EXPECT_EQ(stats->compacted_revision, 5);
  EXPECT_EQ(stats->changes, 1);
}

TEST_P(StoreTest, CompactingBelowTheCompactionPointDeletesNothing) {
  MustApply({Sandbox("a"), Sandbox("b")});
  ASSERT_TRUE(store_->CompactChanges(2).ok());
  WriteState(*store_, Key("a"), "PENDING");
  auto deleted = store_->CompactChanges(1);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 0);
  auto changes = store_->WatchSince(2);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_THAT(Revisions(*changes), ElementsAre(3));
}

class StoreEventBoundTest : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, StoreEventBoundTest, StoreBackends(), BackendName);

TEST_P(StoreEventBoundTest, KeepsOnlyTheNewestEventsOfEachObject) {
  testing::FakeClock clock;
  auto store =
      OpenTestStore(GetParam(), TestStoreOptions{.clock = &clock, .max_events_per_object = 3});
  ASSERT_TRUE(store.ok()) << store.status();
  auto record = [&](const std::string& name, const std::string& message) {
    Store::Event event;
    event.involved = Key(name);
    event.reason = "Test";
    event.message = message;
    event.first_seen = event.last_seen = FormatRfc3339(clock.Now());
    ASSERT_TRUE((*store)->RecordEvent(event).ok());
    clock.Advance(std::chrono::seconds(1));
  };
  record("other", "o1");
  for (int i = 1; i <= 5; ++i) {
    record("busy", "m" + std::to_string(i));
  }
  record("busy", "m2");  // dropped before, now seen again: the newest

  auto busy = (*store)->ListEvents(Key("busy"));
  ASSERT_TRUE(busy.ok()) << busy.status();
  std::vector<std::string> messages;
  for (const Store::Event& e : *busy) {
    messages.push_back(e.message);
  }
  EXPECT_THAT(messages, ElementsAre("m4", "m5", "m2"));
  auto other = (*store)->ListEvents(Key("other"));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->size(), 1u);
}

TEST_P(StoreTest, ExpireEventsDropsWhatWasLastSeenBeforeTheCutoff) {
  auto record = [&](const std::string& message) {
    Store::Event event;
    event.involved = Key("a");
    event.reason = "Test";
    event.message = message;
    event.first_seen = event.last_seen = FormatRfc3339(clock_.Now());
    ASSERT_TRUE(store_->RecordEvent(event).ok());
  };
  record("old");
  record("repeated");
  clock_.Advance(std::chrono::minutes(30));
  record("repeated");  // seen again: its last_seen is recent
  clock_.Advance(std::chrono::minutes(31));
  record("new");

  auto deleted = store_->ExpireEvents(clock_.Now() - std::chrono::hours(1));
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  auto events = store_->ListEvents(std::nullopt);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].message, "repeated");
  EXPECT_EQ((*events)[0].count, 2);
  EXPECT_EQ((*events)[1].message, "new");
}

TEST_P(StoreTest, GetLeaseNamesTheHolderUntilItIsReleased) {
  auto none = store_->GetLease("sbxd");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(store_->TryAcquireLease("sbxd", "sbxd-a", std::chrono::seconds(15)).ok());
  auto held = store_->GetLease("sbxd");
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(held->has_value());
  EXPECT_EQ((*held)->name, "sbxd");
  EXPECT_EQ((*held)->holder, "sbxd-a");
  EXPECT_EQ((*held)->renewed_at, "2026-09-01T12:00:00Z");
  EXPECT_EQ((*held)->expires_at, clock_.Now() + std::chrono::seconds(15));
  ASSERT_TRUE(store_->ReleaseLease("sbxd", "sbxd-a").ok());
  auto released = store_->GetLease("sbxd");
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_FALSE(released->has_value());
}

// limits.maxConcurrentTasks: slots per workspace, taken atomically by two stores on one database
// (two sbxd replicas), held again by their holder, given back by uid.
TEST_P(StoreTest, TaskSlotsAreNeverMoreThanTheLimitAcrossTwoStoresOnOneDatabase) {
  const std::string dir = ::testing::TempDir() + "/slots-" + BackendName({GetParam(), 0}) + "-" +
                          std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto stores = OpenTestStorePair(GetParam(), dir + "/sbx.db");
  ASSERT_TRUE(stores.ok()) << stores.status();
  Store& a = *stores->first;
  Store& b = *stores->second;
  auto take = [](Store& s, const std::string& ws, const std::string& name) {
    auto grant = s.AcquireTaskSlot(ws, Key(name, Kind::kAgentTask), "uid-" + name, 2);
    EXPECT_TRUE(grant.ok()) << grant.status();
    return grant.ok() ? *grant : Store::SlotGrant{};
  };
  EXPECT_TRUE(take(a, "default/ws", "t1").granted);
  EXPECT_TRUE(take(b, "default/ws", "t1").granted);  // its holder, again: still one slot
  EXPECT_TRUE(take(b, "default/ws", "t2").granted);
  const Store::SlotGrant full = take(a, "default/ws", "t3");
  EXPECT_FALSE(full.granted);
  ASSERT_EQ(full.holders.size(), 2u);
  EXPECT_EQ(full.holders[0].first, Key("t1", Kind::kAgentTask));
  EXPECT_EQ(full.holders[0].second, "uid-t1");
  EXPECT_EQ(full.holders[1].second, "uid-t2");
  EXPECT_TRUE(take(a, "default/other", "t3").granted);  // another workspace's slots
  ASSERT_TRUE(b.ReleaseTaskSlot("uid-t1").ok());
  ASSERT_TRUE(b.ReleaseTaskSlot("uid-none").ok());   // none held: fine
  EXPECT_TRUE(take(a, "default/ws", "t4").granted);  // t1's slot
  EXPECT_FALSE(take(b, "default/ws", "t5").granted);

  // Sixteen takers at once, half on each store, for a workspace with a limit of 3.
  std::atomic<int> granted{0};
  std::vector<std::thread> takers;
  for (int i = 0; i < 16; ++i) {
    takers.emplace_back([&, i] {
      Store& s = i % 2 == 0 ? a : b;
      auto grant = s.AcquireTaskSlot("default/race", Key("r" + std::to_string(i), Kind::kAgentTask),
                                     "uid-r" + std::to_string(i), 3);
      EXPECT_TRUE(grant.ok()) << grant.status();
      if (grant.ok() && grant->granted) {
        ++granted;
      }
    });
  }
  for (std::thread& t : takers) {
    t.join();
  }
  EXPECT_EQ(granted.load(), 3);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sbx::controller
