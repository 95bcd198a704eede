#include "controller/engine/leader_elector.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "controller/store/sqlite_store.h"
#include "tests/support/fake_clock.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;

// A Clock over FakeClock that knows the deadline of every thread sleeping in it, so a test can
// advance time only once every thread has finished reacting and parked with a future deadline
// (FakeClock's sleeper count alone cannot tell a woken sleeper from a parked one).
class SteppingClock final : public Clock {
 public:
  WallTime Now() const override { return fake_.Now(); }
  SteadyTime Steady() const override { return fake_.Steady(); }
  bool SleepUntil(SteadyTime deadline, std::stop_token stop) override {
    {
      std::lock_guard lock(mu_);
      deadlines_.insert(deadline);
    }
    const bool reached = fake_.SleepUntil(deadline, stop);
    std::lock_guard lock(mu_);
    deadlines_.erase(deadlines_.find(deadline));
    return reached;
  }

  // Blocks (real time, bounded) until `done()` or at least n threads sleep with a deadline in
  // the future; false on timeout.
  bool WaitParked(
      int n, const std::function<bool()>& done = [] { return false; }) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < give_up) {
      if (done() || Parked() >= n) {
        return true;
      }
      std::this_thread::yield();
    }
    return false;
  }
  void Advance(std::chrono::nanoseconds d) { fake_.Advance(d); }

 private:
  int Parked() const {
    const SteadyTime now = fake_.Steady();
    std::lock_guard lock(mu_);
    return static_cast<int>(std::distance(deadlines_.upper_bound(now), deadlines_.end()));
  }

  testing::FakeClock fake_;
  mutable std::mutex mu_;
  std::multiset<SteadyTime> deadlines_;  // Guarded by mu_.
};

class LeaderElectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sbx-leader-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/sbx.db";
    store_a_ = Open();
    store_b_ = Open();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SqliteStore> Open() {
    SqliteStore::Options options;
    options.clock = &clock_;
    options.busy_timeout = 20ms;
    auto store = SqliteStore::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  LeaderElector::Options Opts(std::string identity) {
    LeaderElector::Options o;
    o.identity = std::move(identity);
    o.lease_duration = 15s;
    o.renew_interval = 5s;
    o.retry_interval = 2s;
    return o;
  }

  SteppingClock clock_;
  std::string dir_;
  std::string path_;
  std::unique_ptr<SqliteStore> store_a_;
  std::unique_ptr<SqliteStore> store_b_;
};

TEST_F(LeaderElectorTest, StandbyTakesOverWithinTheLeaseDurationAfterTheLeaderCrashes) {
  LeaderElector a(*store_a_, clock_, Opts("a"));
  LeaderElector b(*store_b_, clock_, Opts("b"));
  ASSERT_TRUE(a.WaitUntilLeader({}));
  EXPECT_TRUE(a.is_leader());

  std::atomic<int> a_lost{0};
  std::jthread renew_a([&](std::stop_token st) { a.RunRenewals(st, [&] { ++a_lost; }); });
  std::atomic<bool> b_done{false};
  std::jthread wait_b([&](std::stop_token st) {
    EXPECT_TRUE(b.WaitUntilLeader(st));
    b_done = true;
  });

  // 30 s of renewals: b stays standby the whole time.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(clock_.WaitParked(2));
    clock_.Advance(1s);
  }
  ASSERT_TRUE(clock_.WaitParked(2));
  EXPECT_FALSE(b.is_leader());
  EXPECT_TRUE(a.is_leader());
  EXPECT_EQ(a_lost, 0);

  // Crash a: its renewals stop, without a Release.
  renew_a.request_stop();
  renew_a.join();
  const Clock::SteadyTime crashed_at = clock_.Steady();
  while (!b_done) {
    ASSERT_TRUE(clock_.WaitParked(1, [&] { return b_done.load(); }));
    if (b_done) {
      break;
    }
    clock_.Advance(1s);
    ASSERT_LE(clock_.Steady() - crashed_at, 17s) << "b did not take over in time";
  }
  EXPECT_TRUE(b.is_leader());
  // Not before a's last renewal (at most renew_interval before the crash) had expired.
  EXPECT_GE(clock_.Steady() - crashed_at, 10s);
  EXPECT_EQ(a_lost, 0);  // a stopped renewing; it never learned it lost
}

