// Store growth over simulated time (issue #12): a fleet of Sandboxes whose status is written on
// a fixed cadence and which record events, driven straight into SqliteStore on a real file with
// an injected clock, once as sbx did before (no compaction, no event bounds) and once with
// sbxd's defaults (StoreCompactor every 5 minutes, event TTL 1 h, 100 events per object).
// Prints the rows kept and the file sizes (database + WAL after a TRUNCATE checkpoint).
// See bench/README.md ("Store growth") for how to run it and the numbers.
//
//   store_growth [--objects 100] [--hours 24] [--status-every 30] [--event-every 60]
//                [--dir DIR] [--mode both|compacted|uncompacted]
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/conditions.h"
#include "controller/base/clock.h"
#include "controller/engine/store_compactor.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {
namespace {

using namespace std::chrono_literals;

// Time that moves only when the simulation says so.
class SimulatedClock final : public Clock {
 public:
  WallTime Now() const override {
    std::lock_guard lock(mu_);
    return WallTime(std::chrono::seconds(1788264000)) + elapsed_;  // 2026-09-01T12:00:00Z
  }
  SteadyTime Steady() const override {
    std::lock_guard lock(mu_);
    return SteadyTime() + elapsed_;
  }
  bool SleepUntil(SteadyTime, std::stop_token) override { return false; }  // never sleeps
  void Advance(std::chrono::seconds d) {
    std::lock_guard lock(mu_);
    elapsed_ += d;
  }

 private:
  mutable std::mutex mu_;
  std::chrono::nanoseconds elapsed_{0};  // Guarded by mu_.
};

struct Config {
  int objects = 100;
  int hours = 24;
  int status_every_s = 30;
  int event_every_s = 60;
  std::filesystem::path dir;
};

struct Result {
  int64_t status_writes = 0;
  int64_t events_recorded = 0;
  SqliteStore::Stats stats;
  uintmax_t db_bytes = 0;
  uintmax_t wal_bytes = 0;
  double seconds = 0;
};

void Check(const api::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "store_growth: %s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

// A Sandbox status as sbxd writes it: state, two conditions, one setup result.
Object WithStatus(Object object, int64_t tick, const std::string& now) {
  api::SandboxStatus& status = object.sandbox_status();
  status.observed_generation = object.metadata.generation;
  status.sandbox_name = "sandboxes/default-" + object.metadata.name;
  status.state = tick % 2 == 0 ? "RUNNING" : "STOPPED";
  status.create_time = "2026-09-01T12:00:00Z";
  status.boot_id = "boot-" + std::to_string(tick);
  status.conditions = {
      {std::string(api::condition::kReady),
       tick % 2 == 0 ? api::ConditionStatus::kTrue : api::ConditionStatus::kFalse,
       std::string(tick % 2 == 0 ? api::reason::kRunning : api::reason::kSandboxStopped),
       tick % 2 == 0 ? "" : "the sandbox stopped after inactivity; starting it again", now,
       object.metadata.generation},
      {std::string(api::condition::kSynced), api::ConditionStatus::kTrue,
       std::string(api::reason::kSynced), "", "2026-09-01T12:00:00Z", object.metadata.generation}};
  status.setup = {{"tools", status.boot_id, 0, true, "", now}};
  return object;
}

Result Run(const Config& config, bool compacted) {
  const std::filesystem::path path = config.dir / (compacted ? "compacted.db" : "uncompacted.db");
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::filesystem::remove(path.string() + suffix);
  }
  SimulatedClock clock;
  SqliteStore::Options options;
  options.clock = &clock;
  options.max_events_per_object = compacted ? 100 : 0;
  auto opened = SqliteStore::Open(path.string(), options);
  Check(opened.status(), "open");
  SqliteStore& store = **opened;
  StoreCompactor compactor(store, clock, StoreCompactorOptions{});

  std::vector<Object> objects;
  for (int i = 0; i < config.objects; ++i) {
    Object o = api::MakeObject(api::Kind::kSandbox, "worker-" + std::to_string(i));
    o.sandbox_spec().sandbox_id = "default-" + o.metadata.name;
    o.sandbox_spec().display_name = "fleet worker " + std::to_string(i);
    o.sandbox_spec().inactivity_timeout = 15min;
    o.sandbox_spec().setup.push_back({"tools", "mkdir -p /home/sandbox-agent/workspace", 60s});
    objects.push_back(std::move(o));
  }
  auto applied = store.Apply(objects, {});
  Check(applied.status(), "apply");
  for (size_t i = 0; i < objects.size(); ++i) {
    objects[i] = (*applied)[i].object;
  }

  Result result;
  const auto started = std::chrono::steady_clock::now();
  const int64_t end = int64_t{config.hours} * 3600;
  const int64_t compaction_every =
      std::chrono::duration_cast<std::chrono::seconds>(StoreCompactorOptions{}.interval).count();
  for (int64_t t = 1; t <= end; ++t) {
    clock.Advance(1s);
    const std::string now = FormatRfc3339(clock.Now());
    for (int i = 0; i < config.objects; ++i) {
      // Spread the fleet over the period, as a real one is.
      const int64_t phase = t + i;
      if (phase % config.status_every_s == 0) {
        auto written =
            store.UpdateStatus(WithStatus(objects[i], phase / config.status_every_s, now));
        Check(written.status(), "status");
        objects[i] = *written;
        ++result.status_writes;
      }
      if (phase % config.event_every_s == 0) {
        Store::Event event;
        event.involved = api::KeyOf(objects[i]);
        event.reason = "ExecutorProbed";
        event.message = "executor pid " + std::to_string(1000 + phase % 997) + " alive; " +
                        std::to_string(phase % 89) + " ms";
        Check(store.RecordEvent(event), "event");
        ++result.events_recorded;
      }
    }
    if (compacted && t % compaction_every == 0) {
      Check(compactor.CompactOnce().status(), "compact");
    }
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  auto stats = store.ReadStats();
  Check(stats.status(), "stats");
  result.stats = *stats;
  Check(store.Checkpoint(), "checkpoint");
  result.db_bytes = std::filesystem::file_size(path);
  const std::filesystem::path wal = path.string() + "-wal";
  result.wal_bytes = std::filesystem::exists(wal) ? std::filesystem::file_size(wal) : 0;
  return result;
}

void Print(const char* name, const Result& r) {
  std::printf("%-12s %9lld %9lld %9lld %9lld %12.1f %10.1f %8.1f\n", name,
              static_cast<long long>(r.status_writes), static_cast<long long>(r.events_recorded),
              static_cast<long long>(r.stats.changes), static_cast<long long>(r.stats.events),
              static_cast<double>(r.db_bytes) / (1 << 20), static_cast<double>(r.wal_bytes) / 1024,
              r.seconds);
}

}  // namespace
}  // namespace sbx::controller

