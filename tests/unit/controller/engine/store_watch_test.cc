#include "controller/engine/store_watch.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "tests/support/fake_clock.h"
#include "tests/unit/controller/engine/fake_watch_store.h"
#include "tests/unit/controller/engine/poll.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;
using api::Kind;
using api::ObjectKey;
using testing_internal::FakeWatchStore;
using testing_internal::PollUntil;
using testing_internal::RecordingEnqueuer;

ObjectKey Sb(const std::string& n) { return {Kind::kSandbox, "default", n}; }

StoreWatchOptions Options(std::chrono::milliseconds poll, int batch = 1000) {
  StoreWatchOptions options;
  options.poll = poll;
  options.batch = batch;
  return options;
}

TEST(StoreWatchTest, ListsEverythingFirstThenEnqueuesEachChange) {
  testing::FakeClock clock;
  FakeWatchStore store;
  store.Put(api::MakeObject(Kind::kSandbox, "a"));
  store.Put(api::MakeObject(Kind::kSandbox, "b"));
  RecordingEnqueuer out;
  StoreWatch watch(store, clock, Options(20ms));
  EXPECT_EQ(watch.last_revision(), -1);
  std::jthread runner([&](std::stop_token stop) { watch.Run(out, stop); });

  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 2; }));
  EXPECT_EQ(out.count(Sb("a")), 1u);  // listed, and its older change is not replayed
  EXPECT_EQ(out.count(Sb("b")), 1u);

  store.Put(api::MakeObject(Kind::kSandbox, "c"));
  store.Remove(Sb("a"));
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 4; }));
  EXPECT_EQ(out.count(Sb("c")), 1u);
  EXPECT_EQ(out.count(Sb("a")), 2u);  // deletions are enqueued so reconcilers can clean up
  runner.request_stop();
}

// A status write is its reconciler's own: it wakes the object's dependants, not the object (no
// hot loop on a failing object whose every attempt writes a status), while a change of spec
// (generation) or metadata (labels, deletion, finalizers) wakes the object itself.
// A wake hint posted by another replica (Store::PostWakeHint) changes nothing but the
// resourceVersion, yet wakes the object itself and marks it in the WakeHints, so its reconciler
// looks at the outside world at once (#25). Without WakeHints it still enqueues.
TEST(StoreWatchTest, AWakeHintMarksTheHintsAndEnqueuesTheObject) {
  testing::FakeClock clock;
  FakeWatchStore store;
  const ObjectKey w{Kind::kAgentWorker, "default", "w"};
  store.Put(api::MakeObject(Kind::kAgentWorker, "w"));
  RecordingEnqueuer out;
  WakeHints hints;
  StoreWatchOptions options = Options(20ms);
  options.wake_hints = &hints;
  StoreWatch watch(store, clock, options);
  std::jthread runner([&](std::stop_token stop) { watch.Run(out, stop); });
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 1; }));
  EXPECT_EQ(out.count(w), 1u);
  EXPECT_FALSE(hints.Take(w));

  ASSERT_TRUE(store.PostWakeHint(w).ok());
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 2; }));
  EXPECT_EQ(out.count(w), 2u);
  EXPECT_TRUE(out.dependents_of().empty());
  EXPECT_TRUE(hints.Take(w));
  runner.request_stop();
}

TEST(StoreWatchTest, AStatusChangeWakesOnlyTheDependants) {
  testing::FakeClock clock;
  FakeWatchStore store;
  api::Object a = api::MakeObject(Kind::kSandbox, "a");
  a.metadata.generation = 1;
  store.Put(a);
  RecordingEnqueuer out;
  StoreWatch watch(store, clock, Options(20ms));
  std::jthread runner([&](std::stop_token stop) { watch.Run(out, stop); });
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 1; }));
  EXPECT_EQ(out.count(Sb("a")), 1u);

  a.sandbox_status().state = "RUNNING";  // status only
  store.Put(a);
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 2; }));
  EXPECT_EQ(out.count(Sb("a")), 1u);
  EXPECT_EQ(out.dependents_of(), std::vector<ObjectKey>{Sb("a")});

  a.metadata.generation = 2;  // spec changed
  store.Put(a);
  a.metadata.deletion_timestamp = "2026-12-01T00:00:00Z";
  store.Put(a);
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 4; }));
  EXPECT_EQ(out.count(Sb("a")), 3u);
  EXPECT_EQ(out.dependents_of().size(), 1u);
  runner.request_stop();
}

TEST(StoreWatchTest, ReadsLargeBacklogsInBatches) {
  testing::FakeClock clock;
  FakeWatchStore store;
  RecordingEnqueuer out;
  StoreWatch watch(store, clock, Options(20ms, /*batch=*/3));
  std::jthread runner([&](std::stop_token stop) { watch.Run(out, stop); });
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 0; }));
  for (int i = 0; i < 10; ++i) {
    store.Put(api::MakeObject(Kind::kSandbox, "s" + std::to_string(i)));
  }
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 10; }));
  EXPECT_EQ(out.keys().size(), 10u);
}

