// SandboxReconciler, the setup of a live sandbox (sandbox_reconciler.h): after every boot, the boot
// id from a marker outside the home directory, then spec.setup in order, each step once per boot.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "api/conditions.h"
#include "controller/reconcilers/internal/boot_marker.h"
#include "controller/reconcilers/internal/sandbox_target.h"
#include "controller/reconcilers/sandbox_reconciler.h"

namespace sbx::controller {
namespace {

namespace reason = api::reason;
using api::ConditionStatus;
using api::StatusOr;

std::string Tail(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) {
    return text;
  }
  return "…" + text.substr(text.size() - max_bytes);
}

}  // namespace

// After every boot: learn the boot id from a marker outside the home directory (a stop wipes
// it), then run spec.setup in order, skipping steps that already succeeded in this boot. Without
// setup steps there is nothing to run per boot, so no exec-sync at all: the AgentWorker's launch
// script writes the marker itself, and status.bootId stays empty.
StatusOr<ReconcileResult> SandboxReconciler::RunSetup(Target& t, const databricks::Sandbox& live) {
  const Clock::SteadyTime now = clock_.Steady();
  bool check_due = true;
  {
    std::lock_guard lock(mu_);
    auto checked = boot_checked_.find(t.key());
    check_due =
        checked == boot_checked_.end() || now - checked->second >= options_.boot_check_interval;
  }
  const bool maybe_rebooted = t.before().state != "RUNNING" ||
                              t.before().create_time != live.create_time ||
                              t.status().boot_id.empty() || check_due;
  if (maybe_rebooted && !t.spec().setup.empty()) {
    databricks::ExecRequest probe;
    probe.cmd = "/bin/bash";
    probe.args = {"-c",
                  std::string("m=$1\n") + reconcilers_internal::kEnsureBootMarkerSh + "cat \"$m\"",
                  "sbx-boot", options_.boot_marker};
    probe.execution_timeout = std::chrono::seconds(30);
    ASSIGN_OR_RETURN(databricks::ExecResult r, t.api->ExecSync(t.sandbox_id, probe, t.stop));
    if (r.status != databricks::ExecStatus::kCompleted || r.exit_code != 0) {
      return api::UnavailableError("boot probe in sandbox " + t.sandbox_id +
                                   " failed: " + Tail(r.stderr_text, 200));
    }
    std::string boot = r.stdout_text;
    boot.erase(std::remove_if(boot.begin(), boot.end(),
                              [](unsigned char c) { return std::isspace(c) != 0; }),
               boot.end());
    if (boot != t.status().boot_id) {
      if (!t.status().boot_id.empty() || !t.status().setup.empty()) {
        events_.Normal(t.key(), "Rebooted", "sandbox " + t.sandbox_id + " booted again");
      }
      t.status().boot_id = boot;
    }
    std::lock_guard lock(mu_);
    boot_checked_[t.key()] = now;
  }
  const std::string& boot = t.status().boot_id;
  std::vector<api::SetupResult>& results = t.status().setup;
  // Results of other boots, and of steps no longer in the spec, are dropped.
  std::erase_if(results, [&](const api::SetupResult& r) {
    return r.boot_id != boot ||
           std::none_of(t.spec().setup.begin(), t.spec().setup.end(),
                        [&](const api::SetupStep& s) { return s.name == r.name; });
  });

  for (const api::SetupStep& step : t.spec().setup) {
    auto done = std::find_if(results.begin(), results.end(), [&](const api::SetupResult& r) {
      return r.name == step.name && r.succeeded;
    });
    if (done != results.end()) {
      continue;
    }
    SetReady(t, ConditionStatus::kFalse, reason::kSetupRunning, "running setup step " + step.name);
    databricks::ExecRequest run;
    run.cmd = "/bin/bash";
    run.args = {"-c", step.run};
    run.execution_timeout = step.timeout;
    ASSIGN_OR_RETURN(databricks::ExecResult r, t.api->ExecSync(t.sandbox_id, run, t.stop));

    api::SetupResult result;
    result.name = step.name;
    result.boot_id = boot;
    result.exit_code = r.exit_code.value_or(-1);
    result.succeeded = r.status == databricks::ExecStatus::kCompleted && r.exit_code == 0;
    result.finished_at = FormatRfc3339(clock_.Now());
    if (!result.succeeded) {
      result.message = r.status == databricks::ExecStatus::kTimedOut
                           ? "timed out after " + std::to_string(step.timeout.count()) + "s"
                           : Tail(r.stderr_text.empty() ? r.stdout_text : r.stderr_text, 400);
    }
    std::erase_if(results, [&](const api::SetupResult& x) { return x.name == step.name; });
    results.push_back(result);
    if (!result.succeeded) {
      const std::string message = "setup step " + step.name + " failed (exit " +
                                  std::to_string(result.exit_code) + "): " + result.message;
      events_.Warning(t.key(), "SetupFailed", message);
      SetReady(t, ConditionStatus::kFalse, reason::kSetupFailed, message);
      // Rate-limited requeue: the step is retried with per-key backoff, not in a hot loop.
      return ReconcileResult::RequeueAfter(std::chrono::milliseconds(0));
    }
  }
  SetReady(t, ConditionStatus::kTrue, reason::kRunning, "sandbox is running and set up");
  if (t.spec().setup.empty()) {
    return ReconcileResult::Done();
  }
  return ReconcileResult::RequeueAfter(options_.boot_check_interval);  // the next boot check
}

}  // namespace sbx::controller
