// `sbxctl top` (DESIGN §8.2) on a store whose objects carry usage: the three tables, the share
// of a budget, the sort orders, -o json, and bad arguments refused by name.
#include "cli/commands/top_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/defaults.h"
#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"

namespace sbx::cli {
namespace {

using ::testing::HasSubstr;

class TopCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = controller::SqliteStore::Open(":memory:", controller::SqliteStore::Options{});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = store->get();
    ctx_.SetStoreForTesting(*std::move(store));

    api::Object ws = api::MakeObject(api::Kind::kWorkspace, "team");
    ws.workspace_spec().budget =
        api::WorkspaceBudget{.tokens = 1000, .compute_hours = 1'000'000, .cost = 2'000'000};
    ws.workspace_spec().pricing.emplace().input_tokens_per_million = 1'000'000;
    api::Object pool = api::MakeObject(api::Kind::kAgentPool, "p");
    pool.agent_pool_spec().template_.spec.agent.model = "m";
    pool.agent_pool_spec().template_.spec.sandbox.emplace().workspace_ref = "team";
    api::ApplyDefaults(pool);
    ASSERT_TRUE(store_->Apply({ws, pool}, {}).ok());
    ws = *store_->Get(api::KeyOf(ws));
    // 80% of the tokens, 50% of the compute hour, 75% of the cost.
    ws.workspace_status().usage = {"2026-12", 700, 0, 100, 0, 1'800'000, 3, "1.500000"};
    ASSERT_TRUE(store_->UpdateStatus(ws).ok());
    AddTask("small", "p", 10, 5, 3'000, "0.000010");
    AddTask("big", "p", 300, 100, 300, "0.000300");
    AddTask("alone", "", 50, 0, 0, "");
  }
  void AddTask(const std::string& name, const std::string& pool, int64_t in, int64_t out,
               int64_t compute_ms, const std::string& cost) {
    api::Object t = api::MakeObject(api::Kind::kAgentTask, name);
    t.agent_task_spec().input = "x";
    if (pool.empty()) {
      t.agent_task_spec().worker_ref = "w";
    } else {
      t.agent_task_spec().pool_ref = pool;
    }
    ASSERT_TRUE(store_->Apply({t}, {}).ok());
    t = *store_->Get(api::KeyOf(t));
    t.agent_task_status().phase = api::TaskPhase::kSucceeded;
    t.agent_task_status().usage = {in, 0, out, 0, compute_ms, std::nullopt, cost};
    ASSERT_TRUE(store_->UpdateStatus(t).ok());
  }
  int Top(TopCommandOptions options) {
    out_.str("");
    err_.str("");
    return RunTop(ctx_, options);
  }

  testing::FakeClock clock_;
  std::ostringstream out_;
  std::ostringstream err_;
  CommandContext ctx_{out_, err_, clock_, nullptr};
  controller::Store* store_ = nullptr;
};

TEST_F(TopCommandTest, WorkspacesShowTheirPeriodUsageAndTheLargestShareOfTheBudget) {
  ASSERT_EQ(Top({.what = "workspaces"}), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("PERIOD"));
  // 800 of 1000 tokens is 80%; 1.5 of 2 cost is 75%: the larger is shown.
  EXPECT_THAT(out_.str(), HasSubstr("80% tokens"));
  EXPECT_THAT(out_.str(), HasSubstr("1.500000"));
  EXPECT_THAT(out_.str(), HasSubstr("1800s"));
}

TEST_F(TopCommandTest, TasksSortByTokensOrNameAndPrintJson) {
  ASSERT_EQ(Top({.what = "at"}), kExitOk) << err_.str();
  const std::string table = out_.str();
  EXPECT_LT(table.find("big"), table.find("alone"));
  EXPECT_LT(table.find("alone"), table.find("small"));
  EXPECT_THAT(table, HasSubstr("Succeeded"));

  ASSERT_EQ(Top({.what = "tasks", .sort_by = "name", .output = "json"}), kExitOk);
  const nlohmann::json rows = nlohmann::json::parse(out_.str());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["name"], "alone");
  EXPECT_EQ(rows[0]["cost"], "");  // no pricing where it ran
  EXPECT_EQ(rows[1]["name"], "big");
  EXPECT_EQ(rows[1]["tokens"], 400);
  EXPECT_EQ(rows[1]["cost"], "0.000300");
  EXPECT_EQ(rows[1]["computeSeconds"], 0.3);
  EXPECT_EQ(rows[1]["budget"], "40% tokens");  // a pool task: its pool's Workspace
  EXPECT_EQ(rows[0]["budget"], "-");           // its worker does not exist

  ASSERT_EQ(Top({.what = "at", .sort_by = "compute"}), kExitOk) << err_.str();
  const std::string by_compute = out_.str();
  EXPECT_THAT(by_compute, HasSubstr("COMPUTE"));
  EXPECT_THAT(by_compute, HasSubstr("3s"));
  EXPECT_LT(by_compute.find("small"), by_compute.find("big"));
  EXPECT_LT(by_compute.find("big"), by_compute.find("alone"));
}

TEST_F(TopCommandTest, PoolsSumTheirTasks) {
  ASSERT_EQ(Top({.what = "pools", .output = "json"}), kExitOk) << err_.str();
  const nlohmann::json rows = nlohmann::json::parse(out_.str());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["name"], "p");
  EXPECT_EQ(rows[0]["tasks"], 2);
  EXPECT_EQ(rows[0]["tokens"], 415);
  EXPECT_EQ(rows[0]["cost"], "0.000310");
  EXPECT_EQ(rows[0]["computeSeconds"], 3.3);
  // Its template's sandbox lives in Workspace "team" (by workspaceRef): 415 of 1000 tokens.
  EXPECT_EQ(rows[0]["budget"], "41% tokens");
}

TEST_F(TopCommandTest, BadArgumentsAreRefusedByName) {
  EXPECT_EQ(Top({.what = "sandboxes"}), kExitError);
  EXPECT_THAT(err_.str(), HasSubstr("unknown resource \"sandboxes\""));
  EXPECT_EQ(Top({.what = "tasks", .sort_by = "age"}), kExitError);
  EXPECT_THAT(err_.str(), HasSubstr("--sort-by age"));
  EXPECT_EQ(Top({.what = "tasks", .output = "yaml"}), kExitError);
}

}  // namespace
}  // namespace sbx::cli
