// ideal_client: the benchmark's measured floor (issue #14 part 3). It makes the calls sbxd makes
// to bring N agent workers up — per worker a sandbox create, a session create, the LIST pages
// that show the sandbox RUNNING, one exec-sync launch of the executor, and environment reads
// until `connected` — with no controller logic at all: one thread per worker, every call issued
// the moment it can be, paced only by the services' own rate limits (given as flags, with the
// server's burst), so the run is as short as those limits, the services' latency and the
// machine allow. bench/converge.sh runs it against the same emulator settings as sbxd, in the
// same run, and reports sbxd ÷ ideal.
//
//   ideal_client --databricks URL --openai URL/v1 -n 100 --databricks-rps 20 [--openai-rps 0]
//                [--list-pages-per-second 2] [--page-size 100] [--poll 200ms] [--prefix ideal]
//   env: DATABRICKS_TOKEN, OPENAI_API_KEY, OPENAI_EXECUTOR_API_KEY
//
// Observing RUNNING: like sbxd's fast sweep, LIST pages (at most --list-pages-per-second, each
// also a Databricks token) while any sandbox is still pending; a GET per sandbox would cost more
// tokens than the whole LIST. A 429 (the pacing here and the server's disagree by a few ms) is
// retried after its Retry-After and counted.
//
// Prints one JSON line: seconds to all connected, calls per endpoint, 429s, and the per-worker
// timeline (create sent → created → RUNNING observed → launch sent → launch answered →
// connected seen) as medians and 90th percentiles of each step, in seconds.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/percent_encoding.h"
#include "controller/base/clock.h"
#include "controller/base/token_bucket.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/http/wire_text.h"

namespace {

using json = nlohmann::json;
using Steady = std::chrono::steady_clock;
using sbx::controller::http::HttpRequest;
using sbx::controller::http::HttpResult;
using std::chrono::milliseconds;

struct Flags {
  std::string databricks;
  std::string openai;  // ends in /v1
  int n = 10;
  double databricks_rps = 20;
  double databricks_burst = 0;  // 0: the emulator's (= rps)
  double openai_rps = 0;        // 0: unlimited
  double list_pages_per_second = 2;
  int page_size = 100;
  milliseconds poll{200};
  std::string prefix = "ideal";
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// The calls, paced per API, counted per endpoint, 429s retried after Retry-After.
class Client {
 public:
  explicit Client(const Flags& f)
      : flags_(f),
        transport_(sbx::controller::http::MakeCppRestTransport()),
        // Two tokens below the server's burst: the server sees each call a few ms after it was
        // paced here, so a full burst on both sides would now and then be one too many.
        databricks_(
            clock_, f.databricks_rps,
            std::max(1.0, (f.databricks_burst > 0 ? f.databricks_burst : f.databricks_rps) - 2)),
        openai_(clock_, f.openai_rps, std::max(1.0, f.openai_rps - 2)),
        databricks_auth_("Bearer " + Env("DATABRICKS_TOKEN")),
        openai_auth_("Bearer " + Env("OPENAI_API_KEY")) {}

  // The parsed JSON body of a 2xx answer; exits the program on anything else (a benchmark).
  json Call(const std::string& endpoint, const std::string& method, const std::string& url,
            const std::optional<json>& body) {
    const bool openai = url.starts_with(flags_.openai);
    sbx::controller::TokenBucket& bucket = openai ? openai_ : databricks_;
    for (int attempt = 0; attempt < 100; ++attempt) {
      bucket.Acquire();
      HttpRequest request;
      request.method = method;
      request.url = url;
      request.headers = {{"Authorization", openai ? openai_auth_ : databricks_auth_}};
      if (openai) {
        request.headers.emplace_back("OpenAI-Beta", "agents=v1");
      }
      if (body) {
        request.headers.emplace_back("Content-Type", "application/json");
        request.body = body->dump();
      }
      HttpResult result = transport_->Send(request, {});
      Count(endpoint);
      if (!result.status.ok()) {
        Fail(endpoint + ": " + result.status.ToString());
      }
      const int status = result.response.status;
      if (status == 429 || status == 503) {
        Count(openai ? "openai.throttled" : "databricks.throttled");
        const std::string* hint = result.response.Header("retry-after");
        std::this_thread::sleep_for(
            milliseconds(hint != nullptr ? std::atoi(hint->c_str()) * 1000 : 1000));
        continue;
      }
      if (status < 200 || status >= 300) {
        Fail(endpoint + ": HTTP " + std::to_string(status) + " " + result.response.body);
      }
      json parsed = json::parse(result.response.body, nullptr, false);
      if (parsed.is_discarded()) {
        Fail(endpoint + ": not JSON: " + result.response.body);
      }
      return parsed;
    }
    Fail(endpoint + ": throttled 100 times");
    return {};
  }

