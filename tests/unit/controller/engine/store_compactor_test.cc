#include "controller/engine/store_compactor.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/store/store_backends.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;
using api::Kind;
using api::StatusCode;

// Against both stores (store_backends.h): compaction is part of the Store contract.
class StoreCompactorTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto store = OpenTestStore(GetParam(), TestStoreOptions{.clock = &clock_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  void Create(const std::vector<std::string>& names) {
    std::vector<Object> objects;
    for (const std::string& name : names) {
      objects.push_back(api::MakeObject(Kind::kSandbox, name));
    }
    auto applied = store_->Apply(objects, {});
    ASSERT_TRUE(applied.ok()) << applied.status();
  }
  void WriteState(const std::string& name, const std::string& state) {
    auto object = store_->Get(ObjectKey{Kind::kSandbox, "default", name});
    ASSERT_TRUE(object.ok()) << object.status();
    object->sandbox_status().state = state;
    ASSERT_TRUE(store_->UpdateStatus(*object).ok());
  }
  void Event(const std::string& name, const std::string& message) {
    Store::Event event;
    event.involved = ObjectKey{Kind::kSandbox, "default", name};
    event.reason = "Probe";
    event.message = message;
    event.first_seen = event.last_seen = FormatRfc3339(clock_.Now());
    ASSERT_TRUE(store_->RecordEvent(event).ok());
  }
  StoreCompactor::Round MustCompact(StoreCompactor& compactor) {
    auto round = compactor.CompactOnce();
    EXPECT_TRUE(round.ok()) << round.status();
    return round.ok() ? *round : StoreCompactor::Round{};
  }
  SqliteStore::Stats Stats() {
    auto stats = ReadTestStoreStats(*store_);
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : SqliteStore::Stats{};
  }

  testing::FakeClock clock_;
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Backends, StoreCompactorTest, StoreBackends(), BackendName);

TEST_P(StoreCompactorTest, CompactsToTheRevisionThePreviousRoundReadNeverPastTheWatermark) {
  int64_t watermark = 1000;
  StoreCompactor compactor(*store_, clock_,
                           StoreCompactorOptions{.watermark = [&] { return watermark; }});
  Create({"a", "b", "c"});  // revisions 1-3
  // The first round has no earlier revision to compact to.
  EXPECT_FALSE(MustCompact(compactor).compacted_to.has_value());
  EXPECT_EQ(Stats().changes, 3);

  WriteState("a", "PENDING");  // 4
  WriteState("b", "PENDING");  // 5
  StoreCompactor::Round round = MustCompact(compactor);
  EXPECT_EQ(round.compacted_to, 3);
  EXPECT_EQ(round.changes_deleted, 3);
  EXPECT_EQ(Stats().compacted_revision, 3);

  WriteState("c", "PENDING");  // 6
  watermark = 4;               // this process's watch has read up to 4 only
  round = MustCompact(compactor);
  EXPECT_EQ(round.compacted_to, 4);
  auto changes = store_->WatchSince(4);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_EQ(changes->size(), 2u);

  watermark = -1;  // the watch has not listed (yet, or again)
  EXPECT_FALSE(MustCompact(compactor).compacted_to.has_value());
  EXPECT_EQ(Stats().compacted_revision, 4);
}

// The bound of issue #12, on a small fleet over two simulated hours: 10 objects whose status
// changes every 30 s; 5 "chatty" ones with a new event every 10 s (the per-object cap binds),
// 5 "quiet" ones with one a minute (the TTL binds); a round every 5 minutes. After every round
// the change log holds one interval of writes and the events obey both bounds. A watcher that
// reads once per interval never notices compaction; one that stalls for two intervals is told
// it is behind (kOutOfRange) rather than skipping what it missed.
TEST_P(StoreCompactorTest, BoundsTheChangeLogAndTheEventsOfABusyFleet) {
  constexpr int kObjects = 10;
  constexpr auto kInterval = 5min;
  constexpr auto kTtl = 20min;
  constexpr int kPerObject = 100;  // the stores' default
  std::vector<std::string> names;
  for (int i = 0; i < kObjects; ++i) {
    names.push_back("sb-" + std::to_string(i));
  }
  Create(names);
  StoreCompactor compactor(
      *store_, clock_,
      StoreCompactorOptions{.interval = kInterval, .event_ttl = kTtl, .watermark = {}});
  ASSERT_FALSE(MustCompact(compactor).compacted_to.has_value());
  int64_t previous_round_revision = Stats().revision;
  int64_t steady_watcher = Stats().revision;   // reads at every round
  int64_t stalled_watcher = Stats().revision;  // never reads after its list
  int64_t writes = 0;
  int rounds = 0;

  for (auto t = 10s; t <= 2h; t += 10s) {
    clock_.Advance(10s);
    for (int i = 0; i < kObjects; ++i) {
      if (t % 30s == 0s) {
        WriteState(names[i], "t" + std::to_string(t.count()));
        ++writes;
      }
      const bool chatty = i < kObjects / 2;
      if (chatty || t % 1min == 0s) {
        Event(names[i], "probe at " + std::to_string(t.count()));
      }
    }
    if (t % kInterval != 0s) {
      continue;
    }
    // The steady watcher reads just before the round, as a watcher polling far more often than
    // once an interval would have.
    auto read = store_->WatchSince(steady_watcher, 100000);
    ASSERT_TRUE(read.ok()) << "steady watcher at round " << rounds << ": " << read.status();
    steady_watcher = read->empty() ? steady_watcher : read->back().revision;

    const int64_t before = Stats().revision;
    StoreCompactor::Round round = MustCompact(compactor);
    ++rounds;
    ASSERT_EQ(round.compacted_to, previous_round_revision);
    previous_round_revision = before;
    const SqliteStore::Stats stats = Stats();
    // One interval of status writes: 10 objects x 10 writes.
    EXPECT_LE(stats.changes, kObjects * (kInterval / 30s)) << "round " << rounds;
    EXPECT_EQ(stats.changes, stats.revision - stats.compacted_revision);

    auto events = store_->ListEvents(std::nullopt);
    ASSERT_TRUE(events.ok()) << events.status();
    std::map<std::string, int> per_object;
    const std::string oldest_allowed = FormatRfc3339(clock_.Now() - kTtl);
    for (const Store::Event& e : *events) {
      ++per_object[e.involved.name];
      EXPECT_GE(e.last_seen, oldest_allowed) << "round " << rounds << ": " << e.message;
    }
    for (const auto& [name, n] : per_object) {
      EXPECT_LE(n, kPerObject) << name;
    }
    if (t > kTtl) {
      EXPECT_EQ(per_object[names[0]], kPerObject);  // chatty: 120 in a TTL, the cap binds
      EXPECT_EQ(per_object[names[kObjects - 1]], kTtl / 1min + 1);  // quiet: the TTL binds
    }
  }
  EXPECT_EQ(rounds, 24);
  EXPECT_EQ(writes, kObjects * 240);
  auto stalled = store_->WatchSince(stalled_watcher);
  ASSERT_FALSE(stalled.ok());
  EXPECT_EQ(stalled.status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace sbx::controller
