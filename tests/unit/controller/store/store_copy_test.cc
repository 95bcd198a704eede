// Copying a whole store (store_copy.h, `sbxctl migrate`), between the backends of
// store_backends.h: SQLite → SQLite, SQLite → PostgreSQL and PostgreSQL → SQLite. A populated
// source (objects of several kinds, one being deleted behind a finalizer, an applyset, inventory
// in every state, events, task logs with dropped entries, binary artifacts, a lease) is copied
// and compared field by field, uids included; then the copy is used (prune by applyset, a
// compare-and-swap, a watch). Refusals and failures leave the destination as it was.
#include "controller/store/store_copy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/rfc3339.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/store/store_backends.h"

namespace sbx::controller {
namespace {

using api::Kind;
using api::StatusCode;
using ::testing::HasSubstr;
using LogKind = Store::TaskLogKind;

// Source backend, destination backend (store_backends.h names).
struct Pair {
  std::string from;
  std::string to;
};

void PrintTo(const Pair& pair, std::ostream* os) { *os << pair.from << " -> " << pair.to; }

std::string PairName(const ::testing::TestParamInfo<Pair>& info) {
  return info.param.from + "_to_" + info.param.to;
}

Store::TaskLogEntry Entry(LogKind kind, std::string text, std::string item = "",
                          std::optional<int64_t> exit_code = std::nullopt) {
  Store::TaskLogEntry e;
  e.kind = kind;
  e.text = std::move(text);
  e.item_id = std::move(item);
  e.exit_code = exit_code;
  return e;
}

Store::InventoryRecord Inventory(const std::string& id, Store::InventoryState state,
                                 const ObjectKey& owner, const std::string& owner_uid) {
  Store::InventoryRecord r;
  r.workspace = "ws";
  r.resource_type = "sandbox";
  r.external_id = id;
  r.state = state;
  r.owner = owner;
  r.owner_uid = owner_uid;
  return r;
}

class StoreCopyTest : public ::testing::TestWithParam<Pair> {
 protected:
  void SetUp() override {
    // A small log bound in the source, so that a task log has dropped entries (gaps in seq).
    auto from = OpenTestStore(GetParam().from,
                              TestStoreOptions{.clock = &clock_, .task_log_max_bytes = 40});
    ASSERT_TRUE(from.ok()) << from.status();
    from_ = std::move(from).value();
    auto to = OpenTestStore(GetParam().to, TestStoreOptions{.clock = &clock_});
    ASSERT_TRUE(to.ok()) << to.status();
    to_ = std::move(to).value();
  }

  Object MustGet(Store& store, const ObjectKey& key) {
    auto object = store.Get(key);
    EXPECT_TRUE(object.ok()) << object.status();
    return object.ok() ? *object : Object{};
  }

