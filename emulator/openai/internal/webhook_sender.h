// WebhookSender: the OpenAI emulator's webhook deliveries (reference/openai-agents-api.md §3.6,
// §3.7), signed the way the service signs them (Standard Webhooks).
//
// Session lifecycle events become webhooks: agent.session.created, .in_progress, .idle, .failed,
// and agent.session.requires_action → agent.session.action_required (one per required action,
// data {id, required_action:{type}}; no call ids, no remote_url — the receiver re-reads the
// session). Envelope {"id":"evt_…","object":"event","created_at","type","data"}. Each POST to
// the configured URL carries `webhook-id` (msg_…, the same on every retry of a delivery),
// `webhook-timestamp` (the attempt's Unix seconds) and `webhook-signature: v1,<base64
// HMAC-SHA256("<id>.<timestamp>.<body>")>` with the secret ("whsec_<base64 key>", or raw bytes).
// A delivery that gets no 2xx (connection error, timeout, any other status) is retried with
// exponential backoff (retry_base doubling to retry_cap, ±20% jitter) up to max_attempts in all
// (the service retries with backoff, for up to 72 hours, per OpenAI's webhook guide — not in the
// reference; our attempt bound keeps a test's emulator from retrying forever). Deliveries go out
// one at a time, in order of due time, from one sender thread.
//
// Configuration comes from Options (sbx-emulator --webhook-url/--webhook-secret) or the admin
// API (POST /_emulator/openai/webhooks); without a URL and secret nothing is queued. The secret is
// never shown by Stats().
//
// Thread-safety: every public method is thread-safe; OnSessionEvent only takes the sender's own
// mutex, so the State may call it with State::mu held. Start once, Stop once (the destructor
// calls it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/status.h"
#include "emulator/internal/http_server.h"

namespace sbx::emulator::internal::openai {

class WebhookSender {
 public:
  using json = nlohmann::json;
  using Duration = std::chrono::milliseconds;
  using SteadyClock = std::chrono::steady_clock;

  struct Config {
    std::string url;     // empty: off
    std::string secret;  // "whsec_<base64>" or raw key bytes; required with url
    int max_attempts = 10;
    Duration retry_base{std::chrono::seconds(1)};
    Duration retry_cap{std::chrono::minutes(5)};
    Duration timeout{std::chrono::seconds(10)};  // per attempt
  };

  // What became of one webhook (for GET /_emulator/openai/webhooks).
  struct Delivery {
    std::string webhook_id;
    std::string type;
    std::string session_id;
    std::string body;
    int attempts = 0;
    int last_status = 0;  // 0: no HTTP answer
    std::vector<int> statuses;
    bool delivered = false;
    bool gave_up = false;
    SteadyClock::time_point due{};
  };

  // kInvalidArgument when a URL is given without a usable secret or with max_attempts < 1.
  static api::Status Validate(const Config& config);

  explicit WebhookSender(Config config);
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void Start();
  void Stop();
  // Replaces the configuration (later deliveries and retries use it). Validate first.
  void Configure(Config config);

  // A session stream event (its JSON as the State emits it): queues the webhooks it stands for.
  void OnSessionEvent(const json& event);

  // {"url","configured","max_attempts","retry_base_ms","deliveries":[…],"delivered","pending",
  //  "gave_up"}; never the secret.
  json Stats() const;

 private:
  void Queue(const std::string& type, const std::string& session_id, json data);
  void Loop(std::stop_token stop);
  // One POST; the HTTP status, or 0 when there was no answer.
  int Post(const Config& config, const std::string& id, const std::string& body);

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  Config config_;                    // Guarded by mu_.
  std::deque<Delivery> deliveries_;  // every one, oldest first (bounded). Guarded by mu_.
  std::mt19937_64 rng_;              // Guarded by mu_.
  uint64_t changes_ = 0;             // bumped by Queue and Configure. Guarded by mu_.
  std::jthread thread_;
};

// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>" with the key of `secret` ("whsec_<base64>"
// or raw); nullopt when a whsec_ secret is not base64.
std::optional<std::string> SignStandardWebhook(const std::string& secret, const std::string& id,
                                               const std::string& timestamp,
                                               const std::string& body);

// The admin API of the sender, /_emulator/openai/webhooks:
//   GET    → Stats();
//   POST   {"url","secret","max_attempts"?,"retry_base_ms"?,"retry_cap_ms"?} → configure (400 on a
//          bad body or a config Validate refuses), answers Stats();
//   DELETE → off (nothing more is queued; pending deliveries are not sent).
HttpResponse HandleWebhookAdmin(WebhookSender& sender, const HttpRequest& req);

}  // namespace sbx::emulator::internal::openai
