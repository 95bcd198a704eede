#include "controller/reconcilers/garbage_collector.h"

#include <gtest/gtest.h>

#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_agents_api.h"
#include "tests/fakes/fake_sandbox_api.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using std::chrono_literals::operator""min;
using std::chrono_literals::operator""h;
constexpr char kWs[] = "default/default";

class GarbageCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *SqliteStore::Open(":memory:", SqliteStore::Options{});
    gc_ = std::make_unique<GarbageCollector>(*store_, cache_, clock_,
                                             GarbageCollectorOptions{5min, 0.1});
  }
  // A live sandbox in the fake API, with an inventory record owned by Sandbox `owner`.
  void Ours(const std::string& id, const std::string& owner) {
    databricks::Sandbox sb;
    sb.sandbox_id = id;
    sb.name = "sandboxes/" + id;
    sb.state = databricks::SandboxState::kRunning;
    api_.Put(sb);
    Store::InventoryRecord r;
    r.workspace = kWs;
    r.resource_type = "sandbox";
    r.external_id = id;
    r.state = Store::InventoryState::kLive;
    r.owner = {api::Kind::kSandbox, "default", owner};
    r.owner_uid = "uid-" + owner;
    r.created_at = r.updated_at = FormatRfc3339(clock_.Now());
    ASSERT_TRUE(store_->PutInventory(r).ok());
  }
  void Foreign(const std::string& id) {
    databricks::Sandbox sb;
    sb.sandbox_id = id;
    sb.state = databricks::SandboxState::kRunning;
    api_.Put(sb);
  }
  void ApplyOwner(const std::string& name, const std::string& sandbox_id) {
    api::Object o = api::MakeObject(api::Kind::kSandbox, name);
    o.sandbox_spec().sandbox_id = sandbox_id;
    ASSERT_TRUE(store_->Apply({o}, {}).ok());
  }
  void PutSession(const std::string& id, const std::string& owner, Store::InventoryState state) {
    Store::InventoryRecord r;
    r.workspace = kWs;
    r.resource_type = "session";
    r.external_id = id;
    r.state = state;
    r.owner = {api::Kind::kAgentWorker, "default", owner};
    r.owner_uid = "uid-" + owner;
    r.created_at = r.updated_at = FormatRfc3339(clock_.Now());
    ASSERT_TRUE(store_->PutInventory(r).ok());
  }
  int Collect() {
    auto listed = api_.ListAll(100, {});
    auto n = gc_->CollectSandboxes(kWs, api_, *listed, {});
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }

  testing::FakeClock clock_;
  testing::FakeSandboxApi api_;
  SandboxCache cache_;
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<GarbageCollector> gc_;
};

TEST_F(GarbageCollectorTest, DeletesOrphansOnlyAfterTheGracePeriod) {
  Ours("orphan", "gone");
  clock_.Advance(4min);
  EXPECT_EQ(Collect(), 0);
  EXPECT_TRUE(api_.Peek("orphan").has_value());
  clock_.Advance(2min);
  EXPECT_EQ(Collect(), 1);
  EXPECT_FALSE(api_.Peek("orphan").has_value());
  EXPECT_FALSE(store_->GetInventory(kWs, "sandbox", "orphan")->has_value());
  auto events = *store_->ListEvents(std::nullopt);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "GarbageCollected");
  EXPECT_EQ(events[0].involved.name, "gone");
}

TEST_F(GarbageCollectorTest, NeverTouchesWhatIsNotInInventoryOrStillWanted) {
  Foreign("someone-elses");
  ApplyOwner("keeper", "kept");
  Ours("kept", "keeper");
  clock_.Advance(10min);
  EXPECT_EQ(Collect(), 0);
  EXPECT_TRUE(api_.Peek("someone-elses").has_value());
  EXPECT_TRUE(api_.Peek("kept").has_value());
  EXPECT_EQ(api_.Calls("delete"), 0);
}

TEST_F(GarbageCollectorTest, CollectsASandboxWhoseOwnerNowWantsAnotherId) {
  ApplyOwner("renamed", "new-id");
  Ours("old-id", "renamed");
  clock_.Advance(10min);
  EXPECT_EQ(Collect(), 1);
  EXPECT_FALSE(api_.Peek("old-id").has_value());
}

TEST_F(GarbageCollectorTest, DeletesAtMostTenPercentOfTheWorkspacePerPass) {
  for (int i = 0; i < 20; ++i) {
    Foreign("foreign-" + std::to_string(i));
  }
  for (int i = 0; i < 10; ++i) {
    Ours("orphan-" + std::to_string(i), "gone-" + std::to_string(i));
  }
  clock_.Advance(10min);
  EXPECT_EQ(Collect(), 3);  // 30 listed → 3 per pass
  EXPECT_EQ(Collect(), 2);  // 27 listed → 2
  EXPECT_EQ(api_.Calls("delete"), 5);
}

TEST_F(GarbageCollectorTest, DropsRecordsOfOrphansThatNoLongerExist) {
  Ours("vanished", "gone");
  api_.Remove("vanished");
  clock_.Advance(10min);
  EXPECT_EQ(Collect(), 0);
  EXPECT_EQ(api_.Calls("delete"), 0);
  EXPECT_FALSE(store_->GetInventory(kWs, "sandbox", "vanished")->has_value());
}

}  // namespace
}  // namespace sbx::controller

