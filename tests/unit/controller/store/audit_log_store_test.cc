// The audit log's part of the Store contract (DESIGN §8.3), on both backends: one record per
// audited write in the write's own transaction, none for unaudited or unchanged writes, failures
// recorded after the rollback, the queries, retention, and ids that ascend without a gap when
// two processes write at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/store.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/store/store_backends.h"

namespace sbx::controller {
namespace {

using api::Kind;
using ::testing::ElementsAre;
using ::testing::MatchesRegex;

Object Sandbox(const std::string& name, const std::string& image = "python:3.12") {
  Object o = api::MakeObject(Kind::kSandbox, name, "default");
  o.sandbox_spec().image = image;
  o.sandbox_spec().sandbox_id = "default-" + name;
  return o;
}

WriteAudit Alice(std::string verb) { return {"alice", "editor", std::move(verb), "api"}; }

ApplyOptions Audited(std::string verb = "apply") {
  ApplyOptions options;
  options.audit = Alice(std::move(verb));
  return options;
}

// "verb name result before->after", one string per record, to compare whole logs at a glance.
std::vector<std::string> Summary(const std::vector<Store::AuditRecord>& records) {
  std::vector<std::string> out;
  for (const Store::AuditRecord& r : records) {
    out.push_back(r.verb + " " + r.object.name + " " + r.result + " " +
                  std::to_string(r.resource_version_before) + "->" +
                  std::to_string(r.resource_version_after));
  }
  return out;
}

class AuditLogStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto store = OpenTestStore(GetParam(), TestStoreOptions{.clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }
  std::vector<Store::AuditRecord> All(Store::AuditQuery query = {}) {
    auto records = store_->ListAudit(query);
    EXPECT_TRUE(records.ok()) << records.status();
    return records.ok() ? *records : std::vector<Store::AuditRecord>{};
  }
  void MustApply(const std::vector<Object>& objects, const ApplyOptions& options) {
    auto applied = store_->Apply(objects, options);
    ASSERT_TRUE(applied.ok()) << applied.status();
  }

  testing::FakeClock clock_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, AuditLogStoreTest, StoreBackends(), BackendName);

TEST_P(AuditLogStoreTest, EachAuditedWriteAppendsOneRecordAndNothingElseDoes) {
  ApplyOptions set = Audited();
  set.applyset = "team";
  MustApply({Sandbox("a"), Sandbox("b")}, set);         // created, created
  MustApply({Sandbox("a"), Sandbox("b")}, set);         // unchanged: no record
  MustApply({Sandbox("a", "python:3.13")}, Audited());  // configured
  MustApply({Sandbox("c")}, ApplyOptions{});            // not audited (a controller write)
  ApplyOptions dry = Audited();
  dry.dry_run = true;
  MustApply({Sandbox("d")}, dry);  // a dry run writes nothing, so records nothing
  Object a = *store_->Get({Kind::kSandbox, "default", "a"});
  a.sandbox_status().state = "RUNNING";
  ASSERT_TRUE(store_->UpdateStatus(a).ok());  // status writes are the controller's
  ApplyOptions prune = Audited();
  prune.applyset = "team";
  prune.prune = true;
  MustApply({Sandbox("a", "python:3.13")}, prune);  // prunes b
  ASSERT_TRUE(store_->Delete({Kind::kSandbox, "default", "a"}, {Alice("delete")}).ok());
  ASSERT_TRUE(store_->Delete({Kind::kSandbox, "default", "c"}).ok());  // not audited

  const std::vector<Store::AuditRecord> records = All();
  EXPECT_THAT(Summary(records),
              ElementsAre("apply a created 0->1", "apply b created 0->2", "apply a configured 1->3",
                          "prune b deleted 2->0", "delete a deleted 5->0"));
  for (size_t i = 0; i < records.size(); ++i) {
    const Store::AuditRecord& r = records[i];
    EXPECT_EQ(r.id, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(r.actor, "alice");
    EXPECT_EQ(r.role, "editor");
    EXPECT_EQ(r.source, "api");
    EXPECT_EQ(r.time_ms, 1788264000000);
  }
  // The digest of the spec as stored, never the spec: it changes with the spec, and a delete has
  // none.
  EXPECT_THAT(records[0].spec_digest, MatchesRegex("sha256:[0-9a-f]{64}"));
  EXPECT_NE(records[0].spec_digest, records[2].spec_digest);
  EXPECT_EQ(records[4].spec_digest, "");
}

TEST_P(AuditLogStoreTest, ADeleteThatOnlyMarksIsRecordedAsSuchAndAppendingBumpsNoRevision) {
  MustApply({Sandbox("a")}, Audited());
  Object a = *store_->Get({Kind::kSandbox, "default", "a"});
  a.metadata.finalizers.push_back(std::string(api::kControllerFinalizer));
  ASSERT_TRUE(store_->UpdateControllerMetadata(a).ok());
  ASSERT_TRUE(store_->Delete({Kind::kSandbox, "default", "a"}, {Alice("delete")}).ok());
  // Already being deleted: nothing written, nothing recorded.
  ASSERT_TRUE(store_->Delete({Kind::kSandbox, "default", "a"}, {Alice("delete")}).ok());
  const int64_t revision = *store_->CurrentRevision();
  Store::AuditRecord exec;
  exec.actor = "root";
  exec.role = "admin";
  exec.verb = "exec";
  exec.object = {Kind::kSandbox, "default", "a"};
  exec.result = "ok";
  exec.source = "api";
  ASSERT_TRUE(store_->AppendAudit(exec).ok());
  EXPECT_EQ(*store_->CurrentRevision(), revision);
  EXPECT_THAT(Summary(All()), ElementsAre("apply a created 0->1",
                                          "delete a marked-for-deletion 2->3", "exec a ok 0->0"));
}

TEST_P(AuditLogStoreTest, AFailedWriteIsRecordedAfterItsRollbackButAConflictIsNot) {
  MustApply({Sandbox("a")}, Audited());
  Object a = *store_->Get({Kind::kSandbox, "default", "a"});
  a.metadata.finalizers.push_back(std::string(api::kControllerFinalizer));
  ASSERT_TRUE(store_->UpdateControllerMetadata(a).ok());
  ASSERT_TRUE(store_->Delete({Kind::kSandbox, "default", "a"}).ok());
  const int64_t revision = *store_->CurrentRevision();

  // b would be created, but a is being deleted: nothing is written, and each object the apply
  // tried gets a record of the refusal.
  auto refused = store_->Apply({Sandbox("b"), Sandbox("a", "python:3.13")}, Audited());
  ASSERT_EQ(refused.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*store_->CurrentRevision(), revision);
  EXPECT_EQ(store_->Get({Kind::kSandbox, "default", "b"}).status().code(),
            api::StatusCode::kNotFound);
  EXPECT_THAT(Summary(All()),
              ElementsAre("apply a created 0->1", "apply b FAILED_PRECONDITION 0->0",
                          "apply a FAILED_PRECONDITION 0->0"));

  // A compare-and-swap conflict is the signal to read again, not a refusal.
  Object stale = Sandbox("c");
  MustApply({stale}, ApplyOptions{});
  stale.metadata.resource_version = 1;
  ApplyOptions cas = Audited("label");
  cas.require_resource_version = true;
  EXPECT_EQ(store_->Apply({stale}, cas).status().code(), api::StatusCode::kAborted);
  // A missing object, deleted.
  EXPECT_EQ(store_->Delete({Kind::kSandbox, "default", "x"}, {Alice("delete")}).status().code(),
            api::StatusCode::kNotFound);
  // GitOps records no failures (it retries every interval and says so in its status).
  ApplyOptions gitops = Audited();
  gitops.audit->record_failures = false;
  EXPECT_FALSE(store_->Apply({Sandbox("a", "python:3.14")}, gitops).ok());
  EXPECT_THAT(Summary(All()),
              ElementsAre("apply a created 0->1", "apply b FAILED_PRECONDITION 0->0",
                          "apply a FAILED_PRECONDITION 0->0", "delete x NOT_FOUND 0->0"));
}

TEST_P(AuditLogStoreTest, QueriesSelectByIdTimeAndActorOldestFirst) {
  MustApply({Sandbox("a")}, Audited());
  clock_.Advance(std::chrono::hours(2));
  ApplyOptions bob = Audited();
  bob.audit->actor = "bob";
  MustApply({Sandbox("b")}, bob);
  MustApply({Sandbox("c")}, Audited());

  EXPECT_THAT(Summary(All({.after_id = 1})),
              ElementsAre("apply b created 0->2", "apply c created 0->3"));
  EXPECT_THAT(Summary(All({.since_ms = 1788264000000 + 3600'000})),
              ElementsAre("apply b created 0->2", "apply c created 0->3"));
  EXPECT_THAT(Summary(All({.actor = "bob"})), ElementsAre("apply b created 0->2"));
  EXPECT_THAT(Summary(All({.limit = 2})),
              ElementsAre("apply a created 0->1", "apply b created 0->2"));
}

TEST_P(AuditLogStoreTest, RetentionDeletesOldRecordsButKeepsTheNewestSoIdsNeverRestart) {
  MustApply({Sandbox("a")}, Audited());
  MustApply({Sandbox("b")}, Audited());
  clock_.Advance(std::chrono::hours(24 * 100));
  const auto cutoff = clock_.Now() - std::chrono::hours(24 * 90);
  auto expired = store_->ExpireAudit(cutoff);
  ASSERT_TRUE(expired.ok()) << expired.status();
  EXPECT_EQ(*expired, 1);
  EXPECT_THAT(Summary(All()), ElementsAre("apply b created 0->2"));
  MustApply({Sandbox("c")}, Audited());
  const std::vector<Store::AuditRecord> records = All();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1].id, 3);
  EXPECT_EQ(*store_->ExpireAudit(clock_.Now() + std::chrono::hours(1)), 1);
  EXPECT_EQ(All().back().id, 3);
}

TEST_P(AuditLogStoreTest, TwoProcessesWritingAtOnceGetAscendingIdsWithoutAGap) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("audit-pair-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto pair = OpenTestStorePair(GetParam(), (dir / "sbx.db").string());
  ASSERT_TRUE(pair.ok()) << pair.status();
  constexpr int kEach = 25;
  const auto write = [](Store& store, const std::string& prefix) {
    for (int i = 0; i < kEach; ++i) {
      ASSERT_TRUE(store.Apply({Sandbox(prefix + std::to_string(i))}, Audited()).ok());
    }
  };
  std::thread a([&] { write(*pair->first, "a"); });
  std::thread b([&] { write(*pair->second, "b"); });
  a.join();
  b.join();
  auto records = pair->first->ListAudit({});
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u * kEach);
  for (size_t i = 0; i < records->size(); ++i) {
    EXPECT_EQ((*records)[i].id, static_cast<int64_t>(i) + 1);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sbx::controller
