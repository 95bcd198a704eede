// The API server under load (issue #16): requests/s of get and list with 1,000 objects in the
// store — alone, and while a writer updates status as reconciles do — and the latency of one
// change fanned out to 200 open watches. A plain program (it measures rates and latency
// distributions over real loopback HTTP, not a Google Benchmark loop). See bench/README.md.
//
//   api_server_bench [--seconds N] [--clients N] [--watchers N] [--changes N]
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/defaults.h"
#include "controller/apiserver/api_server.h"
#include "controller/apiserver/http_server.h"
#include "controller/apiserver/tokens.h"
#include "controller/base/clock.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/store/sqlite_store.h"

namespace sbx::controller {
namespace {

using Steady = std::chrono::steady_clock;
constexpr char kToken[] = "bench-viewer-token-0123456789";
constexpr int kObjects = 1000;

struct Args {
  int seconds = 5;
  int clients = 4;
  int watchers = 200;
  int changes = 20;
};

double Ms(Steady::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// Requests/s of GET `path` from `clients` threads for `seconds`; a request that is not 200
// aborts the run.
double Rate(const std::string& url, const std::string& path, int clients, int seconds,
            size_t* bytes) {
  std::atomic<long> done{0};
  std::atomic<size_t> total_bytes{0};
  std::atomic<bool> failed{false};
  const auto until = Steady::now() + std::chrono::seconds(seconds);
  std::vector<std::jthread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto transport = http::MakeCppRestTransport();
      http::HttpRequest request;
      request.method = "GET";
      request.url = url + path;
      request.headers.emplace_back("Authorization", std::string("Bearer ") + kToken);
      while (Steady::now() < until && !failed) {
        http::HttpResult r = transport->Send(request, {});
        if (!r.status.ok() || r.response.status != 200) {
          std::fprintf(stderr, "GET %s failed: %s %d\n", path.c_str(), r.status.ToString().c_str(),
                       r.response.status);
          failed = true;
          return;
        }
        total_bytes += r.response.body.size();
        ++done;
      }
    });
  }
  threads.clear();
  if (failed) {
    std::exit(1);
  }
  if (bytes != nullptr) {
    *bytes = done > 0 ? total_bytes / static_cast<size_t>(done) : 0;
  }
  return static_cast<double>(done) / seconds;
}

