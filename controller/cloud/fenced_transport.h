// FencedTransport: the HttpTransport of one workspace's cloud clients when replicas split the
// workspaces (DESIGN §7.4, controller/engine/workspace_leases.h). No request goes out unless
// this replica holds the workspace's lease (its own view); before every request that changes
// something (any method but GET and HEAD) it also asks the fence to read the lease row and
// compare its token, and then its own view once more, last, right before the request goes out.
// Otherwise nothing is sent and the call fails with kAborted (transient: the work moved to
// another replica). Every request carries
//   X-Sbx-Replica: <identity>      which sbxd sent it
//   X-Sbx-Workspace: <ns>/<name>   for which workspace
//   X-Sbx-Fence: <token>           the lease tenure it acted under (when held)
//   X-Sbx-Checked-At: <unix ms>    when this replica last found that tenure fresh
// The clouds ignore them; sbx-emulator records them, so a test can show that each workspace was
// served by one replica at a time. None is a secret.
//
// What fencing in the client cannot do: the clouds do not check a token, so a request that
// passed its last check and then waited (the process paused, SIGSTOP, a stall of its thread
// longer than the lease) still goes out, late, under a lapsed tenure. The last check is made as
// late as the transport allows to keep that window small; X-Sbx-Checked-At lets the request log
// tell such a late arrival (checked inside its tenure) from a replica acting outside its own.
//
// FencedStreamingTransport does the same for event streams (SSE), which are reads: a stream
// opens only under the lease, and an open one is closed at its next chunk once the lease is gone
// (its events are then the new holder's to log, not this replica's).
//
// Thread-safety: as the inner transport. Ownership: inner and fence outlive this.
#pragma once

#include <stop_token>
#include <string>

#include "controller/cloud/http/http_transport.h"
#include "controller/engine/workspace_leases.h"

namespace sbx::controller {

class FencedTransport final : public http::HttpTransport {
 public:
  FencedTransport(http::HttpTransport& inner, WorkspaceFence& fence, std::string workspace_id)
      : inner_(inner), fence_(fence), workspace_id_(std::move(workspace_id)) {}

  http::HttpResult Send(const http::HttpRequest& request, std::stop_token stop) override;

 private:
  http::HttpTransport& inner_;
  WorkspaceFence& fence_;
  const std::string workspace_id_;
};

class FencedStreamingTransport final : public http::StreamingTransport {
 public:
  FencedStreamingTransport(http::StreamingTransport& inner, WorkspaceFence& fence,
                           std::string workspace_id)
      : inner_(inner), fence_(fence), workspace_id_(std::move(workspace_id)) {}

  http::HttpResult Stream(const http::HttpRequest& request, const http::StreamHandlers& handlers,
                          std::stop_token stop) override;

 private:
  http::StreamingTransport& inner_;
  WorkspaceFence& fence_;
  const std::string workspace_id_;
};

}  // namespace sbx::controller