  // Fills the source with something of everything the store keeps.
  void Populate() {
    Object ws = api::MakeObject(Kind::kWorkspace, "ws");
    ws.workspace_spec().databricks.host = "https://example.cloud.databricks.com";
    Object a = api::MakeObject(Kind::kSandbox, "a");
    a.sandbox_spec().image = "python:3.12";
    a.metadata.labels = {{"app", "demo"}, {"tier", "1"}};
    a.metadata.annotations = {{"note", "kept"}};
    Object b = api::MakeObject(Kind::kSandbox, "b", "team");
    b.sandbox_spec().image = "python:3.11";
    ApplyOptions in_set;
    in_set.applyset = "gitops";
    ASSERT_TRUE(from_->Apply({ws, a, b}, in_set).ok());
    clock_.Advance(std::chrono::seconds(5));
    Object worker = api::MakeObject(Kind::kAgentWorker, "w");
    worker.agent_worker_spec().sandbox_ref = "a";
    Object task = api::MakeObject(Kind::kAgentTask, "t");
    task.agent_task_spec().worker_ref = "w";
    task.agent_task_spec().input = "hi";
    Object task2 = api::MakeObject(Kind::kAgentTask, "t2");
    task2.agent_task_spec().worker_ref = "w";
    task2.agent_task_spec().input = "bye";
    auto applied = from_->Apply({worker, task, task2}, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
    task_uid_ = (*applied)[1].object.metadata.uid;
    task2_uid_ = (*applied)[2].object.metadata.uid;

    // A second generation and a status, written by the controller.
    a.sandbox_spec().image = "python:3.13";
    ASSERT_TRUE(from_->Apply({a}, in_set).ok());
    Object stored_a = MustGet(*from_, {Kind::kSandbox, "default", "a"});
    stored_a.sandbox_status().state = "RUNNING";
    stored_a.sandbox_status().observed_generation = stored_a.metadata.generation;
    ASSERT_TRUE(from_->UpdateStatus(stored_a).ok());

    // Being deleted: a finalizer holds it, deletionTimestamp set.
    Object stored_b = MustGet(*from_, {Kind::kSandbox, "team", "b"});
    stored_b.metadata.finalizers.push_back(std::string(api::kControllerFinalizer));
    ASSERT_TRUE(from_->UpdateControllerMetadata(stored_b).ok());
    clock_.Advance(std::chrono::seconds(5));
    auto deleted = from_->Delete({Kind::kSandbox, "team", "b"});
    ASSERT_TRUE(deleted.ok()) << deleted.status();
    ASSERT_EQ(*deleted, DeleteOutcome::kMarkedForDeletion);

    // Inventory in every state.
    const ObjectKey a_key{Kind::kSandbox, "default", "a"};
    const std::string a_uid = MustGet(*from_, a_key).metadata.uid;
    for (auto [id, state] : {std::pair{"sb-intent", Store::InventoryState::kIntent},
                             std::pair{"sb-live", Store::InventoryState::kLive},
                             std::pair{"sb-deleting", Store::InventoryState::kDeleting},
                             std::pair{"sb-abandoned", Store::InventoryState::kAbandoned}}) {
      ASSERT_TRUE(from_->PutInventory(Inventory(id, state, a_key, a_uid)).ok());
      clock_.Advance(std::chrono::seconds(1));
    }

    // Events, one repeated (count 2), one message with bytes PostgreSQL's text would refuse.
    Store::Event e;
    e.involved = a_key;
    e.reason = "Created";
    e.message = "sandbox created";
    ASSERT_TRUE(from_->RecordEvent(e).ok());
    clock_.Advance(std::chrono::seconds(1));
    ASSERT_TRUE(from_->RecordEvent(e).ok());
    e.type = "Warning";
    e.reason = "SetupFailed";
    e.message = std::string("exit 1: \xff\x00 binary", 18);
    ASSERT_TRUE(from_->RecordEvent(e).ok());

    // Task logs: one within the bound, one past it (entries dropped).
    const ObjectKey t_key{Kind::kAgentTask, "default", "t"};
    ASSERT_TRUE(from_
                    ->AppendTaskLog(t_key, task_uid_,
                                    {Entry(LogKind::kStatus, "submitted"),
                                     Entry(LogKind::kCommand, "$ ls", "c1"),
                                     Entry(LogKind::kCommandResult, "a\n", "c1", 0)})
                    .ok());
    const ObjectKey t2_key{Kind::kAgentTask, "default", "t2"};
    ASSERT_TRUE(from_
                    ->AppendTaskLog(t2_key, task2_uid_,
                                    {Entry(LogKind::kOutputDelta, "0123456789012345678901", "c"),
                                     Entry(LogKind::kOutputDelta, "abcdefghij", "c"),
                                     Entry(LogKind::kCommandResult, "out", "c", 3),
                                     Entry(LogKind::kAssistant, "done, all of it", "m")})
                    .ok());
    auto page = from_->ReadTaskLog(task2_uid_);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_GT(page->dropped, 0);  // the test means to copy a log with gaps

    // Artifacts, one binary.
    const std::string binary("\x00\x01\xfe\xff", 4);
    ASSERT_TRUE(from_->PutArtifact(t_key, task_uid_, {"out/report.txt", 5, "x", "hello"}).ok());
    ASSERT_TRUE(from_->PutArtifact(t_key, task_uid_, {"out/blob.bin", 4, "y", binary}).ok());
    // Two attempts of one task in the usage ledger (DESIGN §8.2), the second its last.
    Store::UsageRecord usage{"default/ws", task_uid_, 1, t_key, 1'000, 100, 40, 50, 10, 0, false};
    ASSERT_TRUE(from_->RecordUsage(usage).ok());
    usage.attempt = 2;
    usage.finished_at_ms = 2'000;
    usage.task_finished = true;
    ASSERT_TRUE(from_->RecordUsage(usage).ok());
    // Two audit records (DESIGN §8.3), 5 s apart.
    Store::AuditRecord exec;
    exec.actor = "root";
    exec.role = "admin";
    exec.verb = "exec";
    exec.object = t_key;
    exec.result = "ok";
    exec.source = "api";
    ASSERT_TRUE(from_->AppendAudit(exec).ok());
    clock_.Advance(std::chrono::seconds(5));
    exec.verb = "delete";
    exec.result = "NOT_FOUND";
    ASSERT_TRUE(from_->AppendAudit(exec).ok());

    // A notification not yet delivered (DESIGN §8.3): a Notifier of failures, a failed task,
    // one attempt that failed. A migrate between two deliveries must not lose it.
    Object failures = api::MakeObject(Kind::kNotifier, "failures");
    failures.notifier_spec().url_from.env = "SBX_SECRET_DEFAULT_HOOK";
    failures.notifier_spec().signing_secret_from.env = "SBX_SECRET_DEFAULT_SIGNING";
    failures.notifier_spec().events = {"TaskFailed"};
    ASSERT_TRUE(from_->Apply({failures}, {}).ok());
    Object failed = MustGet(*from_, t2_key);
    failed.agent_task_status().phase = api::TaskPhase::kFailed;
    failed.agent_task_status().worker = "w";
    ASSERT_TRUE(from_->UpdateStatus(failed).ok());
    auto pending = from_->ListDueNotifications(api::UnixMillis(clock_.Now()), 0);
    ASSERT_TRUE(pending.ok()) << pending.status();
    ASSERT_EQ(pending->size(), 1u);
    ASSERT_TRUE(from_
                    ->RetryNotification(pending->front().id, 1,
                                        api::UnixMillis(clock_.Now()) + 30'000, "HTTP 503")
                    .ok());

    // An sbxd that ran on the source and has since stopped: its lease is expired.
    ASSERT_TRUE(from_->TryAcquireLease("sbxd", "host-1/pid-7", std::chrono::seconds(10)).ok());
    clock_.Advance(std::chrono::seconds(30));
  }

  void ExpectSameStores() {
    auto from_objects = from_->List({});
    auto to_objects = to_->List({});
    ASSERT_TRUE(from_objects.ok()) << from_objects.status();
    ASSERT_TRUE(to_objects.ok()) << to_objects.status();
    ASSERT_EQ(from_objects->size(), to_objects->size());
    for (size_t i = 0; i < from_objects->size(); ++i) {
      const Object& f = (*from_objects)[i];
      const Object& t = (*to_objects)[i];
      EXPECT_EQ(f.metadata.uid, t.metadata.uid);
      EXPECT_EQ(f.metadata.resource_version, t.metadata.resource_version);
      EXPECT_EQ(f.metadata.generation, t.metadata.generation);
      EXPECT_EQ(f.metadata.creation_timestamp, t.metadata.creation_timestamp);
      EXPECT_EQ(f.metadata.deletion_timestamp, t.metadata.deletion_timestamp);
      EXPECT_EQ(f.metadata.finalizers, t.metadata.finalizers);
      EXPECT_EQ(f.metadata.labels, t.metadata.labels);
      EXPECT_EQ(f.metadata.annotations, t.metadata.annotations);
      EXPECT_EQ(f.metadata.owner_references, t.metadata.owner_references);
      // And everything else (spec, status): the whole object.
      EXPECT_EQ(f, t) << api::EncodeObjectJson(f) << "\n---\n" << api::EncodeObjectJson(t);
    }

    auto from_inventory = from_->ListInventory(std::nullopt);
    auto to_inventory = to_->ListInventory(std::nullopt);
    ASSERT_TRUE(from_inventory.ok() && to_inventory.ok());
    ASSERT_EQ(from_inventory->size(), 4u);
    ASSERT_EQ(from_inventory->size(), to_inventory->size());
    for (size_t i = 0; i < from_inventory->size(); ++i) {
      const auto& f = (*from_inventory)[i];
      const auto& t = (*to_inventory)[i];
      EXPECT_EQ(f.workspace, t.workspace);
      EXPECT_EQ(f.resource_type, t.resource_type);
      EXPECT_EQ(f.external_id, t.external_id);
      EXPECT_EQ(f.state, t.state) << f.external_id;
      EXPECT_EQ(f.owner, t.owner);
      EXPECT_EQ(f.owner_uid, t.owner_uid);
      EXPECT_EQ(f.created_at, t.created_at);
      EXPECT_EQ(f.updated_at, t.updated_at);
    }

    auto from_events = from_->ListEvents(std::nullopt);
    auto to_events = to_->ListEvents(std::nullopt);
    ASSERT_TRUE(from_events.ok() && to_events.ok());
    ASSERT_EQ(from_events->size(), 2u);
    ASSERT_EQ(from_events->size(), to_events->size());
    for (size_t i = 0; i < from_events->size(); ++i) {
      const auto& f = (*from_events)[i];
      const auto& t = (*to_events)[i];
      EXPECT_EQ(f.involved, t.involved);
      EXPECT_EQ(f.type, t.type);
      EXPECT_EQ(f.reason, t.reason);
      EXPECT_EQ(f.message, t.message);
      EXPECT_EQ(f.count, t.count);
      EXPECT_EQ(f.first_seen, t.first_seen);
      EXPECT_EQ(f.last_seen, t.last_seen);
    }

    for (const std::string& uid : {task_uid_, task2_uid_}) {
      auto f = from_->ReadTaskLog(uid);
      auto t = to_->ReadTaskLog(uid);
      ASSERT_TRUE(f.ok() && t.ok());
      EXPECT_FALSE(f->entries.empty());
      EXPECT_EQ(f->last_seq, t->last_seq);
      EXPECT_EQ(f->dropped, t->dropped);
      ASSERT_EQ(f->entries.size(), t->entries.size());
      for (size_t i = 0; i < f->entries.size(); ++i) {
        EXPECT_EQ(f->entries[i].seq, t->entries[i].seq);
        EXPECT_EQ(f->entries[i].kind, t->entries[i].kind);
        EXPECT_EQ(f->entries[i].item_id, t->entries[i].item_id);
        EXPECT_EQ(f->entries[i].text, t->entries[i].text);
        EXPECT_EQ(f->entries[i].exit_code, t->entries[i].exit_code);
        EXPECT_EQ(f->entries[i].at, t->entries[i].at);
      }
    }

    auto f_usage = from_->SumUsage("default/ws", 0, 10'000);
    auto t_usage = to_->SumUsage("default/ws", 0, 10'000);
    ASSERT_TRUE(f_usage.ok() && t_usage.ok());
    EXPECT_EQ(*f_usage, (api::UsageSum{200, 80, 100, 20, 0, 1}));
    EXPECT_EQ(*f_usage, *t_usage);
    // The period bound: only the first attempt ended before 1.5 s.
    EXPECT_EQ(*to_->SumUsage("default/ws", 0, 1'500), (api::UsageSum{100, 40, 50, 10, 0, 0}));

    auto f_audit = from_->ListAudit({});
    auto t_audit = to_->ListAudit({});
    ASSERT_TRUE(f_audit.ok() && t_audit.ok());
    ASSERT_EQ(f_audit->size(), 2u);
    ASSERT_EQ(f_audit->size(), t_audit->size());
    for (size_t i = 0; i < f_audit->size(); ++i) {
      const Store::AuditRecord& f = (*f_audit)[i];
      const Store::AuditRecord& t = (*t_audit)[i];
      EXPECT_EQ(f.id, t.id);
      EXPECT_EQ(f.time_ms, t.time_ms);
      EXPECT_EQ(f.actor, t.actor);
      EXPECT_EQ(f.verb, t.verb);
      EXPECT_EQ(f.object, t.object);
      EXPECT_EQ(f.result, t.result);
    }

    // Pending notifications, each with its webhook id (receivers deduplicate by it), times and
    // attempts: delivery goes on from the destination as it would have from the source.
    const int64_t later = api::UnixMillis(clock_.Now()) + 3'600'000;
    auto f_notifications = from_->ListDueNotifications(later, 0);
    auto t_notifications = to_->ListDueNotifications(later, 0);
    ASSERT_TRUE(f_notifications.ok() && t_notifications.ok());
    ASSERT_EQ(f_notifications->size(), 1u);
    ASSERT_EQ(f_notifications->size(), t_notifications->size());
    const Store::Notification& fn = f_notifications->front();
    const Store::Notification& tn = t_notifications->front();
    EXPECT_EQ(fn.webhook_id, tn.webhook_id);
    EXPECT_EQ(fn.notifier, tn.notifier);
    EXPECT_EQ(fn.notifier_uid, tn.notifier_uid);
    EXPECT_EQ(fn.object, tn.object);
    EXPECT_EQ(fn.object_uid, tn.object_uid);
    EXPECT_EQ(fn.reason, "TaskFailed");
    EXPECT_EQ(fn.reason, tn.reason);
    EXPECT_EQ(fn.type, tn.type);
    EXPECT_EQ(fn.message, tn.message);
    EXPECT_EQ(fn.task_json, tn.task_json);
    EXPECT_EQ(fn.time_ms, tn.time_ms);
    EXPECT_EQ(fn.due_ms, tn.due_ms);
    EXPECT_EQ(fn.attempts, 1);
    EXPECT_EQ(fn.attempts, tn.attempts);
    EXPECT_EQ(fn.last_error, tn.last_error);

    auto f_artifacts = from_->ListArtifacts(task_uid_);
    auto t_artifacts = to_->ListArtifacts(task_uid_);
    ASSERT_TRUE(f_artifacts.ok() && t_artifacts.ok());
    ASSERT_EQ(f_artifacts->size(), 2u);
    ASSERT_EQ(f_artifacts->size(), t_artifacts->size());
    for (const Store::Artifact& listed : *f_artifacts) {
      auto f = from_->GetArtifact(task_uid_, listed.path);
      auto t = to_->GetArtifact(task_uid_, listed.path);
      ASSERT_TRUE(f.ok() && t.ok()) << listed.path;
      EXPECT_EQ(f->bytes, t->bytes);
      EXPECT_EQ(f->sha256, t->sha256);
      EXPECT_EQ(f->content, t->content);
    }
  }

  testing::FakeClock clock_;
  std::unique_ptr<Store> from_;
  std::unique_ptr<Store> to_;
  std::string task_uid_;
  std::string task2_uid_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreCopyTest,
                         ::testing::Values(Pair{"sqlite", "sqlite"}, Pair{"sqlite", "postgres"},
                                           Pair{"postgres", "sqlite"}),
                         PairName);

TEST_P(StoreCopyTest, CopiesEverythingWithItsIdentity) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  auto counts = CopyStore(*from_, *to_, {}, clock_);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->objects, 7);
  EXPECT_EQ(counts->inventory, 4);
  EXPECT_EQ(counts->events, 2);
  EXPECT_EQ(counts->task_logs, 2);
  EXPECT_EQ(counts->artifacts, 2);
  EXPECT_EQ(FormatCopyCounts(*counts),
            "7 objects, 4 inventory records, 2 events, 2 task logs (" +
                std::to_string(counts->task_log_lines) +
                " lines), 2 artifacts, 2 usage records, 2 audit records, 1 pending notification");
  EXPECT_EQ(counts->notifications, 1);
  ExpectSameStores();
  // Leases stay behind: the new store has no controller yet.
  auto lease = to_->GetLease("sbxd");
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_FALSE(lease->has_value());
}

TEST_P(StoreCopyTest, TheCopyWorksAsAStoreAfterwards) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  auto source_revision = from_->CurrentRevision();
  ASSERT_TRUE(source_revision.ok());
  ASSERT_TRUE(CopyStore(*from_, *to_, {}, clock_).ok());

  // The revision continues above the copied resourceVersions, with no change log behind it: a
  // watcher from an old revision re-lists, one from the current revision waits.
  auto revision = to_->CurrentRevision();
  ASSERT_TRUE(revision.ok());
  EXPECT_EQ(*revision, *source_revision);
  EXPECT_EQ(to_->WatchSince(1).status().code(), StatusCode::kOutOfRange);
  auto none = to_->WatchSince(*revision);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  // Compare-and-swap with the copied resourceVersion works, and the new one is above all.
  Object a = MustGet(*to_, {Kind::kSandbox, "default", "a"});
  a.sandbox_status().state = "STOPPED";
  auto updated = to_->UpdateStatus(a);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->metadata.resource_version, *revision + 1);
  EXPECT_EQ(updated->metadata.uid, MustGet(*from_, {Kind::kSandbox, "default", "a"}).metadata.uid);

  // The applyset came along: pruning the set to the workspace alone deletes sandbox/a (b is
  // already being deleted).
  ApplyOptions prune;
  prune.applyset = "gitops";
  prune.prune = true;
  prune.audit = WriteAudit{"alice", "local", "apply", "cli"};
  auto pruned = to_->Apply({MustGet(*to_, {Kind::kWorkspace, "default", "ws"})}, prune);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  // The audit log continues after the copied records.
  auto audit = to_->ListAudit({.after_id = 2});
  ASSERT_TRUE(audit.ok()) << audit.status();
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ(audit->front().id, 3);
  EXPECT_EQ(audit->front().verb, "prune");
  EXPECT_EQ(to_->Get({Kind::kSandbox, "default", "a"}).status().code(), StatusCode::kNotFound);

  // The sandbox being deleted finishes its deletion in the copy once its finalizer goes.
  Object b = MustGet(*to_, {Kind::kSandbox, "team", "b"});
  b.metadata.finalizers.clear();
  ASSERT_TRUE(to_->UpdateControllerMetadata(b).ok());
  EXPECT_EQ(to_->Get({Kind::kSandbox, "team", "b"}).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreCopyTest, RefusesANonEmptyDestinationAndLeavesItUnchanged) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  Object other = api::MakeObject(Kind::kSandbox, "other");
  other.sandbox_spec().image = "busybox";
  ASSERT_TRUE(to_->Apply({other}, {}).ok());
  Store::Event e;
  e.involved = {Kind::kSandbox, "default", "other"};
  e.reason = "Created";
  e.message = "m";
  ASSERT_TRUE(to_->RecordEvent(e).ok());
  const Object before = MustGet(*to_, {Kind::kSandbox, "default", "other"});
  auto revision_before = to_->CurrentRevision();
  ASSERT_TRUE(revision_before.ok());

  auto counts = CopyStore(*from_, *to_, {}, clock_);
  ASSERT_EQ(counts.status().code(), StatusCode::kFailedPrecondition) << counts.status();
  EXPECT_THAT(counts.status().message(), HasSubstr("is not empty (it holds 1 object, 1 event)"));

  auto objects = to_->List({});
  ASSERT_TRUE(objects.ok());
  ASSERT_EQ(objects->size(), 1u);
  EXPECT_EQ(objects->front(), before);
  EXPECT_EQ(*to_->CurrentRevision(), *revision_before);
  EXPECT_EQ(to_->ListEvents(std::nullopt)->size(), 1u);
  EXPECT_TRUE(to_->ListInventory(std::nullopt)->empty());
}

TEST_P(StoreCopyTest, AFailureMidImportLeavesTheDestinationEmpty) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  // The database refuses the second of two objects with one uid (a UNIQUE constraint), after
  // the inventory, an event and the first object went in.
  Status status = to_->ImportFrom([&](StoreSink& sink) -> Status {
    RETURN_IF_ERROR(sink.Revision(100));
    const ObjectKey a_key{Kind::kSandbox, "default", "a"};
    RETURN_IF_ERROR(sink.PutInventory(Inventory("x", Store::InventoryState::kLive, a_key, "u")));
    Store::Event e;
    e.involved = a_key;
    e.reason = "R";
    e.message = "m";
    e.first_seen = e.last_seen = "2026-09-01T12:00:00Z";
    RETURN_IF_ERROR(sink.PutEvent(e));
    StoredObject a{MustGet(*from_, a_key), "", "2026-09-01T12:00:00Z"};
    RETURN_IF_ERROR(sink.PutObject(a));
    a.object.metadata.name = "a-twin";  // same uid
    return sink.PutObject(a);
  });
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("uid")) << status;

  EXPECT_TRUE(to_->List({})->empty());
  EXPECT_TRUE(to_->ListInventory(std::nullopt)->empty());
  EXPECT_TRUE(to_->ListEvents(std::nullopt)->empty());
  EXPECT_EQ(*to_->CurrentRevision(), 0);

  // A failure of the source half-way through the export (here: its sink refusing artifacts)
  // rolls back as well, and the store can then be copied.
  class FailingArtifacts final : public StoreSink {
   public:
    explicit FailingArtifacts(StoreSink& next) : next_(next) {}
    Status Revision(int64_t r) override { return next_.Revision(r); }
    Status PutObject(const StoredObject& o) override { return next_.PutObject(o); }
    Status PutInventory(const Store::InventoryRecord& r) override { return next_.PutInventory(r); }
    Status PutEvent(const Store::Event& e) override { return next_.PutEvent(e); }
    Status PutTaskLog(const StoredTaskLog& l) override { return next_.PutTaskLog(l); }
    Status PutUsage(const Store::UsageRecord& r) override { return next_.PutUsage(r); }
    Status PutAudit(const Store::AuditRecord& r) override { return next_.PutAudit(r); }
    Status PutNotification(const Store::Notification& n) override {
      return next_.PutNotification(n);
    }
    Status PutNotificationDrops(const std::string& uid, int64_t dropped) override {
      return next_.PutNotificationDrops(uid, dropped);
    }
    Status PutArtifact(const ObjectKey&, const std::string&, const Store::Artifact&) override {
      return api::UnavailableError("source went away");
    }

   private:
    StoreSink& next_;
  };
  status = to_->ImportFrom([&](StoreSink& sink) -> Status {
    FailingArtifacts failing(sink);
    return from_->ExportTo(failing);
  });
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status;
  EXPECT_TRUE(to_->List({})->empty());
  EXPECT_TRUE(to_->ReadTaskLog(task_uid_)->entries.empty());
  EXPECT_EQ(*to_->CurrentRevision(), 0);

  ASSERT_TRUE(CopyStore(*from_, *to_, {}, clock_).ok());
  ExpectSameStores();
}

TEST_P(StoreCopyTest, RefusesWhileAnSbxdHoldsTheSourceLease) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  ASSERT_TRUE(*from_->TryAcquireLease("sbxd", "host-2/pid-9", std::chrono::seconds(15)));

