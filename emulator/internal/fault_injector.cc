#include "emulator/internal/fault_injector.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

namespace sbx::emulator::internal {
namespace {

using nlohmann::json;

HttpResponse JsonResponse(int status, const json& body) {
  return {status, "application/json", {}, body.dump()};
}

HttpResponse BadRequest(const std::string& message) {
  return JsonResponse(400, {{"error_code", "INVALID_PARAMETER_VALUE"}, {"message", message}});
}

// Accepts 250 (ms), "250ms", "1.5s".
std::optional<std::chrono::milliseconds> ParseLatency(const json& j) {
  if (j.is_number()) {
    return std::chrono::milliseconds(j.get<std::int64_t>());
  }
  if (!j.is_string()) {
    return std::nullopt;
  }
  std::string s = j.get<std::string>();
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    std::string unit = s.substr(used);
    if (v < 0) {
      return std::nullopt;
    }
    if (unit == "ms" || unit.empty()) {
      return std::chrono::milliseconds(std::llround(v));
    }
    if (unit == "s") {
      return std::chrono::milliseconds(std::llround(v * 1000));
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

std::string DefaultErrorCode(int status) {
  switch (status) {
    case 400:
      return "INVALID_PARAMETER_VALUE";
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 409:
      return "RESOURCE_CONFLICT";
    case 429:
      return "REQUEST_LIMIT_EXCEEDED";
    case 500:
      return "INTERNAL_ERROR";
    case 501:
      return "NOT_IMPLEMENTED";
    case 503:
      return "TEMPORARILY_UNAVAILABLE";
    case 504:
      return "DEADLINE_EXCEEDED";
    default:
      return "UNKNOWN";
  }
}

FaultInjector::FaultInjector() : rng_(std::random_device{}()) {}

CallPlan FaultInjector::AdmitAndDelay(std::string_view endpoint, RateLimit limit) {
  CallPlan plan = Admit(endpoint, limit);
  if (plan.latency.count() > 0) {
    std::this_thread::sleep_for(plan.latency);
  }
  return plan;
}

CallPlan FaultInjector::Admit(std::string_view endpoint, RateLimit limit) {
  std::lock_guard lock(mu_);
  CallPlan plan;
  auto counter = counters_.find(endpoint);
  if (counter == counters_.end()) {
    counter = counters_.emplace(std::string(endpoint), 0).first;
  }
  ++counter->second;

  if (auto it = latency_.find(endpoint); it != latency_.end()) {
    plan.latency = it->second;
  } else if (auto all = latency_.find("*"); all != latency_.end()) {
    plan.latency = all->second;
  }

  Bucket* bucket = limit == RateLimit::kDatabricks ? &databricks_limit_
                   : limit == RateLimit::kOpenAi   ? &openai_limit_
                                                   : nullptr;
  if (bucket != nullptr && bucket->rps > 0) {
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - bucket->refilled_at).count();
    bucket->refilled_at = now;
    bucket->tokens = std::min(bucket->burst, bucket->tokens + elapsed * bucket->rps);
    if (bucket->tokens >= 1) {
      bucket->tokens -= 1;
    } else {
      const double seconds = (1 - bucket->tokens) / bucket->rps;
      plan.throttled =
          std::chrono::seconds(static_cast<std::int64_t>(std::max(1.0, std::ceil(seconds))));
      plan.throttled_for = std::chrono::milliseconds(
          std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(seconds * 1000))));
      ++counters_[limit == RateLimit::kOpenAi ? "openai.throttled" : "databricks.throttled"];
      return plan;
    }
  }