namespace sbx::controller {
namespace {

TEST_F(GarbageCollectorTest, DeletesSessionsWhoseWorkerIsGoneAfterGrace) {
  testing::FakeAgentsApi agents;
  openai::CreateSessionRequest req;
  req.model = "m";
  req.workspace_directory = "/w";
  const std::string orphan = agents.CreateSession(req, {})->id;
  const std::string kept = agents.CreateSession(req, {})->id;
  req.metadata = {{"sbx.dev/uid", "uid-crashed"}};
  const std::string crashed = agents.CreateSession(req, {})->id;
  for (const std::string& id : {orphan, kept, crashed}) {  // each ran a turn: deletable
    agents.StartTurn(id);
    agents.FinishTurn(id);
  }

  api::Object worker = api::MakeObject(api::Kind::kAgentWorker, "alive");
  ASSERT_TRUE(store_->Apply({worker}, {}).ok());
  auto put = [&](const std::string& id, const std::string& owner, Store::InventoryState state,
                 const std::string& uid) {
    Store::InventoryRecord r;
    r.workspace = kWs;
    r.resource_type = "session";
    r.external_id = id;
    r.state = state;
    r.owner = {api::Kind::kAgentWorker, "default", owner};
    r.owner_uid = uid;
    r.updated_at = FormatRfc3339(clock_.Now());
    ASSERT_TRUE(store_->PutInventory(r).ok());
  };
  put(orphan, "gone", Store::InventoryState::kLive, "uid-gone");
  put(kept, "alive", Store::InventoryState::kLive, "uid-alive");
  put("pending:uid-crashed", "crashed", Store::InventoryState::kIntent, "uid-crashed");
  EXPECT_TRUE(gc_->HasSessions(kWs));

  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 0);  // within grace
  clock_.Advance(10min);
  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 1);  // budget: 1 per pass of 3
  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 1);
  EXPECT_FALSE(agents.HasSession(orphan));
  EXPECT_FALSE(agents.HasSession(crashed));
  EXPECT_TRUE(agents.HasSession(kept));
  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 0);
}

// A session collected while its turn runs is cancelled first, then deleted.
TEST_F(GarbageCollectorTest, CancelsTheActiveTurnOfAnOrphanedSessionBeforeDeletingIt) {
  testing::FakeAgentsApi agents;
  openai::CreateSessionRequest req;
  req.model = "m";
  req.workspace_directory = "/w";
  const std::string busy = agents.CreateSession(req, {})->id;
  agents.StartTurn(busy);
  PutSession(busy, "gone", Store::InventoryState::kLive);
  clock_.Advance(10min);
  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 1);
  EXPECT_EQ(agents.Calls("cancel"), 1);
  EXPECT_FALSE(agents.HasSession(busy));
  EXPECT_TRUE(store_->ListInventory(kWs)->empty());
}

// A session the service refuses to delete (it never ran a turn: "no durably bound CCA root") is
// tried again on a later pass, then abandoned once the give-up bound has passed — and never
// tried again; the sweeper no longer needs an Agents client for it.
TEST_F(GarbageCollectorTest, AbandonsASessionThatKeepsRefusingDeletionAndNeverRetriesIt) {
  testing::FakeAgentsApi agents;
  openai::CreateSessionRequest req;
  req.model = "m";
  req.workspace_directory = "/w";
  const std::string never_ran = agents.CreateSession(req, {})->id;
  PutSession(never_ran, "gone", Store::InventoryState::kLive);
  clock_.Advance(10min);

  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 0);
  EXPECT_EQ(agents.Calls("delete"), 1);
  auto row = store_->GetInventory(kWs, "session", never_ran);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->state, Store::InventoryState::kDeleting);

  // The next pass retries at once (no second grace period), still within the bound.
  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 0);
  EXPECT_EQ(agents.Calls("delete"), 2);
  clock_.Advance(reconcilers_internal::SessionDeletePolicy{}.give_up_after);
  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 0);
  EXPECT_EQ(agents.Calls("delete"), 3);
  row = store_->GetInventory(kWs, "session", never_ran);
  ASSERT_TRUE(row.ok() && row->has_value());
  EXPECT_EQ((*row)->state, Store::InventoryState::kAbandoned);
  const std::vector<Store::Event> events = *store_->ListEvents(std::nullopt);
  bool named = false;
  for (const Store::Event& e : events) {
    named = named || (e.reason == "SessionNotDeletable" && e.type == "Warning" &&
                      e.message.find(never_ran) != std::string::npos);
  }
  EXPECT_TRUE(named);

  EXPECT_FALSE(gc_->HasSessions(kWs));
  clock_.Advance(1h);
  EXPECT_EQ(*gc_->CollectSessions(kWs, agents, {}), 0);
  EXPECT_EQ(agents.Calls("delete"), 3);
  EXPECT_EQ(agents.Calls("get"), 3);
}

}  // namespace
}  // namespace sbx::controller
