#include "controller/cloud/cloud_clients.h"

namespace sbx::controller {

std::string WorkspaceId(const std::string& namespace_, const std::string& workspace_ref) {
  return namespace_ + "/" + workspace_ref;
}

}  // namespace sbx::controller