  auto fit = faults_.find(endpoint);
  if (fit == faults_.end()) {
    fit = faults_.find("*");
  }
  if (fit != faults_.end()) {
    FaultSpec& f = fit->second;
    if (f.count > 0) {
      --f.count;
      plan.fault = f;
    } else if (f.rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < f.rate) {
      plan.fault = f;
    }
  }
  return plan;
}

std::map<std::string, std::int64_t> FaultInjector::Counters() const {
  std::lock_guard lock(mu_);
  return {counters_.begin(), counters_.end()};
}

void FaultInjector::ResetCounters() {
  std::lock_guard lock(mu_);
  counters_.clear();
}

void FaultInjector::SetLatency(const std::string& endpoint, std::chrono::milliseconds latency) {
  std::lock_guard lock(mu_);
  if (latency.count() <= 0) {
    latency_.erase(endpoint);
  } else {
    latency_[endpoint] = latency;
  }
}

void FaultInjector::SetFault(const std::string& endpoint, const FaultSpec& fault) {
  std::lock_guard lock(mu_);
  if (fault.count <= 0 && fault.rate <= 0) {
    faults_.erase(endpoint);
  } else {
    faults_[endpoint] = fault;
  }
}

void FaultInjector::ClearFaults() {
  std::lock_guard lock(mu_);
  faults_.clear();
  latency_.clear();
}

void FaultInjector::SetRateLimit(double requests_per_second, double burst, RateLimit limit) {
  std::lock_guard lock(mu_);
  Bucket& b = limit == RateLimit::kOpenAi ? openai_limit_ : databricks_limit_;
  b.rps = std::max(0.0, requests_per_second);
  b.burst = burst > 0 ? burst : std::max(1.0, b.rps);
  b.tokens = b.burst;
  b.refilled_at = std::chrono::steady_clock::now();
}

void FaultInjector::RecordReplicaRequest(std::string_view endpoint, const std::string& id,
                                         const HttpRequest& request) {
  auto replica = request.headers.find("x-sbx-replica");
  if (replica == request.headers.end()) {
    return;
  }
  const auto header = [&](const char* name) {
    auto it = request.headers.find(name);
    return it == request.headers.end() ? std::string() : it->second;
  };
  const std::int64_t at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  std::lock_guard lock(mu_);
  replica_log_.push_back({++replica_log_seq_, std::string(endpoint), id, replica->second,
                          header("x-sbx-workspace"), header("x-sbx-fence"),
                          header("x-sbx-checked-at"), at_ms});
  if (replica_log_.size() > kMaxReplicaLog) {
    replica_log_.pop_front();
    ++replica_log_dropped_;
  }
}

void FaultInjector::Reset() {
  {
    std::lock_guard lock(mu_);
    replica_log_.clear();
  }
  ClearFaults();
  ResetCounters();
  SetRateLimit(0, 0, RateLimit::kDatabricks);
  SetRateLimit(0, 0, RateLimit::kOpenAi);
}

std::optional<HttpResponse> FaultInjector::HandleAdmin(const HttpRequest& request) {
  const std::string& path = request.path;
  const std::string& method = request.method;
  json body = json::object();
  if ((method == "POST" || method == "PUT") && !request.body.empty()) {
    body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
      return BadRequest("request body must be a JSON object");
    }
  }
  try {
    if (path == "/_emulator/replica_log" && (method == "GET" || method == "DELETE")) {
      std::lock_guard lock(mu_);
      if (method == "DELETE") {
        replica_log_.clear();
        return JsonResponse(200, json::object());
      }
      json requests = json::array();
      for (const ReplicaRequest& r : replica_log_) {
        requests.push_back({{"seq", r.seq},
                            {"endpoint", r.endpoint},
                            {"id", r.id},
                            {"replica", r.replica},
                            {"workspace", r.workspace},
                            {"fence", r.fence},
                            {"checked_at", r.checked_at},
                            {"at_ms", r.at_ms}});
      }
      return JsonResponse(200, {{"requests", requests}, {"dropped", replica_log_dropped_}});
    }
    if (path == "/_emulator/counters") {
      if (method == "GET") {
        return JsonResponse(200, json(Counters()));
      }
      if (method == "POST" || method == "DELETE") {
        ResetCounters();
        return JsonResponse(200, json::object());
      }
    }
    if (path == "/_emulator/latency" && method == "POST") {
      std::string endpoint = body.value("endpoint", "*");
      auto latency = ParseLatency(body.contains("latency") ? body["latency"]
                                                           : body.value("latency_ms", json(0)));
      if (!latency) {
        return BadRequest("latency must be milliseconds or a string like \"250ms\"");
      }
      SetLatency(endpoint, *latency);
      return JsonResponse(200, json::object());
    }
    if (path == "/_emulator/faults") {
      if (method == "DELETE") {
        ClearFaults();
        return JsonResponse(200, json::object());
      }
      if (method == "POST") {
        FaultSpec f;
        f.status = body.value("status", 503);
        f.rate = body.value("rate", 0.0);
        f.count = body.value("count", 0);
        f.retry_after = std::chrono::seconds(body.value("retry_after_seconds", 1));
        f.error_code = body.value("error_code", "");
        f.message = body.value("message", "");
        f.after = body.value("phase", "before") == "after";
        if (f.status < 400 || f.status > 599 || f.rate < 0 || f.rate > 1 || f.count < 0) {
          return BadRequest("fault needs status 400..599, rate 0..1, count >= 0");
        }
        SetFault(body.value("endpoint", "*"), f);
        return JsonResponse(200, json::object());
      }
    }
    if (path == "/_emulator/rate_limit" && method == "POST") {
      const std::string api = body.value("api", "databricks");
      if (api != "databricks" && api != "openai") {
        return BadRequest("api must be \"databricks\" or \"openai\"");
      }
      SetRateLimit(body.value("requests_per_second", 0.0), body.value("burst", 0.0),
                   api == "openai" ? RateLimit::kOpenAi : RateLimit::kDatabricks);
      return JsonResponse(200, json::object());
    }
  } catch (const json::exception& e) {
    return BadRequest(std::string("bad admin request: ") + e.what());
  }
  return std::nullopt;
}

}  // namespace sbx::emulator::internal