TEST_F(LeaderElectorTest, StandbyTakesOverAtItsNextAttemptAfterARelease) {
  LeaderElector a(*store_a_, clock_, Opts("a"));
  LeaderElector b(*store_b_, clock_, Opts("b"));
  ASSERT_TRUE(a.WaitUntilLeader({}));
  std::atomic<bool> b_done{false};
  std::jthread wait_b([&](std::stop_token st) {
    EXPECT_TRUE(b.WaitUntilLeader(st));
    b_done = true;
  });
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(clock_.WaitParked(1));
    clock_.Advance(1s);
  }
  ASSERT_TRUE(clock_.WaitParked(1));
  EXPECT_FALSE(b.is_leader());

  a.Release();
  EXPECT_FALSE(a.is_leader());
  const Clock::SteadyTime released_at = clock_.Steady();
  while (true) {
    ASSERT_TRUE(clock_.WaitParked(1, [&] { return b_done.load(); }));
    if (b_done) {
      break;
    }
    clock_.Advance(500ms);
    ASSERT_LE(clock_.Steady() - released_at, 2s) << "b did not take over at its next attempt";
  }
  EXPECT_TRUE(b.is_leader());
}

// `sbxd --once`: one attempt, no waiting; the same lease as the daemon.
TEST_F(LeaderElectorTest, TryAcquireMakesOneAttemptAndHoldsTheLeaseLikeALeader) {
  LeaderElector daemon(*store_a_, clock_, Opts("daemon"));
  LeaderElector once(*store_b_, clock_, Opts("once"));
  ASSERT_TRUE(daemon.WaitUntilLeader({}));
  auto held = once.TryAcquire();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_FALSE(*held);
  EXPECT_FALSE(once.is_leader());
  auto lease = store_b_->GetLease("sbxd");
  ASSERT_TRUE(lease.ok() && lease->has_value());
  EXPECT_EQ((*lease)->holder, "daemon");

  daemon.Release();
  held = once.TryAcquire();
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_TRUE(*held);
  EXPECT_TRUE(once.is_leader());
  auto daemon_again = store_a_->TryAcquireLease("sbxd", "daemon", 15s);
  ASSERT_TRUE(daemon_again.ok());
  EXPECT_FALSE(*daemon_again);  // the pass holds it: a daemon starting now stays standby
  once.Release();
  lease = store_a_->GetLease("sbxd");
  ASSERT_TRUE(lease.ok());
  EXPECT_FALSE(lease->has_value());
}

TEST_F(LeaderElectorTest, WaitUntilLeaderReturnsFalseWhenStopped) {
  LeaderElector a(*store_a_, clock_, Opts("a"));
  LeaderElector b(*store_b_, clock_, Opts("b"));
  ASSERT_TRUE(a.WaitUntilLeader({}));
  std::atomic<int> result{-1};
  std::jthread wait_b([&](std::stop_token st) { result = b.WaitUntilLeader(st) ? 1 : 0; });
  ASSERT_TRUE(clock_.WaitParked(1));
  wait_b.request_stop();
  wait_b.join();
  EXPECT_EQ(result, 0);
  EXPECT_FALSE(b.is_leader());
}

