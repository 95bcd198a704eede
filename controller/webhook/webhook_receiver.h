// WebhookReceiver: what sbxd does with a delivery to its webhook endpoint (`sbxd --webhook-addr`,
// DESIGN §7.2), independent of the HTTP listener that carries it (WebhookServer).
//
// POST <path> only (404 elsewhere, 405 for other methods). In order:
//   1. the WebhookVerifier: missing headers, a body over 1 MiB (413), a bad timestamp, stale or
//      future (400), a bad signature (401) — refused, nothing else happens;
//   2. the body must be the service's envelope {"id","type","data":{…}} (else 400 bad_body);
//   3. not leading (no Run in progress: this sbxd is standby or stopping) → 503, so the sender
//      retries, perhaps at the leader; the id is not remembered;
//   4. the id: already accepted → 409 replayed (nothing is done twice);
//   5. `agent.session.action_required` with required_action.type `environment_connection`, and
//      `agent.session.failed`: the AgentWorker whose status.sessionId is data.id is marked in
//      WakeHints (its next reconcile checks the environment and session at once) and enqueued,
//      with its dependants, on the Manager's queue → 200 "enqueued"; with share_hints the hint
//      is first posted to the store, for whichever replica holds the worker. A session no worker
//      owns, an action of another type, another event type → 200 and ignored (the reference: return
//      2xx once queued; an unowned session is not ours to act on). A store error → 503 (the id is
//      forgotten again, so the retry is not a replay).
// Every delivery is counted by (result, reason) for sbx_webhook_deliveries_total: result
// `accepted` (reason enqueued | unknown_session | ignored_action | ignored_type), `rejected`
// (reason: WebhookRejection's Label, bad_body, not_found, method_not_allowed) or `unavailable`
// (not_leader, store_error). Bodies and ids are never logged; the secret never leaves the
// verifier.
//
// It is also the Source that gives it the Manager's Enqueuer: Run(out, stop) holds `out` until
// stop, so deliveries act only while the Manager runs (the leader).
//
// Thread-safety: Handle is called concurrently from the listener's threads; Run from the
// Manager's source thread; Counts from any. Ownership: the verifier, store and hints are
// collaborators that must outlive the receiver.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "controller/engine/source.h"
#include "controller/engine/wake_hints.h"
#include "controller/store/store.h"
#include "controller/webhook/webhook_verifier.h"

namespace sbx::controller {

struct WebhookRequest {
  std::string method;
  std::string path;                            // without the query
  std::map<std::string, std::string> headers;  // lower-cased names
  std::string body;
  bool body_too_large = false;  // the listener stopped reading past the limit; body is empty
};

struct WebhookResponse {
  int status = 200;
  std::string body;  // short text: the outcome's reason
};

struct WebhookReceiverOptions {
  std::string path = "/webhooks/openai";
  // Replicas splitting workspaces (--work-split workspace): the worker's workspace may be held by
  // another replica, whose queue this one cannot reach. Then each hint is also posted to the
  // store (Store::PostWakeHint), where the holder's StoreWatch sees it at once.
  bool share_hints = false;
};

class WebhookReceiver final : public Source {
 public:
  WebhookReceiver(WebhookVerifier& verifier, Store& store, WakeHints& hints,
                  WebhookReceiverOptions options = {});

  WebhookResponse Handle(const WebhookRequest& request);

  std::string_view name() const override { return "webhook"; }
  void Run(Enqueuer& out, std::stop_token stop) override;

  // True while Run holds the Enqueuer (deliveries can act).
  bool running() const;
  // (result, reason) → deliveries so far.
  std::map<std::pair<std::string, std::string>, int64_t> Counts() const;
  const WebhookReceiverOptions& options() const { return options_; }

 private:
  WebhookResponse Count(std::string_view result, std::string_view reason, int status);
  // The acted-on part (steps 5): what to answer for a verified, fresh, new delivery.
  WebhookResponse Act(const std::string& type, const std::string& session_id,
                      const std::string& action_type, Enqueuer& out);

  WebhookVerifier& verifier_;
  Store& store_;
  WakeHints& hints_;
  const WebhookReceiverOptions options_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  Enqueuer* out_ = nullptr;  // Set while Run runs. Guarded by mu_.
  int acting_ = 0;           // Handle calls using out_. Guarded by mu_.
  std::map<std::pair<std::string, std::string>, int64_t> counts_;  // Guarded by mu_.
};

}  // namespace sbx::controller
