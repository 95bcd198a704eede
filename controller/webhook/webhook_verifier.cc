#include "controller/webhook/webhook_verifier.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <charconv>
#include <cstdint>
#include <utility>
#include <vector>

#include "api/base64.h"

namespace sbx::controller {
namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
constexpr std::string_view kVersion = "v1,";

std::string Mac(const std::string& key, std::string_view id, std::string_view timestamp,
                std::string_view body) {
  std::string message;
  message.reserve(id.size() + timestamp.size() + body.size() + 2);
  message.append(id).append(".").append(timestamp).append(".").append(body);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

std::vector<std::string_view> SplitSpaces(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find(' ', at);
    const size_t stop = end == std::string_view::npos ? text.size() : end;
    if (stop > at) {
      parts.push_back(text.substr(at, stop - at));
    }
    at = stop + 1;
  }
  return parts;
}

}  // namespace

std::string_view Label(WebhookRejection rejection) {
  switch (rejection) {
    case WebhookRejection::kMissingHeader:
      return "missing_header";
    case WebhookRejection::kBadTimestamp:
      return "bad_timestamp";
    case WebhookRejection::kStale:
      return "stale";
    case WebhookRejection::kFuture:
      return "future";
    case WebhookRejection::kBadSignature:
      return "bad_signature";
    case WebhookRejection::kTooLarge:
      return "too_large";
    case WebhookRejection::kReplayed:
      return "replayed";
    case WebhookRejection::kReplayCacheFull:
      return "replay_cache_full";
  }
  return "unknown";
}

int HttpStatusOf(WebhookRejection rejection) {
  switch (rejection) {
    case WebhookRejection::kBadSignature:
      return 401;
    case WebhookRejection::kTooLarge:
      return 413;
    case WebhookRejection::kReplayed:
      return 409;
    case WebhookRejection::kReplayCacheFull:
      return 429;
    default:
      return 400;
  }
}

api::StatusOr<WebhookSecret> WebhookSecret::Parse(std::string_view text) {
  if (text.empty()) {
    return api::InvalidArgumentError("the webhook secret is empty");
  }
  if (text.substr(0, kSecretPrefix.size()) != kSecretPrefix) {
    return WebhookSecret(std::string(text));
  }
  // Standard base64, padded (as Standard Webhooks secrets are): a multiple of 4 characters.
  const std::string_view encoded = text.substr(kSecretPrefix.size());
  std::optional<std::string> key =
      encoded.size() % 4 == 0 ? api::Base64Decode(encoded) : std::nullopt;
  if (!key || key->empty()) {
    return api::InvalidArgumentError(
        "the webhook secret starts with whsec_ but the rest is not base64");
  }
  return WebhookSecret(*std::move(key));
}

std::string SignWebhook(const WebhookSecret& secret, std::string_view id,
                        std::string_view timestamp, std::string_view body) {
  return std::string(kVersion) + api::Base64Encode(Mac(secret.key(), id, timestamp, body));
}

WebhookVerifier::WebhookVerifier(WebhookSecret secret, Clock& clock, WebhookVerifierOptions options)
    : secret_(std::move(secret)), clock_(clock), options_(options) {}

std::optional<WebhookRejection> WebhookVerifier::Verify(const WebhookHeaders& headers,
                                                        std::string_view body) const {
  if (headers.id.empty() || headers.timestamp.empty() || headers.signature.empty() ||
      headers.id.size() > options_.max_header_bytes ||
      headers.timestamp.size() > options_.max_header_bytes ||
      headers.signature.size() > options_.max_header_bytes) {
    return WebhookRejection::kMissingHeader;
  }
  if (body.size() > options_.max_body_bytes) {
    return WebhookRejection::kTooLarge;
  }
  int64_t seconds = 0;
  const std::string& ts = headers.timestamp;
  const auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), seconds);
  if (ec != std::errc() || end != ts.data() + ts.size() || ts.front() == '-') {
    return WebhookRejection::kBadTimestamp;
  }
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  if (now - seconds > options_.tolerance.count()) {
    return WebhookRejection::kStale;
  }
  if (seconds - now > options_.tolerance.count()) {
    return WebhookRejection::kFuture;
  }
  const std::string expected = SignWebhook(secret_, headers.id, headers.timestamp, body);
  bool matched = false;
  for (std::string_view entry : SplitSpaces(headers.signature)) {
    // Every entry is compared (no early exit), in constant time for equal lengths.
    if (entry.size() == expected.size() &&
        CRYPTO_memcmp(entry.data(), expected.data(), expected.size()) == 0) {
      matched = true;
    }
  }
  if (!matched) {
    return WebhookRejection::kBadSignature;
  }
  return std::nullopt;
}

void WebhookVerifier::ExpireLocked(Clock::SteadyTime now) {
  while (!by_expiry_.empty() && by_expiry_.begin()->first <= now) {
    seen_.erase(by_expiry_.begin()->second);
    by_expiry_.erase(by_expiry_.begin());
  }
}

std::optional<WebhookRejection> WebhookVerifier::Reserve(const std::string& id) {
  const Clock::SteadyTime now = clock_.Steady();
  std::lock_guard lock(mu_);
  ExpireLocked(now);
  if (seen_.count(id) != 0) {
    return WebhookRejection::kReplayed;
  }
  if (seen_.size() >= options_.replay_capacity) {
    return WebhookRejection::kReplayCacheFull;
  }
  const Clock::SteadyTime expiry = now + 2 * options_.tolerance;
  seen_.emplace(id, expiry);
  by_expiry_.emplace(expiry, id);
  return std::nullopt;
}

void WebhookVerifier::Release(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = seen_.find(id);
  if (it == seen_.end()) {
    return;
  }
  auto [first, last] = by_expiry_.equal_range(it->second);
  for (auto e = first; e != last; ++e) {
    if (e->second == id) {
      by_expiry_.erase(e);
      break;
    }
  }
  seen_.erase(it);
}

}  // namespace sbx::controller
