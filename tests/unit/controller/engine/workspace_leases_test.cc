// WorkspaceLeases over a real SqliteStore shared by several "replicas" (one store connection
// each), on a fake clock: rounds are driven by hand with Tick().
#include "controller/engine/workspace_leases.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;

class WorkspaceLeasesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sbx-wsl-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    admin_ = Open();
  }
  void TearDown() override {
    replicas_.clear();
    stores_.clear();
    admin_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<SqliteStore> Open() {
    SqliteStore::Options options;
    options.clock = &clock_;
    auto store = SqliteStore::Open(dir_ + "/sbx.db", options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  void AddWorkspaces(int n) {
    std::vector<api::Object> objects;
    for (int i = 0; i < n; ++i) {
      api::Object w = api::MakeObject(api::Kind::kWorkspace, "w" + std::to_string(i), "team");
      w.workspace_spec().databricks.host = "https://w" + std::to_string(i) + ".example";
      objects.push_back(std::move(w));
    }
    ASSERT_TRUE(admin_->Apply(objects, {}).ok());
  }

  WorkspaceLeases& Replica(const std::string& identity) {
    auto it = replicas_.find(identity);
    if (it != replicas_.end()) {
      return *it->second;
    }
    stores_.push_back(Open());
    WorkspaceLeases::Options options;
    options.identity = identity;
    options.lease_duration = 15s;
    options.renew_interval = 5s;
    return *replicas_
                .emplace(identity,
                         std::make_unique<WorkspaceLeases>(*stores_.back(), clock_, options))
                .first->second;
  }

  // One round of every replica named, `rounds` times, renew_interval apart.
  void Rounds(const std::vector<std::string>& identities, int rounds) {
    for (int r = 0; r < rounds; ++r) {
      for (const std::string& id : identities) {
        auto round = Replica(id).Tick();
        ASSERT_TRUE(round.ok()) << round.status();
      }
      clock_.Advance(5s);
    }
  }

  testing::FakeClock clock_;
  std::string dir_;
  std::unique_ptr<SqliteStore> admin_;
  std::vector<std::unique_ptr<SqliteStore>> stores_;
  std::map<std::string, std::unique_ptr<WorkspaceLeases>> replicas_;
};

TEST_F(WorkspaceLeasesTest, ThreeReplicasSplitFiveWorkspacesWithoutOverlap) {
  AddWorkspaces(5);
  Rounds({"r1", "r2", "r3"}, 4);  // r1 first takes all, then gives back as the others appear
  std::set<std::string> all;
  for (const char* r : {"r1", "r2", "r3"}) {
    const auto held = Replica(r).Held();
    EXPECT_GE(held.size(), 1u) << r;
    EXPECT_LE(held.size(), 2u) << r;  // ceil(5 / 3)
    for (const auto& [id, token] : held) {
      EXPECT_TRUE(all.insert(id).second) << id << " held twice";
      auto owns = Replica(r).Owns(id);
      ASSERT_TRUE(owns.ok());
      EXPECT_TRUE(*owns) << r << " " << id;
    }
  }
  EXPECT_EQ(all.size(), 5u);
  // Nobody owns what another holds.
  for (const char* r : {"r1", "r2", "r3"}) {
    for (const std::string& id : all) {
      auto owns = Replica(r).Owns(id);
      ASSERT_TRUE(owns.ok());
      EXPECT_EQ(*owns, Replica(r).Held().contains(id)) << r << " " << id;
    }
  }
}

TEST_F(WorkspaceLeasesTest, ADeadReplicasWorkspacesAreTakenOverWithNewTokensAndItIsFencedOut) {
  AddWorkspaces(5);
  Rounds({"r1", "r2", "r3"}, 4);
  const auto dead = Replica("r3").Held();
  ASSERT_FALSE(dead.empty());
  // r3 stops renewing (kill -9). Within lease_duration + one round its share moves.
  Rounds({"r1", "r2"}, 4);  // 20 s
  std::map<std::string, std::string> holder;
  for (const char* r : {"r1", "r2"}) {
    for (const auto& [id, token] : Replica(r).Held()) {
      holder[id] = r;
      if (dead.contains(id)) {
        EXPECT_GT(token, dead.at(id)) << id << ": a takeover is a new tenure";
      }
    }
  }
  EXPECT_EQ(holder.size(), 5u);
  // r3 comes back from a pause without a round: its fence refuses at once.
  const std::string& id = dead.begin()->first;
  api::Status refused = Replica("r3").CheckMutation(id);
  EXPECT_EQ(refused.code(), api::StatusCode::kAborted) << refused;
  EXPECT_NE(refused.message().find("lease of workspace " + id), std::string::npos) << refused;
  EXPECT_TRUE(Replica(holder[id]).CheckMutation(id).ok());
  // …and its next round lets go of it.
  auto round = Replica("r3").Tick();
  ASSERT_TRUE(round.ok());
  EXPECT_FALSE(Replica("r3").Held().contains(id));
}

// A replica paused past its lease (SIGSTOP, a long GC pause, a frozen VM) acts on nothing when it
// resumes, before its next round: its own clock says the lease may be gone.
TEST_F(WorkspaceLeasesTest, APausedReplicaHasNoTokenWhenItResumes) {
  AddWorkspaces(1);
  Rounds({"r1"}, 1);
  ASSERT_TRUE(Replica("r1").Token("team/w0").has_value());
  ASSERT_EQ(Replica("r1").Token("team/w0")->token, 1);
  clock_.Advance(11s);  // 16 s since the renewal: past the 15 s lease
  EXPECT_EQ(Replica("r1").Token("team/w0"), std::nullopt);
  EXPECT_FALSE(*Replica("r1").Owns("team/w0"));
  EXPECT_EQ(Replica("r1").CheckMutation("team/w0").code(), api::StatusCode::kAborted);
}

TEST_F(WorkspaceLeasesTest, FenceRefusesWhenTheRowMovedEvenIfTheLocalViewIsFresh) {
  AddWorkspaces(1);
  Rounds({"r1"}, 1);
  ASSERT_TRUE(Replica("r1").CheckMutation("team/w0").ok());
  // Someone else took the row behind r1's back (its lease had lapsed in the store's eyes).
  ASSERT_TRUE(admin_->ReleaseLease("workspace/team/w0", "r1").ok());
  auto intruder = admin_->AcquireLease("workspace/team/w0", "intruder", 15s);
  ASSERT_TRUE(intruder.ok() && intruder->has_value());
  api::Status refused = Replica("r1").CheckMutation("team/w0");
  EXPECT_EQ(refused.code(), api::StatusCode::kAborted);
  EXPECT_NE(refused.message().find("held by intruder with token 2"), std::string::npos) << refused;
  auto owns = Replica("r1").Owns("team/w0");
  ASSERT_TRUE(owns.ok());
  EXPECT_FALSE(*owns);
}

TEST_F(WorkspaceLeasesTest, AJoiningReplicaGetsItsShareAndTheMarkedOnesStopAtOnce) {
  AddWorkspaces(5);
  Rounds({"r1"}, 1);
  ASSERT_EQ(Replica("r1").Held().size(), 5u);
  Rounds({"r2"}, 1);  // r2 joins: share 3 each; r1 still holds all 5, r2 nothing yet
  auto round = Replica("r1").Tick();  // marks 2 for release
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->members, 2);
  EXPECT_EQ(Replica("r1").Held().size(), 3u);
  int refused = 0;
  for (int i = 0; i < 5; ++i) {
    const std::string id = "team/w" + std::to_string(i);
    if (!Replica("r1").Held().contains(id)) {
      ++refused;
      EXPECT_EQ(Replica("r1").CheckMutation(id).code(), api::StatusCode::kAborted);
      EXPECT_FALSE(*Replica("r1").Owns(id));
    }
  }
  EXPECT_EQ(refused, 2);
  Rounds({"r1", "r2"}, 2);  // r1 releases, r2 takes
  EXPECT_EQ(Replica("r1").Held().size(), 3u);
  EXPECT_EQ(Replica("r2").Held().size(), 2u);
}

TEST_F(WorkspaceLeasesTest, AWorkspaceWithoutAnObjectIsTakenAfterItIsAskedAbout) {
  // The env-backed "default" of a namespace has no Workspace object.
  auto first = Replica("r1").Owns("team/default");
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(*first);
  auto round = Replica("r1").Tick();
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->acquired, std::vector<std::string>{"team/default"});
  EXPECT_TRUE(*Replica("r1").Owns("team/default"));
  // Nobody asks about it any more (its objects are gone): given up after 2 × lease_duration.
  clock_.Advance(31s);
  ASSERT_TRUE(Replica("r1").Tick().ok());
  EXPECT_TRUE(Replica("r1").Held().empty());
  round = Replica("r1").Tick();
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->released, std::vector<std::string>{"team/default"});
}

TEST_F(WorkspaceLeasesTest, ReleaseAllHandsOverAtTheOthersNextRound) {
  AddWorkspaces(4);
  Rounds({"r1", "r2"}, 3);
  ASSERT_EQ(Replica("r1").Held().size() + Replica("r2").Held().size(), 4u);
  Replica("r1").ReleaseAll();
  EXPECT_TRUE(Replica("r1").Held().empty());
  auto round = Replica("r2").Tick();  // no waiting for an expiry
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->members, 1);
  EXPECT_EQ(Replica("r2").Held().size(), 4u);
}

}  // namespace
}  // namespace sbx::controller