int main(int argc, char** argv) {
  using sbx::controller::Config;
  Config config;
  std::string mode = "both";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--objects") {
      config.objects = std::atoi(value);
    } else if (flag == "--hours") {
      config.hours = std::atoi(value);
    } else if (flag == "--status-every") {
      config.status_every_s = std::atoi(value);
    } else if (flag == "--event-every") {
      config.event_every_s = std::atoi(value);
    } else if (flag == "--dir") {
      config.dir = value;
    } else if (flag == "--mode") {
      mode = value;
    } else {
      std::fprintf(stderr, "store_growth: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (config.objects <= 0 || config.hours <= 0 || config.status_every_s <= 0 ||
      config.event_every_s <= 0) {
    std::fprintf(stderr, "store_growth: --objects, --hours, --*-every must be positive\n");
    return 2;
  }
  const bool temp = config.dir.empty();
  if (temp) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "sbx-store-growth-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    config.dir = tmpl;
  }
  std::printf("%d objects, %d simulated hours, status every %d s, an event every %d s each\n",
              config.objects, config.hours, config.status_every_s, config.event_every_s);
  std::printf("%-12s %9s %9s %9s %9s %12s %10s %8s\n", "mode", "statuses", "events", "changes",
              "events", "db MiB", "wal KiB", "wall s");
  std::printf("%-12s %9s %9s %9s %9s\n", "", "written", "recorded", "kept", "kept");
  if (mode == "both" || mode == "uncompacted") {
    Print("uncompacted", sbx::controller::Run(config, /*compacted=*/false));
  }
  if (mode == "both" || mode == "compacted") {
    Print("compacted", sbx::controller::Run(config, /*compacted=*/true));
  }
  if (temp) {
    std::filesystem::remove_all(config.dir);
  }
  return 0;
}
