// The notification outbox's part of the Store contract (DESIGN §8.3), on both backends: a status
// write whose change tells something puts one row per interested Notifier in the outbox in its
// own transaction; a withdrawn WorkerNotReady goes; attempts are recorded; each Notifier's rows
// are bounded, the dropped counted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "api/conditions.h"
#include "controller/store/store.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/store/store_backends.h"

namespace sbx::controller {
namespace {

using api::Kind;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kNow = 1788264000000;  // the FakeClock's start

Object NotifierOf(const std::string& name, std::vector<std::string> events,
                  std::map<std::string, std::string> selector = {}) {
  Object o = api::MakeObject(Kind::kNotifier, name, "default");
  o.notifier_spec().url_from.env = "SBX_SECRET_DEFAULT_HOOK";
  o.notifier_spec().signing_secret_from.env = "SBX_SECRET_DEFAULT_SIGNING";
  o.notifier_spec().events = std::move(events);
  o.notifier_spec().selector.match_labels = std::move(selector);
  return o;
}

class NotificationOutboxStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto store = OpenTestStore(GetParam(), TestStoreOptions{.clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }
  Object MustApply(const Object& o) {
    auto applied = store_->Apply({o}, {});
    EXPECT_TRUE(applied.ok()) << applied.status();
    return applied.ok() ? applied->front().object : Object{};
  }
  // Writes the status `mutate` makes of the stored object.
  Object WriteStatus(const ObjectKey& key, const std::function<void(Object&)>& mutate) {
    Object o = *store_->Get(key);
    mutate(o);
    auto written = store_->UpdateStatus(o);
    EXPECT_TRUE(written.ok()) << written.status();
    return written.ok() ? *written : o;
  }
  std::vector<Store::Notification> Due(int64_t at = kNow + 3'600'000) {
    auto due = store_->ListDueNotifications(at, 0);
    EXPECT_TRUE(due.ok()) << due.status();
    return due.ok() ? *due : std::vector<Store::Notification>{};
  }
  static std::vector<std::string> Summary(const std::vector<Store::Notification>& ns) {
    std::vector<std::string> out;
    for (const Store::Notification& n : ns) {
      out.push_back(n.notifier.name + " " + n.reason + " " + n.object.name);
    }
    return out;
  }

  testing::FakeClock clock_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, NotificationOutboxStoreTest, StoreBackends(), BackendName);

TEST_P(NotificationOutboxStoreTest, AFinalPhaseIsOneNotificationPerInterestedNotifier) {
  const Object failures = MustApply(NotifierOf("failures", {"TaskFailed"}));
  MustApply(NotifierOf("team-b", {"TaskFailed"}, {{"team", "b"}}));  // selects other objects
  MustApply(NotifierOf("successes", {"TaskSucceeded"}));             // other events
  Object suspended = NotifierOf("quiet", {"TaskFailed"});
  suspended.notifier_spec().suspend = true;
  MustApply(suspended);
  Object task = api::MakeObject(Kind::kAgentTask, "t", "default");
  task.metadata.labels = {{"team", "a"}};
  task.agent_task_spec().input = "hi";
  task.agent_task_spec().worker_ref = "w";
  const Object stored = MustApply(task);
  const int64_t revision = *store_->CurrentRevision();

  WriteStatus(api::KeyOf(task),
              [](Object& o) { o.agent_task_status().phase = api::TaskPhase::kRunning; });
  EXPECT_THAT(Due(), IsEmpty());
  const Object failed = WriteStatus(api::KeyOf(task), [](Object& o) {
    o.agent_task_status().phase = api::TaskPhase::kFailed;
    o.agent_task_status().worker = "w";
  });
  // Written in the status write's transaction: one revision for both, none for the outbox.
  EXPECT_EQ(*store_->CurrentRevision(), revision + 2);
  std::vector<Store::Notification> due = Due();
  ASSERT_THAT(Summary(due), ElementsAre("failures TaskFailed t"));
  const Store::Notification& n = due[0];
  EXPECT_EQ(n.notifier_uid, failures.metadata.uid);
  EXPECT_EQ(n.object_uid, stored.metadata.uid);
  EXPECT_EQ(n.type, "Warning");
  EXPECT_EQ(n.time_ms, kNow);
  EXPECT_EQ(n.due_ms, kNow);
  EXPECT_EQ(n.attempts, 0);
  EXPECT_EQ(n.webhook_id.rfind("msg_", 0), 0u);
  EXPECT_NE(n.task_json.find(R"("worker":"w")"), std::string::npos) << n.task_json;
  // Writing the finished task again (a label, its TTL) adds nothing.
  WriteStatus(api::KeyOf(task), [](Object& o) { o.agent_task_status().commands = 3; });
  EXPECT_EQ(Due().size(), 1u);
  (void)failed;
}

TEST_P(NotificationOutboxStoreTest, AWorkerNotReadyWaitsSixtySecondsAndGoesWhenReadyAgain) {
  MustApply(NotifierOf("workers", {"WorkerNotReady"}));
  Object worker = api::MakeObject(Kind::kAgentWorker, "w", "default");
  worker.agent_worker_spec().sandbox_ref = "box";
  MustApply(worker);
  const auto ready = [](api::ConditionStatus status) {
    return [status](Object& o) {
      api::SetCondition(o.agent_worker_status().conditions,
                        {std::string(api::condition::kReady), status, "R", "m", "", 0},
                        "2026-12-06T12:00:00Z");
    };
  };
  WriteStatus(api::KeyOf(worker), ready(api::ConditionStatus::kTrue));
  WriteStatus(api::KeyOf(worker), ready(api::ConditionStatus::kFalse));
  EXPECT_THAT(Due(kNow + 59'000), IsEmpty());
  EXPECT_THAT(Summary(Due(kNow + 60'000)), ElementsAre("workers WorkerNotReady w"));
  // Ready again within the minute: withdrawn.
  clock_.Advance(std::chrono::seconds(30));
  WriteStatus(api::KeyOf(worker), ready(api::ConditionStatus::kTrue));
  EXPECT_THAT(Due(), IsEmpty());
}

TEST_P(NotificationOutboxStoreTest, AttemptsAreRecordedAndFinishedRowsGo) {
  MustApply(NotifierOf("git", {"GitSourceFailed"}));
  Object gs = api::MakeObject(Kind::kGitSource, "g", "default");
  gs.git_source_spec().url = "https://git.example.com/r.git";
  gs.git_source_spec().ref.branch = "main";
  MustApply(gs);
  WriteStatus(api::KeyOf(gs), [](Object& o) {
    api::SetCondition(o.git_source_status().conditions,
                      {std::string(api::condition::kReady), api::ConditionStatus::kFalse,
                       "FetchFailed", "no route", "", 0},
                      "2026-12-06T12:00:00Z");
  });
  std::vector<Store::Notification> due = Due();
  ASSERT_EQ(due.size(), 1u);
  ASSERT_TRUE(store_->RetryNotification(due[0].id, 1, kNow + 5'000, "HTTP 500").ok());
  EXPECT_THAT(Due(kNow + 4'999), IsEmpty());
  due = Due(kNow + 5'000);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].attempts, 1);
  EXPECT_EQ(due[0].last_error, "HTTP 500");
  auto counts = store_->NotificationCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->size(), 1u);
  EXPECT_EQ(counts->front().pending, 1);
  ASSERT_TRUE(store_->FinishNotification(due[0].id).ok());
  EXPECT_THAT(Due(), IsEmpty());
  EXPECT_TRUE(store_->NotificationCounts()->empty());
}

TEST_P(NotificationOutboxStoreTest, EachNotifierKeepsItsNewestRowsAndCountsWhatItDrops) {
  const Object nt = MustApply(NotifierOf("git", {"GitSourceFailed"}));
  Object gs = api::MakeObject(Kind::kGitSource, "g", "default");
  gs.git_source_spec().url = "https://git.example.com/r.git";
  gs.git_source_spec().ref.branch = "main";
  MustApply(gs);
  const int64_t total = Store::kMaxPendingNotifications + 3;
  for (int64_t i = 0; i < total; ++i) {
    for (const api::ConditionStatus s :
         {api::ConditionStatus::kFalse, api::ConditionStatus::kTrue}) {
      WriteStatus(api::KeyOf(gs), [&](Object& o) {
        api::SetCondition(o.git_source_status().conditions,
                          {std::string(api::condition::kReady), s, "R", std::to_string(i), "", 0},
                          "2026-12-06T12:00:00Z");
      });
    }
  }
  auto counts = store_->NotificationCounts();
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->size(), 1u);
  EXPECT_EQ(counts->front().notifier_uid, nt.metadata.uid);
  EXPECT_EQ(counts->front().pending, Store::kMaxPendingNotifications);
  EXPECT_EQ(counts->front().dropped, 3);
  // The oldest went: the first kept is the fourth.
  std::vector<Store::Notification> due = Due();
  ASSERT_FALSE(due.empty());
  EXPECT_EQ(due.front().message, "R: 3");
}

}  // namespace
}  // namespace sbx::controller
