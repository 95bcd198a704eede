// Store apply throughput: 1,000 Sandbox manifests into an empty file store in one Apply, and the
// same 1,000 re-applied unchanged (the `sbxctl apply` of a GitOps loop with nothing to do).
// See bench/README.md for how to run and the numbers.
#include <benchmark/benchmark.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_manifests.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {
namespace {

constexpr int kObjects = 1000;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sbx-bench-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

std::unique_ptr<SqliteStore> MustOpen(const std::string& path) {
  auto store = SqliteStore::Open(path);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    std::abort();
  }
  return std::move(store).value();
}

void MustApply(SqliteStore& store, const std::vector<Object>& objects, ApplyAction expected) {
  auto results = store.Apply(objects, {});
  if (!results.ok() || results->size() != objects.size() || (*results)[0].action != expected) {
    std::fprintf(stderr, "apply failed: %s\n", results.status().ToString().c_str());
    std::abort();
  }
}

// 1,000 creates in one Apply (one transaction) into a fresh, empty file store.
void BM_ApplyCreate1000(benchmark::State& state) {
  const std::vector<Object> objects = bench::SandboxManifests("default", kObjects);
  TempDir dir;
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto store = MustOpen(dir.File("create-" + std::to_string(round++) + ".db"));
    state.ResumeTiming();
    MustApply(*store, objects, ApplyAction::kCreated);
  }
  state.SetItemsProcessed(state.iterations() * kObjects);
}
BENCHMARK(BM_ApplyCreate1000)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same 1,000 manifests re-applied unchanged: reads and compares only, writes nothing.
void BM_ReapplyUnchanged1000(benchmark::State& state) {
  const std::vector<Object> objects = bench::SandboxManifests("default", kObjects);
  TempDir dir;
  auto store = MustOpen(dir.File("reapply.db"));
  MustApply(*store, objects, ApplyAction::kCreated);
  for (auto _ : state) {
    MustApply(*store, objects, ApplyAction::kUnchanged);
  }
  state.SetItemsProcessed(state.iterations() * kObjects);
}
BENCHMARK(BM_ReapplyUnchanged1000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sbx::controller

BENCHMARK_MAIN();
