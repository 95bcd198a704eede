#include "controller/reconcilers/internal/worker_fingerprints.h"

#include "api/fingerprint.h"

namespace sbx::controller::reconcilers_internal {
namespace {

std::string RefText(const api::SecretRef& ref) {
  return ref.empty() ? "" : (ref.env.empty() ? "file:" + ref.file : "env:" + ref.env);
}

}  // namespace

std::string ExecutorSpecHash(const api::AgentWorkerSpec& s) {
  std::string text = s.executor.command + '\0' + s.workspace_directory + '\0' +
                     RefText(s.executor.api_key_from) + '\0';
  for (const std::string& arg : s.executor.args) {
    text += "arg=" + arg + '\0';
  }
  for (const api::EnvVar& var : s.executor.env) {
    text += "env=" + var.name + '=' + var.value + '\0' + RefText(var.value_from) + '\0';
  }
  return api::Fingerprint(text);
}

std::string AgentHash(const api::AgentSpec& agent) {
  return api::Fingerprint(agent.model + '\0' + agent.instructions);
}

}  // namespace sbx::controller::reconcilers_internal
