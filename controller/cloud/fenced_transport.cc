#include "controller/cloud/fenced_transport.h"

#include <optional>

namespace sbx::controller {

http::HttpResult FencedTransport::Send(const http::HttpRequest& request, std::stop_token stop) {
  const std::optional<int64_t> token = fence_.Token(workspace_id_);
  if (!token) {
    return http::HttpResult{
        .status = api::AbortedError("sbxd " + fence_.identity() +
                                    " does not hold the lease of workspace " + workspace_id_ +
                                    " (another replica reconciles it); nothing was sent"),
        .maybe_sent = false};
  }
  if (request.method != "GET" && request.method != "HEAD") {
    if (api::Status fenced = fence_.CheckMutation(workspace_id_); !fenced.ok()) {
      return http::HttpResult{.status = fenced, .maybe_sent = false};
    }
  }
  http::HttpRequest fenced = request;
  fenced.headers.emplace_back("X-Sbx-Replica", fence_.identity());
  fenced.headers.emplace_back("X-Sbx-Workspace", workspace_id_);
  fenced.headers.emplace_back("X-Sbx-Fence", std::to_string(*token));
  return inner_.Send(fenced, stop);
}

}  // namespace sbx::controller
