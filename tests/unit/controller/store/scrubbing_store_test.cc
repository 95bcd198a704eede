#include "controller/store/scrubbing_store.h"

#include <gtest/gtest.h>

#include "api/codec.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {
namespace {

// A scrub function like log::Scrub for one secret, registered with its JSON-escaped form.
std::string ScrubKey(std::string_view text) {
  std::string out(text);
  for (const std::string secret : {"sk-exec-\"42\"", R"(sk-exec-\"42\")"}) {
    for (size_t p = out.find(secret); p != std::string::npos; p = out.find(secret, p)) {
      out.replace(p, secret.size(), "[REDACTED]");
    }
  }
  return out;
}

class ScrubbingStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sqlite_ = *SqliteStore::Open(":memory:", SqliteStore::Options{});
    store_ = std::make_unique<ScrubbingStore>(*sqlite_, ScrubKey);
  }
  std::unique_ptr<SqliteStore> sqlite_;
  std::unique_ptr<ScrubbingStore> store_;
};

TEST_F(ScrubbingStoreTest, EveryStringOfAStatusIsScrubbedBeforeItIsStored) {
  api::Object sandbox = api::MakeObject(api::Kind::kSandbox, "sb");
  ASSERT_TRUE(store_->Apply({sandbox}, {}).ok());
  api::Object stored = *store_->Get(api::KeyOf(sandbox));
  stored.sandbox_status().conditions.push_back(
      {"Ready", api::ConditionStatus::kFalse, "SetupFailed", "key sk-exec-\"42\" printed", "", 0});
  stored.sandbox_status().setup.push_back(
      {"tools", "boot-1", 1, false, "env: CODEX_API_KEY=sk-exec-\"42\"", ""});
  auto updated = store_->UpdateStatus(stored);
  ASSERT_TRUE(updated.ok()) << updated.status();

  const api::Object read = *sqlite_->Get(api::KeyOf(sandbox));
  const std::string json = api::EncodeStatusJson(read);
  EXPECT_EQ(json.find("sk-exec"), std::string::npos) << json;
  EXPECT_EQ(read.sandbox_status().conditions[0].message, "key [REDACTED] printed");
  EXPECT_EQ(read.sandbox_status().setup[0].message, "env: CODEX_API_KEY=[REDACTED]");
  EXPECT_EQ(read.sandbox_status().setup[0].name, "tools");  // the rest is untouched
}

TEST_F(ScrubbingStoreTest, AStatusWithoutSecretsIsStoredAsItIs) {
  api::Object sandbox = api::MakeObject(api::Kind::kSandbox, "sb");
  ASSERT_TRUE(store_->Apply({sandbox}, {}).ok());
  api::Object stored = *store_->Get(api::KeyOf(sandbox));
  stored.sandbox_status().state = "RUNNING";
  ASSERT_TRUE(store_->UpdateStatus(stored).ok());
  EXPECT_EQ(sqlite_->Get(api::KeyOf(sandbox))->sandbox_status().state, "RUNNING");
}

TEST_F(ScrubbingStoreTest, EventsAreScrubbed) {
  Store::Event e;
  e.involved = {api::Kind::kAgentWorker, "default", "w"};
  e.type = "Warning";
  e.reason = "ExecutorExited";
  e.message = "last line: sk-exec-\"42\"";
  e.first_seen = e.last_seen = "2026-12-01T00:00:00Z";
  ASSERT_TRUE(store_->RecordEvent(e).ok());
  auto events = sqlite_->ListEvents(std::nullopt);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].message, "last line: [REDACTED]");
}

TEST_F(ScrubbingStoreTest, TaskLogLinesAreScrubbed) {
  const ObjectKey task{api::Kind::kAgentTask, "default", "t"};
  ASSERT_TRUE(store_
                  ->AppendTaskLog(task, "uid-1",
                                  {{0, Store::TaskLogKind::kOutputDelta, "cmd_1",
                                    "key is sk-exec-\"42\"", std::nullopt, ""}})
                  .ok());
  auto page = sqlite_->ReadTaskLog("uid-1");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].text, "key is [REDACTED]");
}

}  // namespace
}  // namespace sbx::controller
