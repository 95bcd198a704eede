#include "controller/cloud/fenced_transport.h"

#include <chrono>
#include <optional>
#include <string>

namespace sbx::controller {

namespace {

http::HttpResult NotHeld(const WorkspaceFence& fence, const std::string& workspace_id) {
  return http::HttpResult{
      .status =
          api::AbortedError("sbxd " + fence.identity() + " does not hold the lease of workspace " +
                            workspace_id + " (another replica reconciles it); nothing was sent"),
      .maybe_sent = false};
}

// The request with the headers that say who sends it under which tenure.
http::HttpRequest Stamped(const http::HttpRequest& request, const WorkspaceFence& fence,
                          const std::string& workspace_id, const FenceToken& held) {
  http::HttpRequest stamped = request;
  stamped.headers.emplace_back("X-Sbx-Replica", fence.identity());
  stamped.headers.emplace_back("X-Sbx-Workspace", workspace_id);
  stamped.headers.emplace_back("X-Sbx-Fence", std::to_string(held.token));
  stamped.headers.emplace_back("X-Sbx-Checked-At",
                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  held.checked_at.time_since_epoch())
                                                  .count()));
  return stamped;
}

}  // namespace

http::HttpResult FencedTransport::Send(const http::HttpRequest& request, std::stop_token stop) {
  std::optional<FenceToken> held = fence_.Token(workspace_id_);
  if (!held) {
    return NotHeld(fence_, workspace_id_);
  }
  if (request.method != "GET" && request.method != "HEAD") {
    if (api::Status fenced = fence_.CheckMutation(workspace_id_); !fenced.ok()) {
      return http::HttpResult{.status = fenced, .maybe_sent = false};
    }
    // The store read took a while: the own view once more, last (see the header).
    const std::optional<FenceToken> still = fence_.Token(workspace_id_);
    if (!still || still->token != held->token) {
      return NotHeld(fence_, workspace_id_);
    }
    held = still;
  }
  return inner_.Send(Stamped(request, fence_, workspace_id_, *held), stop);
}

http::HttpResult FencedStreamingTransport::Stream(const http::HttpRequest& request,
                                                  const http::StreamHandlers& handlers,
                                                  std::stop_token stop) {
  const std::optional<FenceToken> held = fence_.Token(workspace_id_);
  if (!held) {
    return NotHeld(fence_, workspace_id_);
  }
  http::StreamHandlers fenced = handlers;
  fenced.on_data = [this, token = held->token, &handlers](std::string_view chunk) {
    const std::optional<FenceToken> now = fence_.Token(workspace_id_);
    if (!now || now->token != token) {
      return false;  // the lease moved on: the rest of the stream is the new holder's
    }
    return handlers.on_data ? handlers.on_data(chunk) : true;
  };
  return inner_.Stream(Stamped(request, fence_, workspace_id_, *held), fenced, stop);
}

}  // namespace sbx::controller