  std::map<std::string, int64_t> Counts() {
    std::lock_guard lock(mu_);
    return counts_;
  }

  [[noreturn]] static void Fail(const std::string& message) {
    std::cerr << "ideal_client: " << message << "\n";
    std::exit(1);
  }

 private:
  void Count(const std::string& endpoint) {
    std::lock_guard lock(mu_);
    ++counts_[endpoint];
  }

  const Flags& flags_;
  sbx::controller::SystemClock clock_;
  std::unique_ptr<sbx::controller::http::HttpTransport> transport_;
  sbx::controller::TokenBucket databricks_;
  sbx::controller::TokenBucket openai_;
  const std::string databricks_auth_;
  const std::string openai_auth_;
  std::mutex mu_;
  std::map<std::string, int64_t> counts_;  // Guarded by mu_.
};

// Which sandboxes are RUNNING, as the LIST pages show; workers wait on it.
class RunningSet {
 public:
  void Pending(const std::string& name) {
    std::lock_guard lock(mu_);
    pending_.insert(name);
  }
  bool AnyPending() {
    std::lock_guard lock(mu_);
    return !pending_.empty();
  }
  void Running(const std::string& name) {
    std::lock_guard lock(mu_);
    if (pending_.erase(name) > 0) {
      cv_.notify_all();
    }
  }
  void WaitRunning(const std::string& name) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !pending_.contains(name); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> pending_;  // Guarded by mu_. Created, not yet seen RUNNING.
};

struct Timeline {
  Steady::time_point create_sent, created, running, launch_sent, launch_answered, connected;
};

double Seconds(Steady::duration d) { return std::chrono::duration<double>(d).count(); }

json Quantiles(std::vector<double> v) {
  if (v.empty()) {
    return json::object();
  }
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return std::round(v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))] *
                      1000) /
           1000;
  };
  return {{"p50", at(0.5)}, {"p90", at(0.9)}, {"max", at(1.0)}};
}