  auto counts = CopyStore(*from_, *to_, {}, clock_);
  ASSERT_EQ(counts.status().code(), StatusCode::kFailedPrecondition) << counts.status();
  EXPECT_THAT(counts.status().message(), HasSubstr("host-2/pid-9 holds its \"sbxd\" lease"));
  EXPECT_THAT(counts.status().message(), HasSubstr("--ignore-lease"));
  EXPECT_TRUE(to_->List({})->empty());

  // A replica splitting workspaces (no leader lease, a member lease) counts the same.
  ASSERT_TRUE(from_->ReleaseLease("sbxd", "host-2/pid-9").ok());
  ASSERT_TRUE(*from_->TryAcquireLease("member/host-3-11", "host-3-11", std::chrono::seconds(15)));
  counts = CopyStore(*from_, *to_, {}, clock_);
  ASSERT_EQ(counts.status().code(), StatusCode::kFailedPrecondition) << counts.status();
  EXPECT_THAT(counts.status().message(), HasSubstr("host-3-11 holds its \"member/host-3-11\""));
  EXPECT_TRUE(to_->List({})->empty());

  // Once it expired, or when told to, the copy goes ahead.
  CopyOptions ignore;
  ignore.ignore_lease = true;
  ASSERT_TRUE(CopyStore(*from_, *to_, ignore, clock_).ok());
  ExpectSameStores();
}

// A Notifier's count of the notifications its bound dropped is its status.dropped: a migrate
// keeps it (the bound needs 1,001 pending notifications, so the source gets it by an import).
TEST_P(StoreCopyTest, TheNotifiersDropCountsAreCopied) {
  ASSERT_TRUE(from_
                  ->ImportFrom([](StoreSink& sink) {
                    RETURN_IF_ERROR(sink.PutNotificationDrops("uid-quiet", 3));
                    return sink.PutNotificationDrops("uid-noisy", 1200);
                  })
                  .ok());
  ASSERT_TRUE(CopyStore(*from_, *to_, {}, clock_).ok());
  auto counts = to_->NotificationCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->size(), 2u);
  EXPECT_EQ((*counts)[0].notifier_uid, "uid-noisy");
  EXPECT_EQ((*counts)[0].dropped, 1200);
  EXPECT_EQ((*counts)[0].pending, 0);
  EXPECT_EQ((*counts)[1].notifier_uid, "uid-quiet");
  EXPECT_EQ((*counts)[1].dropped, 3);
}

TEST_P(StoreCopyTest, ADryRunCountsAndWritesNothing) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  CopyOptions dry;
  dry.dry_run = true;
  auto counts = CopyStore(*from_, *to_, dry, clock_);
  ASSERT_TRUE(counts.ok()) << counts.status();
  auto counted = CountStore(*from_);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_EQ(counts->objects, 7);
  EXPECT_EQ(FormatCopyCounts(*counts), FormatCopyCounts(*counted));
  EXPECT_TRUE(to_->List({})->empty());
  EXPECT_TRUE(to_->ListInventory(std::nullopt)->empty());
  EXPECT_EQ(*to_->CurrentRevision(), 0);
}

TEST(FormatCopyCountsTest, CountsWithThousandsAndSingulars) {
  CopyCounts c;
  c.objects = 120;
  c.inventory = 1;
  c.events = 340;
  c.task_logs = 12;
  c.task_log_lines = 4100;
  c.artifacts = 1234567;
  EXPECT_EQ(FormatCopyCounts(c),
            "120 objects, 1 inventory record, 340 events, 12 task logs (4,100 lines), 1,234,567 "
            "artifacts");
}

}  // namespace
}  // namespace sbx::controller