TEST_F(LeaderElectorTest, LosesAtOnceWhenAnotherHolderHasTheLease) {
  LeaderElector a(*store_a_, clock_, Opts("a"));
  ASSERT_TRUE(a.WaitUntilLeader({}));
  std::atomic<int> lost{0};
  std::atomic<bool> returned{false};
  std::jthread renew_a([&](std::stop_token st) {
    a.RunRenewals(st, [&] { ++lost; });
    returned = true;
  });
  ASSERT_TRUE(clock_.WaitParked(1));
  // Someone (an operator, a confused peer) takes the lease away.
  ASSERT_TRUE(store_b_->ReleaseLease("sbxd", "a").ok());
  auto taken = store_b_->TryAcquireLease("sbxd", "intruder", 15s);
  ASSERT_TRUE(taken.ok() && *taken);

  clock_.Advance(5s);  // a's next renewal
  ASSERT_TRUE(clock_.WaitParked(1, [&] { return returned.load(); }));
  EXPECT_TRUE(returned);
  EXPECT_EQ(lost, 1);
  EXPECT_FALSE(a.is_leader());
}

TEST_F(LeaderElectorTest, RetriesStoreErrorsAndLosesOnlyAfterTheLeaseDuration) {
  std::mutex mu;
  std::vector<std::string> errors;
  LeaderElector::Options o = Opts("a");
  o.on_store_error = [&](std::string_view op, const api::Status& s) {
    std::lock_guard lock(mu);
    errors.push_back(std::string(op) + ": " + s.ToString());
  };
  LeaderElector a(*store_a_, clock_, o);
  ASSERT_TRUE(a.WaitUntilLeader({}));
  const Clock::SteadyTime renewed_at = clock_.Steady();

  // Another connection holds the write lock: every renewal fails with kUnavailable after the
  // (real-time, 20 ms) busy timeout.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);

  std::atomic<int> lost{0};
  std::atomic<bool> returned{false};
  std::jthread renew_a([&](std::stop_token st) {
    a.RunRenewals(st, [&] { ++lost; });
    returned = true;
  });
  auto done = [&] { return returned.load(); };
  while (clock_.Steady() - renewed_at < 14s) {
    ASSERT_TRUE(clock_.WaitParked(1, done));
    ASSERT_FALSE(returned) << "lost too early, at +" << (clock_.Steady() - renewed_at) / 1ms
                           << " ms";
    clock_.Advance(1s);
  }
  ASSERT_TRUE(clock_.WaitParked(1, done));
  EXPECT_TRUE(a.is_leader());
  EXPECT_EQ(lost, 0);
  clock_.Advance(1s);  // +15 s: the lease may have expired
  ASSERT_TRUE(clock_.WaitParked(1, done));
  EXPECT_TRUE(returned);
  EXPECT_EQ(lost, 1);
  EXPECT_FALSE(a.is_leader());
  {
    std::lock_guard lock(mu);
    ASSERT_GE(errors.size(), 5u);  // +5, +7, +9, +11, +13, +15
    EXPECT_EQ(errors[0].rfind("renew: UNAVAILABLE", 0), 0u) << errors[0];
  }
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
}

TEST_F(LeaderElectorTest, RenewalsKeepTheLeaseAcrossManyDurations) {
  LeaderElector a(*store_a_, clock_, Opts("a"));
  ASSERT_TRUE(a.WaitUntilLeader({}));
  std::atomic<int> lost{0};
  std::jthread renew_a([&](std::stop_token st) { a.RunRenewals(st, [&] { ++lost; }); });
  for (int i = 0; i < 12; ++i) {  // 60 s = 4 lease durations
    ASSERT_TRUE(clock_.WaitParked(1));
    clock_.Advance(5s);
  }
  ASSERT_TRUE(clock_.WaitParked(1));
  auto other = store_b_->TryAcquireLease("sbxd", "b", 15s);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(*other);
  EXPECT_EQ(lost, 0);
  renew_a.request_stop();
  renew_a.join();
  a.Release();
  other = store_b_->TryAcquireLease("sbxd", "b", 15s);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(*other);
}

TEST(LeaderElectorIdentityTest, DefaultIdentityNamesHostAndPid) {
  const std::string id = LeaderElector::DefaultIdentity();
  EXPECT_FALSE(id.empty());
  EXPECT_NE(id.find("-" + std::to_string(getpid())), std::string::npos) << id;
}

}  // namespace
}  // namespace sbx::controller