int Run(const Flags& f) {
  Client client(f);
  RunningSet running;
  std::vector<Timeline> timeline(f.n);
  std::atomic<int> done{0};
  const std::string executor_key = Env("OPENAI_EXECUTOR_API_KEY");
  const Steady::time_point start = Steady::now();

  auto worker = [&](int i) {
    char id[64];
    std::snprintf(id, sizeof id, "%s-%04d", f.prefix.c_str(), i + 1);
    const std::string sandbox_id = id;
    Timeline& t = timeline[i];
    running.Pending(sandbox_id);
    t.create_sent = Steady::now();
    client.Call("databricks.create", "POST",
                f.databricks + "/api/2.0/sandboxes?sandbox_id=" + sandbox_id,
                json{{"display_name", sandbox_id},
                     {"spec", {{"compute", {{"inactivity_timeout", "3600s"}}}}}});
    t.created = Steady::now();
    const json session = client.Call(
        "openai.sessions.create", "POST", f.openai + "/agents/sessions",
        json{{"agent", {{"model", "gpt-5-codex"}}},
             {"environment",
              {{"type", "self_hosted"}, {"workspace_directory", "/home/sandbox-agent"}}}});
    const std::string env_id = session.at("environment").at("id").get<std::string>();
    const std::string remote = session.at("environment").at("remote_url").get<std::string>();
    running.WaitRunning(sandbox_id);
    t.running = Steady::now();
    const std::string launch =
        "mkdir -p /home/sandbox-agent/.exec; cd /home/sandbox-agent; setsid nohup codex "
        "exec-server --remote \"$R\" --environment-id \"$E\" > /home/sandbox-agent/.exec/log "
        "2>&1 < /dev/null & echo launched";
    t.launch_sent = Steady::now();
    client.Call("databricks.exec_sync", "POST",
                f.databricks + "/api/2.0/sandbox-exec/sandboxes/" + sandbox_id + "/exec-sync",
                json{{"cmd", "/bin/bash"},
                     {"args", json::array({"-c", launch})},
                     {"envs", {{"R", remote}, {"E", env_id}, {"CODEX_API_KEY", executor_key}}},
                     {"execution_timeout", "30s"}});
    t.launch_answered = Steady::now();
    while (client
               .Call("openai.environments.get", "GET", f.openai + "/agents/environments/" + env_id,
                     std::nullopt)
               .value("status", "") != "connected") {
      std::this_thread::sleep_for(f.poll);
    }
    t.connected = Steady::now();
    ++done;
  };

  // The LIST poller: pages in turn, at most list_pages_per_second, while anything is pending.
  std::jthread lister([&](std::stop_token stop) {
    std::string token;
    const auto gap = std::chrono::duration_cast<Steady::duration>(
        std::chrono::duration<double>(1.0 / f.list_pages_per_second));
    Steady::time_point next = Steady::now();
    while (!stop.stop_requested()) {
      std::this_thread::sleep_until(next);
      next += gap;
      if (!running.AnyPending()) {
        token.clear();
        next = Steady::now() + milliseconds(20);
        continue;
      }
      std::string url =
          f.databricks + "/api/2.0/sandboxes?page_size=" + std::to_string(f.page_size);
      if (!token.empty()) {
        url += "&page_token=" + sbx::api::PercentEncode(token);
      }
      const json page = client.Call("databricks.list", "GET", url, std::nullopt);
      for (const json& s : page.value("sandboxes", json::array())) {
        // status.state, as the Sandbox API answers (reference: `status.state = SANDBOX_STATE_*`).
        // Reading a top-level "state" saw no sandbox ever RUNNING: the client hung.
        if (s.value(json::json_pointer("/status/state"), "") == "SANDBOX_STATE_RUNNING") {
          std::string name = s.value("name", "");
          if (const size_t slash = name.rfind('/'); slash != std::string::npos) {
            name = name.substr(slash + 1);
          }
          running.Running(name);
        }
      }
      token = page.value("next_page_token", "");
    }
  });

  std::vector<std::jthread> workers;
  workers.reserve(f.n);
  for (int i = 0; i < f.n; ++i) {
    workers.emplace_back(worker, i);
  }
  workers.clear();  // joins
  const double total = Seconds(Steady::now() - start);
  lister.request_stop();
  lister.join();

  std::vector<double> to_running, to_launch, launch, to_connected, overall;
  for (const Timeline& t : timeline) {
    to_running.push_back(Seconds(t.running - t.created));
    to_launch.push_back(Seconds(t.launch_sent - t.running));
    launch.push_back(Seconds(t.launch_answered - t.launch_sent));
    to_connected.push_back(Seconds(t.connected - t.launch_answered));
    overall.push_back(Seconds(t.connected - t.create_sent));
  }
  json create;
  {
    std::vector<double> c;
    for (const Timeline& t : timeline) {
      c.push_back(Seconds(t.created - t.create_sent));
    }
    create = Quantiles(c);
  }
  json out = {{"n", f.n},
              {"flow", "ideal_client"},
              {"databricks_rps", f.databricks_rps},
              {"openai_rps", f.openai_rps},
              {"seconds_to_all_connected", std::round(total * 100) / 100},
              {"calls", client.Counts()},
              {"timeline",
               {{"create_sent_to_created", create},
                {"created_to_running_observed", Quantiles(to_running)},
                {"running_to_launch_sent", Quantiles(to_launch)},
                {"launch_sent_to_answered", Quantiles(launch)},
                {"launch_answered_to_connected", Quantiles(to_connected)},
                {"create_sent_to_connected", Quantiles(overall)}}}};
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--databricks") {
      f.databricks = v;
    } else if (k == "--openai") {
      f.openai = v;
    } else if (k == "-n") {
      f.n = std::stoi(v);
    } else if (k == "--databricks-rps") {
      f.databricks_rps = std::stod(v);
    } else if (k == "--databricks-burst") {
      f.databricks_burst = std::stod(v);
    } else if (k == "--openai-rps") {
      f.openai_rps = std::stod(v);
    } else if (k == "--list-pages-per-second") {
      f.list_pages_per_second = std::stod(v);
    } else if (k == "--page-size") {
      f.page_size = std::stoi(v);
    } else if (k == "--poll") {
      f.poll = milliseconds(std::stoi(v));
    } else if (k == "--prefix") {
      f.prefix = v;
    } else {
      std::cerr << "ideal_client: unknown flag " << k << "\n";
      return 2;
    }
  }
  if (f.databricks.empty() || f.openai.empty() || f.n < 1 || f.list_pages_per_second <= 0) {
    std::cerr << "usage: ideal_client --databricks URL --openai URL/v1 -n N [--databricks-rps R] "
                 "[--databricks-burst B] [--openai-rps R] [--list-pages-per-second P] "
                 "[--page-size S] [--poll MS] [--prefix P]\n";
    return 2;
  }
  return Run(f);
}
