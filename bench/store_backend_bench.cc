// One store backend measured the way sbx uses it (issue #17's PostgreSQL-vs-SQLite benchmark):
// apply throughput in batches and one object at a time, status-write throughput, and the latency
// from a write to a watcher seeing it. `--db` is anything OpenStore takes (an SQLite path or a
// postgres:// URL), so the same code measures both; bench/store_backends.sh runs it for each and
// prints the ratios. A plain program printing one JSON line. See bench/README.md.
//
//   store_backend_bench --db PATH|URL [--label NAME] [--objects 1000] [--rounds 3]
//                       [--samples 200] [--interval-ms 10]
//
// The database must be new (an absent SQLite file, an empty PostgreSQL database): the objects'
// names are fixed, and every measurement creates its own.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_manifests.h"
#include "controller/store/open_store.h"

namespace sbx::controller {
namespace {

using Steady = std::chrono::steady_clock;

struct Args {
  std::string db;
  std::string label;
  int objects = 1000;
  int rounds = 3;
  int samples = 200;
  int interval_ms = 10;
};

[[noreturn]] void Die(const std::string& what, const api::Status& status) {
  std::fprintf(stderr, "store_backend_bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::exit(1);
}

double Seconds(Steady::duration d) { return std::chrono::duration<double>(d).count(); }
double Ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Nearest-rank percentile (p in [0, 1]).
double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(p * static_cast<double>(v.size()) + 0.999999);
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double Median(std::vector<double> v) { return Percentile(std::move(v), 0.5); }

std::unique_ptr<Store> MustOpen(const std::string& db) {
  auto store = OpenStore(db);
  if (!store.ok()) {
    Die("open " + DisplayDatabase(db), store.status());
  }
  return std::move(store).value();
}

std::vector<ApplyResult> MustApply(Store& store, const std::vector<Object>& objects,
                                   ApplyAction expected) {
  auto results = store.Apply(objects, {});
  if (!results.ok()) {
    Die("apply", results.status());
  }
  for (const ApplyResult& r : *results) {
    if (r.action != expected) {
      Die("apply", api::InternalError("unexpected action for " + r.key.ToString()));
    }
  }
  return std::move(results).value();
}

struct Latencies {
  std::vector<double> seen_ms;   // write start → the watcher has the change
  std::vector<double> write_ms;  // write start → UpdateStatus returned (the commit)
};

// `samples` status writes on `writer`, `interval_ms` apart, while a thread watches `watcher`
// the way the engine does (WaitForChange, then WatchSince from the last revision seen).
// `tag` makes every write a change (an unchanged status is not written).
Latencies WatchLatency(Store& writer, Store& watcher, std::vector<Object> targets,
                       const std::string& tag, const Args& args) {
  std::mutex mu;
  std::map<int64_t, Steady::time_point> seen;  // revision → when the watcher read it
  auto from = watcher.CurrentRevision();
  if (!from.ok()) {
    Die("current revision", from.status());
  }
  std::atomic<int64_t> last_seen{*from};
  std::jthread watch([&](std::stop_token stop) {
    int64_t since = *from;
    while (!stop.stop_requested()) {
      watcher.WaitForChange(std::chrono::milliseconds(200));
      auto changes = watcher.WatchSince(since);
      if (!changes.ok()) {
        Die("watch", changes.status());
      }
      const auto now = Steady::now();
      std::lock_guard lock(mu);
      for (const Store::Change& c : *changes) {
        seen.emplace(c.revision, now);
        since = c.revision;
      }
      last_seen = since;
    }
  });

  std::map<int64_t, Steady::time_point> started;  // revision → when its write began
  Latencies out;
  for (int i = 0; i < args.samples; ++i) {
    Object& o = targets[static_cast<size_t>(i) % targets.size()];
    o.sandbox_status().state = "RUNNING";
    o.sandbox_status().boot_id = tag + "-" + std::to_string(i);
    const auto before = Steady::now();
    auto written = writer.UpdateStatus(o);
    const auto after = Steady::now();
    if (!written.ok()) {
      Die("update status", written.status());
    }
    o = *std::move(written);
    started[o.metadata.resource_version] = before;
    out.write_ms.push_back(Ms(after - before));
    std::this_thread::sleep_for(std::chrono::milliseconds(args.interval_ms));
  }
  const int64_t last = targets.empty() ? *from : started.rbegin()->first;
  const auto deadline = Steady::now() + std::chrono::seconds(30);
  while (last_seen < last && Steady::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  watch.request_stop();
  watch.join();
  for (const auto& [revision, at] : started) {
    auto it = seen.find(revision);
    if (it == seen.end()) {
      Die("watch", api::InternalError("revision " + std::to_string(revision) + " never seen"));
    }
    out.seen_ms.push_back(Ms(it->second - at));
  }
  return out;
}

int Main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--db" && has_value) {
      args.db = argv[++i];
    } else if (flag == "--label" && has_value) {
      args.label = argv[++i];
    } else if (flag == "--objects" && has_value) {
      args.objects = std::atoi(argv[++i]);
    } else if (flag == "--rounds" && has_value) {
      args.rounds = std::atoi(argv[++i]);
    } else if (flag == "--samples" && has_value) {
      args.samples = std::atoi(argv[++i]);
    } else if (flag == "--interval-ms" && has_value) {
      args.interval_ms = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: store_backend_bench --db PATH|URL [--label NAME] [--objects N] "
                   "[--rounds N] [--samples N] [--interval-ms N]\n");
      return 2;
    }
  }
  if (args.db.empty() || args.objects <= 0 || args.rounds <= 0 || args.samples <= 0) {
    std::fprintf(stderr, "store_backend_bench: --db is required; counts must be positive\n");
    return 2;
  }
  std::unique_ptr<Store> store = MustOpen(args.db);
  // A second store on the same database: another process's view (sbxctl apply → sbxd's watch).
  std::unique_ptr<Store> other = MustOpen(args.db);