int Main(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--seconds") {
      args.seconds = value;
    } else if (flag == "--clients") {
      args.clients = value;
    } else if (flag == "--watchers") {
      args.watchers = value;
    } else if (flag == "--changes") {
      args.changes = value;
    }
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "sbx-api-bench-XXXXXX").string();
  const std::filesystem::path dir = mkdtemp(tmpl.data());
  const std::string db = (dir / "sbx.db").string();
  auto store = *SqliteStore::Open(db);
  auto watch_store = *SqliteStore::Open(db);
  auto writer_store = *SqliteStore::Open(db);  // the "controller": its own connection, as sbxd

  std::vector<api::Object> objects;
  for (int i = 0; i < kObjects; ++i) {
    api::Object o = api::MakeObject(api::Kind::kSandbox, "worker-" + std::to_string(i));
    o.sandbox_spec().display_name = "bench worker " + std::to_string(i);
    o.sandbox_spec().image = "ghcr.io/example/agent:1.2.3";
    o.sandbox_spec().setup.push_back(
        {"deps", "pip install -r requirements.txt", std::chrono::seconds(300)});
    o.metadata.labels = {{"app", "bench"}, {"shard", std::to_string(i % 10)}};
    api::ApplyDefaults(o);
    objects.push_back(std::move(o));
  }
  if (!store->Apply(objects, {}).ok()) {
    std::fprintf(stderr, "seeding failed\n");
    return 1;
  }
  auto tokens =
      *apiserver::TokenTable::Parse(*apiserver::TokenLine("bench", "viewer", kToken), "bench");
  SystemClock clock;
  apiserver::ApiServerOptions options;
  options.max_watches = static_cast<size_t>(args.watchers) + 16;
  apiserver::ApiServer api(*store, *watch_store, tokens, nullptr, clock, options);
  if (!api.Start().ok()) {
    return 1;
  }
  apiserver::HttpServerOptions http_options;
  http_options.max_connections = static_cast<size_t>(args.watchers) + 64;
  apiserver::HttpServer server([&api](apiserver::HttpExchange& x) { api.Handle(x); }, http_options);
  const int port = *server.Start("127.0.0.1", 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  const std::string prefix = "/apis/sbx.dev/v1alpha1/namespaces/default/sandboxes";

  std::printf("objects: %d, clients: %d, %d s per measurement\n", kObjects, args.clients,
              args.seconds);
  size_t list_bytes = 0;
  const double get_rate = Rate(url, prefix + "/worker-500", args.clients, args.seconds, nullptr);
  const double list_rate = Rate(url, prefix, args.clients, args.seconds, &list_bytes);
  const double selector_rate =
      Rate(url, prefix + "?labelSelector=shard%3D3", args.clients, args.seconds, nullptr);
  std::printf("get  (1 object):                 %8.0f req/s\n", get_rate);
  std::printf("list (1,000 objects, %zu KiB):    %8.1f req/s\n", list_bytes / 1024, list_rate);
  std::printf("list -l shard=3 (100 objects):   %8.1f req/s\n", selector_rate);

  // The same reads while a writer updates status as reconciles do (50 writes/s).
  std::atomic<bool> writing{true};
  std::atomic<long> writes{0};
  std::jthread writer([&] {
    int i = 0;
    while (writing) {
      auto o = writer_store->Get(
          {api::Kind::kSandbox, "default", "worker-" + std::to_string(i++ % kObjects)});
      if (o.ok()) {
        o->sandbox_status().state = (i % 2 == 0) ? "RUNNING" : "PENDING";
        if (writer_store->UpdateStatus(*o).ok()) {
          ++writes;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const double get_busy = Rate(url, prefix + "/worker-500", args.clients, args.seconds, nullptr);
  const double list_busy = Rate(url, prefix, args.clients, args.seconds, nullptr);
  writing = false;
  writer = {};
  std::printf(
      "with a status writer (%ld writes): get %8.0f req/s (%.2fx), list %8.1f req/s "
      "(%.2fx)\n",
      writes.load(), get_busy, get_busy / get_rate, list_busy, list_busy / list_rate);

  // Fan-out: `watchers` open watches; `changes` status writes 100 ms apart; the latency from
  // each write to its arrival at each watcher.
  std::mutex mu;
  std::map<int64_t, Steady::time_point> written;  // revision → when its write returned
  std::vector<double> latencies;
  std::atomic<int> opened{0};
  const int64_t from = *store->CurrentRevision();
  std::vector<std::jthread> watchers;
  std::vector<std::stop_source> stops(static_cast<size_t>(args.watchers));
  for (int w = 0; w < args.watchers; ++w) {
    watchers.emplace_back([&, w] {
      auto transport = http::MakeCppRestStreamingTransport();
      http::HttpRequest request;
      request.method = "GET";
      request.url = url + prefix + "?watch=true&resourceVersion=" + std::to_string(from);
      request.headers.emplace_back("Authorization", std::string("Bearer ") + kToken);
      request.timeout = std::chrono::seconds(120);
      std::string buffer;
      int seen = 0;
      http::StreamHandlers handlers;
      handlers.on_open = [&](const http::HttpResponse&) { ++opened; };
      handlers.on_data = [&](std::string_view chunk) {
        const auto now = Steady::now();
        buffer.append(chunk);
        for (size_t nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
          const std::string line = buffer.substr(0, nl);
          buffer.erase(0, nl + 1);
          const size_t at = line.find("\"resourceVersion\":");
          if (at == std::string::npos) {
            continue;
          }
          size_t digits = at + std::strlen("\"resourceVersion\":");
          if (digits < line.size() && line[digits] == '"') {
            ++digits;  // written as a string or a number
          }
          const int64_t rev = std::atoll(line.c_str() + digits);
          std::lock_guard lock(mu);
          if (auto it = written.find(rev); it != written.end()) {
            latencies.push_back(Ms(now - it->second));
          }
          ++seen;
        }
        return seen < args.changes;
      };
      transport->Stream(request, handlers, stops[static_cast<size_t>(w)].get_token());
    });
  }
  while (opened < args.watchers || api.active_watches() < static_cast<size_t>(args.watchers)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int c = 0; c < args.changes; ++c) {
    auto o = writer_store->Get({api::Kind::kSandbox, "default", "worker-" + std::to_string(c)});
    o->sandbox_status().state = "STOPPED";
    // Record the time before the write commits: the watchers may see it before UpdateStatus
    // returns. The revision is the next one (a single writer).
    const auto before = Steady::now();
    {
      std::lock_guard lock(mu);
      written[*writer_store->CurrentRevision() + 1] = before;
    }
    if (!writer_store->UpdateStatus(*o).ok()) {
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto deadline = Steady::now() + std::chrono::seconds(30);
  while (Steady::now() < deadline) {
    {
      std::lock_guard lock(mu);
      if (latencies.size() >= static_cast<size_t>(args.watchers * args.changes)) {
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& s : stops) {
    s.request_stop();
  }
  watchers.clear();
  std::lock_guard lock(mu);
  std::printf(
      "watch fan-out: %d watchers x %d changes = %zu deliveries; latency median %.1f ms, "
      "p90 %.1f ms, p99 %.1f ms, max %.1f ms\n",
      args.watchers, args.changes, latencies.size(), Percentile(latencies, 0.5),
      Percentile(latencies, 0.9), Percentile(latencies, 0.99), Percentile(latencies, 1.0));
  api.Stop();
  server.Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace
}  // namespace sbx::controller

int main(int argc, char** argv) { return sbx::controller::Main(argc, argv); }
