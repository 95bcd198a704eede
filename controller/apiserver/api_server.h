// ApiServer: sbxd's REST API over the store (DESIGN §7.3) — the request handler that sits on an
// HttpServer. Kubernetes-style paths under /apis/sbx.dev/v1alpha1 (README "The API" lists them
// all): get, list (labelSelector, all namespaces), watch (?watch=true, JSON lines, resumable
// from a resourceVersion; too old → 410 Expired), POST /apply (the CLI's one-transaction apply,
// dry run, prune, applyset), delete, events, AgentTask logs (follow) and cancel, and `exec` /
// executor `log` proxied to the sandbox through SandboxCommands, so clients need no cloud
// credentials.
//
// Every request needs `Authorization: Bearer <token>` from the TokenTable: none or unknown →
// 401; a role below the call's → 403 (viewer: reads; editor: apply, delete, cancel; admin:
// exec). Every mutating call is recorded as an event on the object naming the token's name.
// Responses hold only what the store holds (secret references, scrubbed status and events);
// errors are Kubernetes Status JSON (api_wire.h), with every manifest error as a
// "file:line:col: field: problem" cause.
//
// Watches are served from one WatchHub thread that reads the change log once and fans out to
// every watcher (each watch holds a connection thread, which mostly sleeps on a condition
// variable), so N watchers cost one store read per change, not N.
//
// Thread-safety: Handle is called concurrently from connection threads. Start/Stop from the
// owner: Stop wakes and ends every watch and log follow, so the HttpServer's Stop can join its
// threads; call it before HttpServer::Stop. Ownership: every collaborator is borrowed and must
// outlive the server. `store` serves requests; `watch_store` (its own connection to the same
// database) is read only by the hub, so request reads never reset its change detection.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/validation.h"
#include "controller/apiserver/http_server.h"
#include "controller/apiserver/tokens.h"
#include "controller/base/clock.h"
#include "controller/cloud/sandbox_commands.h"
#include "controller/store/store.h"

namespace sbx::controller::apiserver {

struct ApiServerOptions {
  api::ValidationOptions validation;         // the secret sources manifests may name
  size_t max_watches = 1000;                 // concurrent watches and follows; more → 429
  std::chrono::seconds max_watch{3600};      // a watch ends after this (timeoutSeconds caps lower)
  std::chrono::milliseconds log_poll{1000};  // follow of an executor log
  size_t max_log_bytes = size_t{1} << 20;    // per executor-log read
  std::chrono::seconds max_exec_timeout{3600};
  // What an executor's log goes through before a client reads it (#24): sbxd passes log::Scrub,
  // which removes every secret sbxd knows (the executor's key among them). None: as read.
  std::function<std::string(std::string_view)> scrub_log;
};

class ApiServer {
 public:
  ApiServer(Store& store, Store& watch_store, const TokenTable& tokens, SandboxCommands* commands,
            Clock& clock, ApiServerOptions options = {});
  ~ApiServer();  // Stop()
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Starts the watch hub. kFailedPrecondition if already started; the store's error if its
  // revision cannot be read.
  [[nodiscard]] api::Status Start();
  // Idempotent; see the top.
  void Stop();

  // The HttpHandler.
  void Handle(HttpExchange& exchange);
  // The HttpHeadCheck: 401 unless the head carries a known bearer token, so that no body of an
  // anonymous client is read (#24). Handle checks the token again.
  std::optional<HttpResponse> CheckHead(const HttpRequest& head) const;

  size_t active_watches() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sbx::controller::apiserver