  // Batch: `objects` creates in one Apply (one transaction), into a namespace of their own per
  // round; then the same manifests again, unchanged (reads and compares only).
  std::vector<double> batch_rate;
  std::vector<double> unchanged_rate;
  for (int r = 0; r < args.rounds; ++r) {
    const std::vector<Object> objects =
        bench::SandboxManifests("batch-" + std::to_string(r), args.objects);
    auto start = Steady::now();
    MustApply(*store, objects, ApplyAction::kCreated);
    batch_rate.push_back(args.objects / Seconds(Steady::now() - start));
    start = Steady::now();
    MustApply(*store, objects, ApplyAction::kUnchanged);
    unchanged_rate.push_back(args.objects / Seconds(Steady::now() - start));
  }

  // Single: one Apply (one transaction, one commit) per object, as `sbxctl apply -f` of one
  // file or a reconciler's single write.
  const std::vector<Object> singles = bench::SandboxManifests("single", args.objects);
  std::vector<Object> stored;
  stored.reserve(singles.size());
  auto start = Steady::now();
  for (const Object& o : singles) {
    stored.push_back(MustApply(*store, {o}, ApplyAction::kCreated).front().object);
  }
  const double single_rate = args.objects / Seconds(Steady::now() - start);

  // Status writes, one per transaction: what reconciles do most.
  start = Steady::now();
  for (size_t i = 0; i < stored.size(); ++i) {
    stored[i].sandbox_status().state = "PENDING";
    auto written = store->UpdateStatus(stored[i]);
    if (!written.ok()) {
      Die("update status", written.status());
    }
    stored[i] = *std::move(written);
  }
  const double status_rate = args.objects / Seconds(Steady::now() - start);

  // Watch latency: written through one store, watched through the other (another process's
  // view, e.g. sbxctl → sbxd), and through the same store (sbxd's own status writes → its
  // engine's watch).
  const Latencies cross = WatchLatency(*other, *store, stored, "other", args);
  for (Object& o : stored) {
    auto fresh = store->Get(api::KeyOf(o));
    if (!fresh.ok()) {
      Die("get", fresh.status());
    }
    o = *std::move(fresh);
  }
  const Latencies same = WatchLatency(*store, *store, stored, "same", args);

  std::printf(
      "{\"backend\":\"%s\",\"db\":\"%s\",\"objects\":%d,\"rounds\":%d,\"samples\":%d,"
      "\"apply_batch_objects_per_s\":%.0f,\"reapply_unchanged_objects_per_s\":%.0f,"
      "\"apply_single_objects_per_s\":%.0f,\"status_writes_per_s\":%.0f,"
      "\"watch_other_p50_ms\":%.2f,\"watch_other_p95_ms\":%.2f,\"watch_other_p99_ms\":%.2f,"
      "\"watch_same_p50_ms\":%.2f,\"watch_same_p95_ms\":%.2f,\"watch_same_p99_ms\":%.2f,"
      "\"write_p50_ms\":%.2f,\"write_p99_ms\":%.2f}\n",
      args.label.c_str(), DisplayDatabase(args.db).c_str(), args.objects, args.rounds, args.samples,
      Median(batch_rate), Median(unchanged_rate), single_rate, status_rate,
      Percentile(cross.seen_ms, 0.5), Percentile(cross.seen_ms, 0.95),
      Percentile(cross.seen_ms, 0.99), Percentile(same.seen_ms, 0.5),
      Percentile(same.seen_ms, 0.95), Percentile(same.seen_ms, 0.99),
      Percentile(cross.write_ms, 0.5), Percentile(cross.write_ms, 0.99));
  return 0;
}

}  // namespace
}  // namespace sbx::controller

int main(int argc, char** argv) { return sbx::controller::Main(argc, argv); }
