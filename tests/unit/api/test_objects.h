// Fully populated sbx objects for codec and schema tests: every field set to a non-default
// value, so a field the codec drops or a schema forgets shows up as a difference.
#pragma once

#include <chrono>
#include <string>

#include "api/resources.h"

namespace sbx::api::test_objects {

inline Object FullSandbox() {
  Object o = MakeObject(Kind::kSandbox, "dev-box", "team-a");
  o.metadata.labels = {{"app", "agent"}, {"tier", "dev"}};
  o.metadata.annotations = {{"note", "hello: world"}};
  o.metadata.uid = "4a1e";
  o.metadata.generation = 3;
  o.metadata.resource_version = 42;
  o.metadata.creation_timestamp = "2024-01-02T03:04:05Z";
  o.metadata.deletion_timestamp = "2024-01-03T03:04:05Z";
  o.metadata.finalizers = {std::string(kControllerFinalizer)};
  o.metadata.owner_references = {{Kind::kAgentWorker, "w1", "u1", false}};
  SandboxSpec& s = o.sandbox_spec();
  s.workspace_ref = "prod";
  s.sandbox_id = "team-a-dev-box";
  s.display_name = "Dev box";
  s.inactivity_timeout = std::chrono::seconds(5400);
  s.image = "ubuntu:22.04";
  s.power = Power::kStopped;
  s.idle_stop = std::chrono::seconds(120);
  s.setup = {{"deps", "apt-get install -y jq\necho done\n", std::chrono::seconds(600)},
             {"one-liner", "true", std::chrono::seconds(90)}};
  s.deletion_policy = DeletionPolicy::kOrphan;
  SandboxStatus& st = o.sandbox_status();
  st.observed_generation = 3;
  st.conditions = {{"Ready", ConditionStatus::kFalse, "Starting", "waiting for RUNNING",
                    "2024-01-02T03:04:06Z", 3}};
  st.sandbox_name = "sandboxes/team-a-dev-box";
  st.state = "RUNNING";
  st.create_time = "2024-01-02T03:04:05Z";
  st.boot_id = "b1";
  st.provisioning_failures = 2;
  st.next_start_after = "2024-01-02T03:06:00Z";
  st.idle_since = "2024-01-02T03:04:07Z";
  st.setup = {{"deps", "b1", 0, true, "", "2024-01-02T03:05:00Z"},
              {"one-liner", "b1", 2, false, "boom", ""}};
  return o;
}

inline Object FullWorkspace() {
  Object o = MakeObject(Kind::kWorkspace, "default");
  WorkspaceSpec& s = o.workspace_spec();
  s.databricks = {"https://x.cloud.databricks.com",
                  "DEFAULT",
                  "1234567890",
                  {"DATABRICKS_TOKEN", ""},
                  {"", "/etc/sbx/client-id"},
                  {"CLIENT_SECRET", ""}};
  s.openai = {"https://api.openai.com/v1", {"OPENAI_API_KEY", ""}};
  s.limits = {2.5, 40, 3};
  s.pricing = WorkspacePricing{500'000, 1'250'000, 125'000, 10'000'000};
  s.budget = WorkspaceBudget{BudgetPeriod::kDay, 1'000'000, 2'500'000, 50'000'000};
  o.workspace_status().observed_generation = 1;
  o.workspace_status().conditions = {{"Ready", ConditionStatus::kTrue, "Ok", "", "t", 1}};
  return o;
}

inline Object FullWorker() {
  Object o = MakeObject(Kind::kAgentWorker, "w1");
  AgentWorkerSpec& s = o.agent_worker_spec();
  s.sandbox = FullSandbox().sandbox_spec();
  s.agent = {"gpt-5", "Fix the bug.\nThen stop.\n"};
  s.workspace_directory = "/home/sandbox-agent/repo";
  s.executor.command = "codex";
  s.executor.args = {"exec-server", "--verbose"};
  s.executor.env = {{"RUST_LOG", "info", {}}, {"TOKEN", "", {"SBX_SECRET_TOKEN", ""}}};
  s.executor.api_key_from = {"", "executor-key"};
  s.restart_policy = RestartPolicy::kNever;
  AgentWorkerStatus& st = o.agent_worker_status();
  st.session_id = "sess_1";
  st.environment_id = "env_1";
  st.remote_url = "wss://x";
  st.agent_hash = "0123456789abcdef";
  st.workspace_directory = "/home/sandbox-agent/repo";
  st.executor.pid = 1234;
  st.executor.launched_at = "2024-01-02T03:04:05Z";
  st.executor.restarts = 2;
  st.executor.last_exit_reason = "IPNotAuthorized";
  st.executor.spec_hash = "fedcba9876543210";
  st.executor.last_probe_at = "2024-01-02T03:05:05Z";
  st.executor.probed_boot_id = "boot-1";
  st.executor.next_launch_after = "2024-01-02T03:14:05Z";
  st.environment_status = "connected";
  st.connected_environment_id = "env1";
  st.wake_requested_at = "2024-01-02T03:04:08Z";
  return o;
}

inline Object FullTask() {
  Object o = MakeObject(Kind::kAgentTask, "t1");
  AgentTaskSpec& s = o.agent_task_spec();
  s.worker_ref = "w1";
  s.worker_selector = WorkerSelector{{{"team", "agents"}}};  // all set: codec does not validate
  s.pool_ref = "p1";
  s.input = "Fix the flaky test\n$ echo hi > out.txt\n";
  s.timeout = std::chrono::seconds(90);
  s.collect = {{"out.txt", 2048}, {"reports/summary.md", int64_t{1} << 20}};
  s.ttl_after_finished = std::chrono::seconds(86400);
  s.backoff_limit = 2;
  s.retry_on = std::vector<RetryOn>{RetryOn::kInfrastructureFailure, RetryOn::kTimedOut};
  s.keep_workspace = true;
  AgentTaskStatus& st = o.agent_task_status();
  st.attempts = {{1,
                  "w1",
                  "turn_0",
                  TaskPhase::kFailed,
                  {"server_error", "boom"},
                  "2026-01-01T00:00:00Z",
                  "2026-01-01T00:00:05Z"}};
  st.next_attempt_at = "2026-01-01T00:00:15Z";
  st.observed_generation = 1;
  st.conditions = {{"Completed", ConditionStatus::kTrue, "Succeeded", "", "t", 1}};
  st.phase = TaskPhase::kSucceeded;
  st.worker = "w1";
  st.session_id = "sess_1";
  st.turn_id = "turn_2";
  st.queue_position = 3;
  st.idempotency_key = "uid-1";
  st.previous_turn_id = "turn_1";
  st.submitted_at = "2024-01-02T03:04:05Z";
  st.started_at = "2024-01-02T03:04:06Z";
  st.completed_at = "2024-01-02T03:04:09Z";
  st.cancel_requested_at = "2024-01-02T03:04:08Z";
  st.cancel_reason = "TimedOut";
  st.result = {"done", {"connection_failed", "executor gone"}, {10, 20, 30}};
  st.commands = 2;
  st.artifacts = {{"out.txt", 3, "abc", ""}, {"reports/summary.md", 0, "", "not found"}};
  return o;
}

inline Object FullGitSource() {
  Object o = MakeObject(Kind::kGitSource, "apps", "team-a");
  GitSourceSpec& s = o.git_source_spec();
  s.url = "https://git.example.com/org/apps.git";
  s.ref.branch = "main";
  s.ref.tag = "v1";  // every field set (not a valid spec: the codec does not validate)
  s.ref.commit = std::string(40, 'a');
  s.path = "clusters/prod";
  s.interval = std::chrono::seconds(90);
  s.prune = {true, true};
  s.applyset = "apps-prod";
  s.credentials.token_from = {"SBX_SECRET_GIT_TOKEN", ""};
  s.credentials.ssh_key_from = {"", "deploy-key"};
  GitSourceStatus& st = o.git_source_status();
  st.observed_generation = 2;
  st.conditions = {{"Ready", ConditionStatus::kTrue, "Applied", "applied", "t", 2}};
  st.revision = std::string(40, 'b');
  st.last_applied_at = "2024-01-02T03:04:05Z";
  st.objects = 7;
  st.last_attempted_revision = std::string(40, 'c');
  st.last_attempt_at = "2024-01-02T03:04:06Z";
  return o;
}

inline Object FullPool() {
  Object o = MakeObject(Kind::kAgentPool, "fixers", "team-a");
  AgentPoolSpec& s = o.agent_pool_spec();
  s.template_.metadata.labels = {{"team", "a"}};
  s.template_.spec = FullWorker().agent_worker_spec();
  s.replicas = {1, 20};
  s.warm = 2;
  s.scale_down_after = std::chrono::seconds(120);
  s.session = SessionMode::kShared;
  s.progress_deadline = std::chrono::seconds(300);
  AgentPoolStatus& st = o.agent_pool_status();
  st.observed_generation = 3;
  st.conditions = {{"Ready", ConditionStatus::kTrue, "Ready", "", "t", 3}};
  st.replicas = 5;
  st.ready = 4;
  st.busy = 2;
  st.idle = 1;
  st.sleeping = 1;
  st.queued = 7;
  st.updated_replicas = 5;
  st.template_hash = "0123456789abcdef";
  return o;
}

inline Object FullNotifier() {
  Object o = MakeObject(Kind::kNotifier, "team-a-alerts", "team-a");
  NotifierSpec& s = o.notifier_spec();
  s.type = NotifierType::kSlack;
  s.url_from = {"", "team-a-hook"};
  s.signing_secret_from = {"SBX_SECRET_TEAM_A_SIGNING", ""};  // codec does not validate
  s.events = {"TaskFailed", "TaskTimedOut", "BudgetExceeded"};
  s.selector.match_labels = {{"team", "a"}};
  s.suspend = true;
  NotifierStatus& st = o.notifier_status();
  st.observed_generation = 2;
  st.conditions = {{"Ready", ConditionStatus::kFalse, "DeliveryFailed", "503", "t", 2}};
  st.last_delivered_at = "2024-01-02T03:04:05Z";
  st.last_error = "POST: 503 Service Unavailable";
  st.pending = 3;
  st.delivered = 41;
  st.dropped = 1;
  return o;
}

}  // namespace sbx::api::test_objects
