// WebhookVerifier: checks that a webhook delivery comes from the OpenAI service, the Standard
// Webhooks way the service signs them (reference/openai-agents-api.md §3.7; the SDK's
// `webhooks.verify_signature`), and that it is neither stale nor a replay.
//
// A delivery carries three headers:
//   webhook-id         the delivery's id (kept by the sender's retries of the same delivery);
//   webhook-timestamp  Unix seconds of the attempt;
//   webhook-signature  one or more space-separated "v1,<base64 HMAC-SHA256>" entries, each the
//                      MAC of "<webhook-id>.<webhook-timestamp>.<raw body>" with the secret
//                      (several while the sender rotates secrets; entries of other versions are
//                      skipped).
// The secret (OPENAI_WEBHOOK_SECRET) is "whsec_<base64 key>"; a value without that prefix is
// used as raw key bytes, as the SDK does.
//
// Verify() refuses: a missing header, a body over `max_body_bytes`, a timestamp that is not a
// decimal number, one older than `tolerance` (stale) or more than `tolerance` ahead (future),
// and a signature that matches no entry (compared in constant time). Reserve() then refuses an
// id already accepted within the replay window (2 × tolerance from its acceptance: the longest a
// signed (id, timestamp) pair passes Verify), and a full replay cache (the delivery is refused
// rather than an old id forgotten early). Ids enter the cache only through Reserve, which the
// caller calls only after Verify passed, so unsigned traffic cannot fill it; Release() forgets an
// id whose delivery could not be acted on, so the sender's retry is not taken for a replay.
//
// The secret's key lives in this object only; nothing here logs or returns it.
// Thread-safety: Verify is const and thread-safe; Reserve/Release take an internal mutex.
// Ownership: `clock` must outlive the verifier.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "api/status.h"
#include "controller/base/clock.h"

namespace sbx::controller {

// Why a delivery was refused. Label() is the metric label and the word in the 4xx body.
enum class WebhookRejection {
  kMissingHeader,    // 400
  kBadTimestamp,     // 400: not a decimal number of seconds
  kStale,            // 400: older than the tolerance
  kFuture,           // 400: further ahead than the tolerance
  kBadSignature,     // 401
  kTooLarge,         // 413
  kReplayed,         // 409
  kReplayCacheFull,  // 429 (the sender retries later)
};
std::string_view Label(WebhookRejection rejection);
int HttpStatusOf(WebhookRejection rejection);

// The signing secret's key bytes.
class WebhookSecret {
 public:
  // "whsec_<base64>" → the decoded key; any other non-empty text → its bytes. kInvalidArgument
  // (naming no part of the value) for an empty text or a "whsec_" one that is not base64.
  static api::StatusOr<WebhookSecret> Parse(std::string_view text);
  const std::string& key() const { return key_; }

 private:
  explicit WebhookSecret(std::string key) : key_(std::move(key)) {}
  std::string key_;
};

// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>": one signature entry as the sender writes it.
std::string SignWebhook(const WebhookSecret& secret, std::string_view id,
                        std::string_view timestamp, std::string_view body);

struct WebhookHeaders {
  std::string id;         // webhook-id
  std::string timestamp;  // webhook-timestamp
  std::string signature;  // webhook-signature
};

struct WebhookVerifierOptions {
  std::chrono::seconds tolerance{std::chrono::minutes(5)};
  size_t max_body_bytes = size_t{1} << 20;  // 1 MiB
  size_t max_header_bytes = 4096;           // per header value
  size_t replay_capacity = 100'000;         // ids remembered at once
};

class WebhookVerifier {
 public:
  WebhookVerifier(WebhookSecret secret, Clock& clock, WebhookVerifierOptions options = {});

  // nullopt when the delivery is well signed and fresh; else why not. Does not look at ids.
  std::optional<WebhookRejection> Verify(const WebhookHeaders& headers,
                                         std::string_view body) const;
  // Remembers `id` as accepted; kReplayed if it is already, kReplayCacheFull if the cache holds
  // `replay_capacity` unexpired ids. Expired ids are dropped first.
  std::optional<WebhookRejection> Reserve(const std::string& id);
  // Forgets `id` (its delivery was not acted on: the sender's retry must pass).
  void Release(const std::string& id);

  const WebhookVerifierOptions& options() const { return options_; }

 private:
  void ExpireLocked(Clock::SteadyTime now);

  const WebhookSecret secret_;
  Clock& clock_;
  const WebhookVerifierOptions options_;
  std::mutex mu_;
  std::map<std::string, Clock::SteadyTime> seen_;            // id → expiry. Guarded by mu_.
  std::multimap<Clock::SteadyTime, std::string> by_expiry_;  // Guarded by mu_.
};

}  // namespace sbx::controller
