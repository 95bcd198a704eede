// The AgentTask log and artifacts of both stores (store_backends.h): sequence numbers, the per-task
// bound (deltas dropped first, item results kept), the 16 MiB artifact cap, and deletion with the
// object.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "controller/store/store.h"
#include "tests/unit/controller/store/store_backends.h"

namespace sbx::controller {
namespace {

using api::Kind;
using Entry = Store::TaskLogEntry;
using LogKind = Store::TaskLogKind;

Entry E(LogKind kind, std::string text, std::string item = "") {
  Entry e;
  e.kind = kind;
  e.text = std::move(text);
  e.item_id = std::move(item);
  return e;
}

class TaskLogStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void Open(int64_t max_bytes) {
    auto store = OpenTestStore(GetParam(), TestStoreOptions{.task_log_max_bytes = max_bytes});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }
  void SetUp() override { Open(1 << 20); }

  // Creates task `name` and returns its uid.
  std::string CreateTask(const std::string& name) {
    Object o = api::MakeObject(Kind::kAgentTask, name);
    o.agent_task_spec().worker_ref = "w";
    o.agent_task_spec().input = "hi";
    auto applied = store_->Apply({o}, {});
    EXPECT_TRUE(applied.ok()) << applied.status();
    return applied.ok() ? (*applied)[0].object.metadata.uid : "";
  }
  std::vector<std::string> Texts(const std::string& uid) {
    std::vector<std::string> out;
    auto page = store_->ReadTaskLog(uid);
    EXPECT_TRUE(page.ok()) << page.status();
    for (const Entry& e : page->entries) {
      out.push_back(e.text);
    }
    return out;
  }

  const ObjectKey key_{Kind::kAgentTask, "default", "t"};
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, TaskLogStoreTest, StoreBackends(), BackendName);

TEST_P(TaskLogStoreTest, AppendsInOrderWithSequenceNumbersAndReadsAfterOne) {
  const std::string uid = CreateTask("t");
  auto last = store_->AppendTaskLog(key_, uid, {E(LogKind::kCommand, "$ echo hi", "cmd_1")});
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(*last, 1);
  Entry result = E(LogKind::kCommandResult, "hi\n", "cmd_1");
  result.exit_code = 0;
  last = store_->AppendTaskLog(key_, uid, {E(LogKind::kOutputDelta, "hi\n", "cmd_1"), result});
  EXPECT_EQ(*last, 3);
  auto page = store_->ReadTaskLog(uid, 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->entries.size(), 2u);
  EXPECT_EQ(page->entries[0].seq, 2);
  EXPECT_EQ(page->entries[0].kind, LogKind::kOutputDelta);
  EXPECT_EQ(page->entries[1].exit_code, 0);
  EXPECT_EQ(page->entries[1].item_id, "cmd_1");
  EXPECT_FALSE(page->entries[1].at.empty());
  EXPECT_EQ(page->last_seq, 3);
  EXPECT_EQ(store_->ReadTaskLog(uid, 0, 1)->entries.size(), 1u);
}

TEST_P(TaskLogStoreTest, AnUnknownTaskHasAnEmptyLog) {
  auto page = store_->ReadTaskLog("nobody");
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->entries.empty());
  EXPECT_EQ(page->last_seq, 0);
}

TEST_P(TaskLogStoreTest, TheBoundDropsTheOldestDeltasFirstAndKeepsItemResults) {
  Open(20);
  const std::string uid = CreateTask("t");
  ASSERT_TRUE(store_
                  ->AppendTaskLog(
                      key_, uid,
                      {E(LogKind::kCommand, "$ a"), E(LogKind::kOutputDelta, "12345"),
                       E(LogKind::kOutputDelta, "67890"), E(LogKind::kCommandResult, "1234567890")})
                  .ok());
  // 3 + 5 + 5 + 10 = 23 > 20: the first delta goes, the result stays.
  EXPECT_EQ(Texts(uid), (std::vector<std::string>{"$ a", "67890", "1234567890"}));
  auto page = store_->ReadTaskLog(uid);
  EXPECT_EQ(page->dropped, 1);
  EXPECT_EQ(page->last_seq, 4);
  // More whole entries: with no delta left, the oldest entries go.
  ASSERT_TRUE(store_->AppendTaskLog(key_, uid, {E(LogKind::kAssistant, "done!!!!")}).ok());
  EXPECT_EQ(Texts(uid), (std::vector<std::string>{"1234567890", "done!!!!"}));
}

TEST_P(TaskLogStoreTest, AnEntryLongerThanTheBoundIsCutToIt) {
  Open(4);
  const std::string uid = CreateTask("t");
  ASSERT_TRUE(store_->AppendTaskLog(key_, uid, {E(LogKind::kAssistant, "abcdefgh")}).ok());
  EXPECT_EQ(Texts(uid), (std::vector<std::string>{"abcd"}));
}

TEST_P(TaskLogStoreTest, ArtifactsAreStoredListedAndCappedPerTask) {
  const std::string uid = CreateTask("t");
  const std::string content = "hi\n";
  ASSERT_TRUE(store_->PutArtifact(key_, uid, {"out.txt", 3, "abc", content}).ok());
  auto list = store_->ListArtifacts(uid);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].path, "out.txt");
  EXPECT_EQ((*list)[0].bytes, 3);
  EXPECT_EQ((*list)[0].sha256, "abc");
  EXPECT_TRUE((*list)[0].content.empty());
  auto got = store_->GetArtifact(uid, "out.txt");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->content, content);
  EXPECT_EQ(store_->GetArtifact(uid, "nope").status().code(), api::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutArtifact(key_, uid, {"bad", 5, "x", "abc"}).code(),
            api::StatusCode::kInvalidArgument);

  const std::string big(9 << 20, 'x');
  ASSERT_TRUE(store_->PutArtifact(key_, uid, {"a.bin", int64_t{9} << 20, "s", big}).ok());
  EXPECT_EQ(store_->PutArtifact(key_, uid, {"b.bin", int64_t{9} << 20, "s", big}).code(),
            api::StatusCode::kResourceExhausted);
  // Replacing a path counts its new size only.
  EXPECT_TRUE(store_->PutArtifact(key_, uid, {"a.bin", int64_t{9} << 20, "s2", big}).ok());
}

TEST_P(TaskLogStoreTest, LogAndArtifactsAreDeletedWithTheObject) {
  const std::string uid = CreateTask("t");
  ASSERT_TRUE(store_->AppendTaskLog(key_, uid, {E(LogKind::kAssistant, "x")}).ok());
  ASSERT_TRUE(store_->PutArtifact(key_, uid, {"out.txt", 1, "s", "x"}).ok());
  ASSERT_TRUE(store_->Delete(key_).ok());
  EXPECT_TRUE(store_->ReadTaskLog(uid)->entries.empty());
  EXPECT_EQ(store_->ReadTaskLog(uid)->last_seq, 0);
  EXPECT_TRUE(store_->ListArtifacts(uid)->empty());
}

}  // namespace
}  // namespace sbx::controller

namespace sbx::controller {
namespace {
TEST_P(TaskLogStoreTest, LongTextsRoundTrip) {
  const std::string uid = CreateTask("t");
  const std::string long_text = "submitted to worker w (session sess_1) and more text";
  ASSERT_TRUE(store_->AppendTaskLog(key_, uid, {E(LogKind::kStatus, long_text)}).ok());
  EXPECT_EQ(Texts(uid), (std::vector<std::string>{long_text}));
}
}  // namespace
}  // namespace sbx::controller
