// The engine's sources and worker loop against the real stores — SqliteStore (":memory:") and
// PostgresStore (a fresh database on a throwaway PostgreSQL 15): what the fake store in
// store_watch_test.cc assumes about WatchSince/WaitForChange must hold for both.
#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "controller/engine/manager.h"
#include "controller/engine/store_watch.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/controller/engine/poll.h"
#include "tests/unit/controller/store/store_backends.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;
using api::Kind;
using api::ObjectKey;
using api::StatusOr;
using testing_internal::PollUntil;

// Reads the object fresh and writes status.observedGeneration if it is behind — the shape of a
// real level-based reconciler, including its own status write coming back through the watch.
class ObservingReconciler final : public Reconciler {
 public:
  explicit ObservingReconciler(Store& store) : store_(store) {}
  Kind kind() const override { return Kind::kSandbox; }
  StatusOr<ReconcileResult> Reconcile(const ObjectKey& key, std::stop_token) override {
    {
      std::lock_guard lock(mu_);
      ++calls_[key];
    }
    StatusOr<api::Object> object = store_.Get(key);
    if (object.status().code() == api::StatusCode::kNotFound) {
      std::lock_guard lock(mu_);
      ++gone_[key];
      return ReconcileResult::Done();
    }
    RETURN_IF_ERROR(object.status());
    api::SandboxStatus& status = object->sandbox_status();
    if (status.observed_generation != object->metadata.generation) {
      status.observed_generation = object->metadata.generation;
      RETURN_IF_ERROR(store_.UpdateStatus(*object).status());
    }
    return ReconcileResult::Done();
  }
  int calls(const ObjectKey& key) {
    std::lock_guard lock(mu_);
    return calls_[key];
  }
  int gone(const ObjectKey& key) {
    std::lock_guard lock(mu_);
    return gone_[key];
  }

 private:
  Store& store_;
  std::mutex mu_;
  std::map<ObjectKey, int> calls_;  // Guarded by mu_.
  std::map<ObjectKey, int> gone_;   // Guarded by mu_.
};

class StoreWatchRealStoreTest : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(Backends, StoreWatchRealStoreTest, StoreBackends(), BackendName);

TEST_P(StoreWatchRealStoreTest, ManagerReconcilesWhatIsAppliedAndSettles) {
  testing::FakeClock clock;
  auto opened = OpenTestStore(GetParam(), TestStoreOptions{.clock = &clock});
  ASSERT_TRUE(opened.ok()) << opened.status();
  Store& store = **opened;
  ASSERT_TRUE(store.Apply({api::MakeObject(Kind::kSandbox, "a")}, {}).ok());

  ObservingReconciler reconciler(store);
  StoreWatchOptions watch_options;
  watch_options.poll = 20ms;
  StoreWatch watch(store, clock, watch_options);
  Manager manager(clock);
  manager.Register(reconciler);
  manager.AddSource(watch);
  manager.Start();

  const ObjectKey a{Kind::kSandbox, "default", "a"};
  const ObjectKey b{Kind::kSandbox, "default", "b"};
  // Initial list → reconcile → status write → watch → reconcile again, which writes nothing.
  ASSERT_TRUE(PollUntil([&] {
    auto object = store.Get(a);
    return object.ok() && object->sandbox_status().observed_generation == 1;
  }));
  ASSERT_TRUE(PollUntil([&] {
    auto rev = store.CurrentRevision();
    return rev.ok() && watch.last_revision() == *rev && manager.Stats().queue.depth == 0 &&
           manager.Stats().queue.processing == 0;
  }));
  const int settled = reconciler.calls(a);
  EXPECT_GE(settled, 1);
  EXPECT_LE(settled, 3);

  ASSERT_TRUE(store.Apply({api::MakeObject(Kind::kSandbox, "b")}, {}).ok());
  ASSERT_TRUE(PollUntil([&] {
    auto object = store.Get(b);
    return object.ok() && object->sandbox_status().observed_generation == 1;
  }));

  ASSERT_TRUE(store.Delete(a).ok());
  ASSERT_TRUE(PollUntil([&] { return reconciler.gone(a) >= 1; }));
  manager.Stop();
  EXPECT_EQ(manager.Stats().transient_errors_total + manager.Stats().terminal_errors_total, 0);
}

}  // namespace
}  // namespace sbx::controller
