#include "controller/cloud/databricks/sandbox_api.h"

namespace sbx::controller::databricks {

std::string_view SandboxStateName(SandboxState state) {
  switch (state) {
    case SandboxState::kUnspecified:
      return "UNSPECIFIED";
    case SandboxState::kPending:
      return "PENDING";
    case SandboxState::kRunning:
      return "RUNNING";
    case SandboxState::kStopping:
      return "STOPPING";
    case SandboxState::kStopped:
      return "STOPPED";
    case SandboxState::kUnknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

}  // namespace sbx::controller::databricks
