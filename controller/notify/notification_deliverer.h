// NotificationDeliverer: sends what the store's notification outbox holds (DESIGN §8.3) and keeps
// each Notifier's status.
//
// A round (DeliverOnce):
//   1. the due notifications (Store::ListDueNotifications), those of objects this replica owns
//      (Options::owns; with --work-split workspace, the owner of the object's workspace);
//   2. for each, its Notifier as it is now: gone (or a new one of that name) → the notification
//      is dropped; suspended → it waits (looked at again a minute later); else the URL
//      (spec.urlFrom) and, for a webhook, the signing secret (spec.signingSecretFrom) are resolved
//      at the moment of use, the URL must be https:// (http:// only to a loopback host), and one
//      POST is sent: a webhook's JSON signed as Standard Webhooks (webhook-id = the notification's,
//      the same on every attempt; webhook-timestamp and webhook-signature fresh each attempt), or
//      Slack's {"text"};
//   3. a 2xx finishes it; anything else (an unresolvable secret too) records the attempt and
//      schedules the next: first_retry after the first failure, doubling, at most max_retry;
//   4. the status of every Notifier (Options::owns_status: the leader) or of those this round
//      delivered for: Ready (its secrets resolve and its URL is allowed), pending and dropped
//      (the outbox's counts), delivered, lastDeliveredAt, lastError — written only if changed.
// Delivery is at least once: a crash between the POST and the commit of its finish sends it again
// with the same webhook-id, for the receiver to drop.
//
// Thread-safety: DeliverOnce and Run from one thread; stats() from any. Ownership: borrows the
// store, transport and clock, which must outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <stop_token>
#include <string>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/secret_resolver.h"
#include "controller/store/store.h"

namespace sbx::controller::notify {

struct NotificationDelivererOptions {
  SecretPolicy secrets;
  EnvLookup env;                             // where {env: …} references are looked up
  std::chrono::milliseconds interval{1000};  // between rounds
  std::chrono::milliseconds first_retry{5000};
  std::chrono::milliseconds max_retry{std::chrono::hours(1)};
  std::chrono::milliseconds timeout{10'000};  // one POST
  int batch = 100;                            // notifications per round at most
  // Whether this replica delivers the notifications of `object`; unset: all. An error skips it.
  std::function<api::StatusOr<bool>(const api::ObjectKey& object)> owns;
  // Whether this replica writes every Notifier's status (the leader); unset: yes.
  std::function<bool()> owns_status;
  // Told every URL and signing secret resolved, so that no log line, status or event shows one.
  std::function<void(const std::string& secret)> register_secret;
};

class NotificationDeliverer {
 public:
  using Options = NotificationDelivererOptions;

  NotificationDeliverer(Store& store, http::HttpTransport& transport, Clock& clock,
                        Options options);

  struct Round {
    int delivered = 0;
    int failed = 0;     // attempts that failed (each retried later)
    int abandoned = 0;  // their Notifier is gone
  };
  api::StatusOr<Round> DeliverOnce(std::stop_token stop = {});

  // DeliverOnce every interval until `stop`; errors go to `report` (optional).
  void Run(std::stop_token stop, const std::function<void(const api::Status&)>& report);

  // Since start, for the metrics (sbx_notifications_total{result}).
  struct Stats {
    int64_t delivered = 0;
    int64_t failed = 0;
    int64_t abandoned = 0;
  };
  Stats stats() const { return {delivered_.load(), failed_.load(), abandoned_.load()}; }

 private:
  // What this round did for one Notifier, folded into its status.
  struct Outcome {
    int64_t delivered = 0;
    int64_t last_delivered_ms = 0;
    int64_t last_failed_ms = 0;
    std::string last_error;
  };
  // One attempt: OK when the receiver took it (2xx).
  api::Status Send(const api::Object& notifier, const Store::Notification& n, std::stop_token stop);
  // The Notifier's URL (checked) and, for a webhook, signing secret, resolved now.
  struct Resolved {
    std::string url;
    std::string signing_secret;
  };
  api::StatusOr<Resolved> Resolve(const api::Object& notifier);
  api::Status UpdateStatuses(const std::map<std::string, Outcome>& outcomes);

  Store& store_;
  http::HttpTransport& transport_;
  Clock& clock_;
  const Options options_;
  std::atomic<int64_t> delivered_{0};
  std::atomic<int64_t> failed_{0};
  std::atomic<int64_t> abandoned_{0};
};

}  // namespace sbx::controller::notify