TEST(StoreWatchTest, RetriesStoreErrorsWithBackoffOnTheClock) {
  testing::FakeClock clock;
  FakeWatchStore store;
  store.Put(api::MakeObject(Kind::kSandbox, "a"));
  store.FailWith(api::UnavailableError("database is locked"));
  std::mutex mu;
  std::vector<std::string> errors;  // Guarded by mu.
  RecordingEnqueuer out;
  StoreWatch watch(store, clock,
                   StoreWatchOptions{.poll = 20ms,
                                     .error_backoff = {1s, 30s, 0.0},
                                     .on_error = [&](std::string_view source, const Status& s) {
                                       std::lock_guard lock(mu);
                                       errors.push_back(std::string(source) + " " + s.ToString());
                                     }});
  std::jthread runner([&](std::stop_token stop) { watch.Run(out, stop); });
  ASSERT_TRUE(clock.WaitForSleepers(1));  // backing off after the first failure
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("store-watch"), std::string::npos);
    EXPECT_NE(errors[0].find("database is locked"), std::string::npos);
  }
  EXPECT_EQ(out.keys().size(), 0u);
  store.FailWith(api::OkStatus());
  clock.Advance(1s);
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 1; }));
  EXPECT_EQ(out.count(Sb("a")), 1u);
}

TEST(StoreWatchTest, StopsPromptlyWhileBackingOff) {
  testing::FakeClock clock;
  FakeWatchStore store;
  store.FailWith(api::UnavailableError("down"));
  RecordingEnqueuer out;
  StoreWatch watch(store, clock);
  std::atomic<bool> returned{false};
  std::jthread runner([&](std::stop_token stop) {
    watch.Run(out, stop);
    returned = true;
  });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  runner.request_stop();
  ASSERT_TRUE(PollUntil([&] { return returned.load(); }));
}

// Fell behind compaction: the changes it missed are gone, so it re-lists — and still hears of
// the object deleted during the gap, which a list alone cannot show.
TEST(StoreWatchTest, ReListsWhenItFellBehindCompactionAndEnqueuesWhatWasDeletedMeanwhile) {
  testing::FakeClock clock;
  FakeWatchStore store;
  store.Put(api::MakeObject(Kind::kSandbox, "a"));
  store.Put(api::MakeObject(Kind::kSandbox, "b"));
  store.Put(api::MakeObject(Kind::kSandbox, "d"));
  std::mutex mu;
  std::vector<std::string> errors;  // Guarded by mu.
  RecordingEnqueuer out;
  StoreWatch watch(store, clock,
                   StoreWatchOptions{.poll = 20ms,
                                     .error_backoff = {1s, 30s, 0.0},
                                     .on_error = [&](std::string_view, const Status& s) {
                                       std::lock_guard lock(mu);
                                       errors.push_back(s.ToString());
                                     }});
  std::jthread runner([&](std::stop_token stop) { watch.Run(out, stop); });
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 3; }));

  // Hold the watch in an error backoff while the store moves on and compacts past it.
  store.FailWith(api::UnavailableError("database is locked"));
  ASSERT_TRUE(clock.WaitForSleepers(1));
  api::Object relabelled = api::MakeObject(Kind::kSandbox, "a");
  relabelled.metadata.labels["team"] = "x";
  store.Put(relabelled);                            // 4
  store.Put(api::MakeObject(Kind::kSandbox, "c"));  // 5
  store.Remove(Sb("b"));                            // 6
  ASSERT_TRUE(store.CompactChanges(6).ok());
  store.FailWith(api::OkStatus());
  clock.Advance(1s);

  ASSERT_TRUE(PollUntil([&] { return watch.relists() == 1 && watch.last_revision() == 6; }));
  EXPECT_EQ(out.count(Sb("a")), 2u);  // changed during the gap
  EXPECT_EQ(out.count(Sb("b")), 2u);  // deleted during the gap: enqueued although not listed
  EXPECT_EQ(out.count(Sb("c")), 1u);  // created during the gap
  EXPECT_EQ(out.count(Sb("d")), 1u);  // unchanged: not reconciled again for the re-list
  {
    std::lock_guard lock(mu);
    ASSERT_EQ(errors.size(), 2u);
    EXPECT_NE(errors[1].find("re-listing"), std::string::npos) << errors[1];
    EXPECT_NE(errors[1].find("too old"), std::string::npos) << errors[1];
  }

  // And it watches on from the revision of the re-list.
  store.Put(api::MakeObject(Kind::kSandbox, "e"));
  ASSERT_TRUE(PollUntil([&] { return watch.last_revision() == 7; }));
  EXPECT_EQ(out.count(Sb("e")), 1u);
  EXPECT_EQ(watch.relists(), 1);
}

}  // namespace
}  // namespace sbx::controller
