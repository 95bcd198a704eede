#include "controller/reconcilers/task_artifacts.h"

#include <optional>
#include <utility>

#include "api/base64.h"
#include "controller/base/sha256.h"
#include "controller/reconcilers/scripts/executor_scripts.h"

namespace sbx::controller {

std::vector<api::ArtifactStatus> CollectArtifacts(
    Store& store, CloudClients& clouds, const api::Object& task, const api::Object& sandbox,
    const std::string& directory, const std::function<std::string(std::string_view)>& scrub,
    const std::function<void(std::string)>& note, std::stop_token stop) {
  std::vector<api::ArtifactStatus> out;
  const api::AgentTaskSpec& spec = task.agent_task_spec();
  if (spec.collect.empty()) {
    return out;
  }
  api::StatusOr<api::SandboxIdentity> created = api::CreatedSandbox(sandbox);
  api::StatusOr<databricks::SandboxApi*> sandboxes =
      created.ok() ? clouds.Sandboxes(task.metadata.namespace_, created->workspace_ref)
                   : api::StatusOr<databricks::SandboxApi*>(created.status());
  int64_t total = 0;
  for (const api::CollectSpec& c : spec.collect) {
    api::ArtifactStatus a;
    a.path = c.path;
    if (!sandboxes.ok()) {
      a.error = sandboxes.status().message();
      out.push_back(std::move(a));
      continue;
    }
    databricks::ExecRequest request;
    request.cmd = "/bin/bash";
    request.args = {"-c",   std::string(scripts::kCollectFile), "sbx-collect", directory,
                    c.path, std::to_string(c.max_bytes)};
    api::StatusOr<databricks::ExecResult> r =
        (*sandboxes)->ExecSync(created->sandbox_id, request, stop);
    if (!r.ok()) {
      a.error = r.status().message();
    } else if (r->exit_code != 0) {
      a.error = r->exit_code == 3 ? "not found" : "read failed: " + r->stderr_text;
    } else {
      const size_t nl = r->stdout_text.find('\n');
      std::optional<std::string> bytes =
          nl == std::string::npos
              ? std::nullopt
              : api::Base64Decode(std::string_view(r->stdout_text).substr(nl + 1));
      if (!bytes) {
        a.error = "unreadable answer from the sandbox";
      } else if (total + static_cast<int64_t>(bytes->size()) > kMaxTaskArtifactBytes) {
        a.error = "the task's artifacts would exceed 16 MiB";
      } else {
        std::string content = *std::move(bytes);
        if (scrub) {
          // The executor key is in the sandbox's environment: a task can write it to a file.
          std::string clean = scrub(content);
          if (clean != content) {
            note("artifact " + a.path + ": known secret values were replaced by [REDACTED]");
            content = std::move(clean);
          }
        }
        a.bytes = static_cast<int64_t>(content.size());
        a.sha256 = Sha256Hex(content);
        api::Status put = store.PutArtifact(api::KeyOf(task), task.metadata.uid,
                                            {a.path, a.bytes, a.sha256, std::move(content)});
        if (put.ok()) {
          total += a.bytes;
        } else {
          a.error = put.message();
          a.bytes = 0;
          a.sha256.clear();
        }
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace sbx::controller
