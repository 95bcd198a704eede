#include "controller/reconcilers/session_lifecycle.h"

#include <gtest/gtest.h>

#include <vector>

#include "controller/store/sqlite_store.h"
#include "tests/fakes/fake_agents_api.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

class SessionLifecycleTest : public ::testing::Test {
 protected:
  static std::unique_ptr<SqliteStore> OpenStore() {
    auto store = SqliteStore::Open(":memory:", SqliteStore::Options{});
    return std::move(*store);
  }
  openai::CreateSessionRequest Request() {
    openai::CreateSessionRequest r;
    r.model = "gpt-5";
    r.workspace_directory = "/home/sandbox-agent/w";
    return r;
  }
  std::vector<Store::InventoryRecord> Rows() {
    return *sessions_.Recorded("default/default", "u1");
  }

  testing::FakeClock clock_;
  std::unique_ptr<SqliteStore> store_ = OpenStore();
  EventRecorder events_{*store_, clock_};
  testing::FakeAgentsApi agents_;
  SessionLifecycle sessions_{*store_, events_, clock_};
  const SessionOwner owner_{{api::Kind::kAgentWorker, "default", "w"}, "u1", "default/default", ""};
};

TEST_F(SessionLifecycleTest, CreatesOnceBehindAnIntentAndRecordsItLive) {
  auto s = sessions_.Ensure(owner_, agents_, Request(), {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->metadata.at("sbx.dev/uid"), "u1");
  EXPECT_EQ(s->metadata.at("sbx.dev/worker"), "default/w");
  const auto rows = Rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].external_id, s->id);
  EXPECT_EQ(rows[0].state, Store::InventoryState::kLive);
  EXPECT_EQ(agents_.Calls("create"), 1);
}

// sbxd died after the create, before the row went live: the intent is resolved by the uid.
TEST_F(SessionLifecycleTest, AnIntentIsResolvedByTheUidInTheSessionsMetadata) {
  openai::CreateSessionRequest r = Request();
  r.metadata = {{"sbx.dev/uid", "u1"}};
  const std::string id = agents_.CreateSession(r, {})->id;
  Store::InventoryRecord intent;
  intent.workspace = "default/default";
  intent.resource_type = kInventorySession;
  intent.external_id = "pending:u1";
  intent.owner = owner_.key;
  intent.owner_uid = "u1";
  ASSERT_TRUE(store_->PutInventory(intent).ok());

  auto s = sessions_.Ensure(owner_, agents_, Request(), {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, id);
  EXPECT_EQ(agents_.Calls("create"), 1);  // ours, not a second one
  // In pages as full as the service allows: every page is a call a degraded cloud may fail.
  EXPECT_EQ(agents_.ListLimits(), std::vector<int>{100});
  const auto rows = Rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].external_id, id);
}

TEST_F(SessionLifecycleTest, VerifyForgetsAGoneSessionAndDeleteRecordedRemovesTheRow) {
  const std::string id = sessions_.Ensure(owner_, agents_, Request(), {})->id;
  EXPECT_TRUE(*sessions_.Verify(owner_, agents_, id, {}));
  agents_.ForgetSession(id);
  EXPECT_FALSE(*sessions_.Verify(owner_, agents_, id, {}));
  EXPECT_TRUE(Rows().empty());

  const std::string second = sessions_.Ensure(owner_, agents_, Request(), {})->id;
  agents_.StartTurn(second);  // a session that ran a turn can be deleted
  agents_.FinishTurn(second);
  std::optional<std::vector<openai::Session>> listed;
  std::vector<std::string> seen;
  auto done = sessions_.DeleteRecorded(
      Rows().at(0), agents_, listed, {}, {},
      [&](const std::string& s, const reconcilers_internal::SessionDeleteResult& r) {
        if (r.deleted) {
          seen.push_back(s);
        }
      });
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->deleted, 1);
  EXPECT_TRUE(done->settled);
  EXPECT_EQ(seen, std::vector<std::string>{second});
  EXPECT_FALSE(agents_.HasSession(second));
  EXPECT_TRUE(Rows().empty());
}

TEST(SessionsOfUidTest, FindsOnlyTheSessionsThatCarryTheUid) {
  std::vector<openai::Session> all(3);
  all[0].id = "a";
  all[0].metadata = {{"sbx.dev/uid", "u1"}};
  all[1].id = "b";
  all[1].metadata = {{"sbx.dev/uid", "u2"}};
  all[2].id = "c";
  EXPECT_EQ(SessionsOfUid(all, "u1"), std::vector<std::string>{"a"});
  EXPECT_TRUE(SessionsOfUid(all, "u3").empty());
}

}  // namespace
}  // namespace sbx::controller
