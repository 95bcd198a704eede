#define _TURN_OFF_PLATFORM_STRING
#include "emulator/openai/internal/webhook_sender.h"

#include <cpprest/http_client.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "api/base64.h"
#include "emulator/openai/internal/api_error.h"
#include "emulator/openai/internal/state.h"

namespace sbx::emulator::internal::openai {
namespace {

constexpr size_t kMaxKept = 2000;  // deliveries remembered for Stats (finished ones dropped first)

std::optional<std::string> SecretKey(const std::string& secret) {
  static const std::string kPrefix = "whsec_";
  if (secret.rfind(kPrefix, 0) != 0) {
    return secret;
  }
  const std::string encoded = secret.substr(kPrefix.size());  // standard base64, padded
  std::optional<std::string> key =
      encoded.size() % 4 == 0 ? api::Base64Decode(encoded) : std::nullopt;
  if (!key || key->empty()) {
    return std::nullopt;
  }
  return key;
}

}  // namespace

std::optional<std::string> SignStandardWebhook(const std::string& secret, const std::string& id,
                                               const std::string& timestamp,
                                               const std::string& body) {
  std::optional<std::string> key = SecretKey(secret);
  if (!key) {
    return std::nullopt;
  }
  const std::string message = id + "." + timestamp + "." + body;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key->data(), static_cast<int>(key->size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return "v1," + api::Base64Encode(std::string_view(reinterpret_cast<const char*>(digest), length));
}

api::Status WebhookSender::Validate(const Config& config) {
  if (config.url.empty()) {
    return api::OkStatus();
  }
  if (config.url.rfind("http://", 0) != 0 && config.url.rfind("https://", 0) != 0) {
    return api::InvalidArgumentError("webhook url must be http:// or https://");
  }
  if (config.secret.empty() || !SecretKey(config.secret)) {
    return api::InvalidArgumentError(
        "a webhook url needs a secret: whsec_<base64 key> (or raw key text)");
  }
  if (config.max_attempts < 1 || config.retry_base.count() <= 0 ||
      config.retry_cap < config.retry_base) {
    return api::InvalidArgumentError(
        "webhook retries: max_attempts >= 1 and 0 < retry_base <= retry_cap");
  }
  return api::OkStatus();
}

WebhookSender::WebhookSender(Config config)
    : config_(std::move(config)), rng_(std::random_device{}()) {}

WebhookSender::~WebhookSender() { Stop(); }

void WebhookSender::Start() {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

void WebhookSender::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    cv_.notify_all();
    thread_.join();
  }
}

void WebhookSender::Configure(Config config) {
  std::lock_guard lock(mu_);
  config_ = std::move(config);
  ++changes_;
  cv_.notify_all();
}

void WebhookSender::OnSessionEvent(const json& event) {
  const std::string type = event.value("type", "");
  if (!event.contains("session") || !event["session"].is_object()) {
    return;
  }
  const json& session = event["session"];
  const std::string id = session.value("id", "");
  if (type == "agent.session.requires_action") {
    for (const json& action : session.value("required_actions", json::array())) {
      Queue("agent.session.action_required", id,
            {{"id", id}, {"required_action", {{"type", action.value("type", "")}}}});
    }
  } else if (type == "agent.session.created") {
    const json env = session.value("environment", json::object());
    Queue(type, id,
          {{"id", id},
           {"environment_id", env.value("id", "")},
           {"environment_type", env.value("type", "self_hosted")},
           {"connect", {{"remote_url", env.value("remote_url", "")}}}});
  } else if (type == "agent.session.in_progress" || type == "agent.session.idle" ||
             type == "agent.session.failed") {
    Queue(type, id, {{"id", id}});
  }
}

void WebhookSender::Queue(const std::string& type, const std::string& session_id, json data) {
  std::lock_guard lock(mu_);
  if (config_.url.empty()) {
    return;
  }
  static const char* kHex = "0123456789abcdef";
  auto fresh = [&](const char* prefix) {
    std::string out = prefix;
    for (int i = 0; i < 24; ++i) {
      out += kHex[rng_() % 16];
    }
    return out;
  };
  Delivery d;
  d.webhook_id = fresh("msg_");
  d.type = type;
  d.session_id = session_id;
  d.body = json{{"id", fresh("evt_")},
                {"object", "event"},
                {"created_at", NowUnix()},
                {"type", type},
                {"data", std::move(data)}}
               .dump();
  d.due = SteadyClock::now();
  deliveries_.push_back(std::move(d));
  while (deliveries_.size() > kMaxKept) {
    auto finished = std::find_if(deliveries_.begin(), deliveries_.end(),
                                 [](const Delivery& x) { return x.delivered || x.gave_up; });
    if (finished == deliveries_.end()) {
      break;
    }
    deliveries_.erase(finished);
  }
  ++changes_;
  cv_.notify_all();
}

void WebhookSender::Loop(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    auto next = deliveries_.end();
    for (auto it = deliveries_.begin(); it != deliveries_.end(); ++it) {
      if (!it->delivered && !it->gave_up && (next == deliveries_.end() || it->due < next->due)) {
        next = it;
      }
    }
    // Woken by a new delivery or configuration (changes_ moves), a due time, or the stop.
    const uint64_t seen = changes_;
    if (next == deliveries_.end()) {
      cv_.wait(lock, stop, [&] { return changes_ != seen; });
      continue;
    }
    if (next->due > SteadyClock::now()) {
      cv_.wait_until(lock, stop, next->due, [&] { return changes_ != seen; });
      continue;
    }
    const Config config = config_;
    const std::string id = next->webhook_id;
    const std::string body = next->body;
    lock.unlock();
    const int status = config.url.empty() ? 0 : Post(config, id, body);
    lock.lock();
    // Find it again: Queue may have dropped finished ones meanwhile, never a pending one.
    auto d = std::find_if(deliveries_.begin(), deliveries_.end(),
                          [&](const Delivery& x) { return x.webhook_id == id; });
    if (d == deliveries_.end()) {
      continue;
    }
    ++d->attempts;
    d->last_status = status;
    d->statuses.push_back(status);
    if (status >= 200 && status < 300) {
      d->delivered = true;
    } else if (d->attempts >= config.max_attempts) {
      d->gave_up = true;
    } else {
      const int shift = std::min(d->attempts - 1, 20);
      const Duration nominal =
          std::min<Duration>(config.retry_base * (int64_t{1} << shift), config.retry_cap);
      std::uniform_real_distribution<double> jitter(0.8, 1.2);
      d->due = SteadyClock::now() +
               Duration(static_cast<int64_t>(static_cast<double>(nominal.count()) * jitter(rng_)));
    }
  }
}

int WebhookSender::Post(const Config& config, const std::string& id, const std::string& body) {
  const std::string timestamp = std::to_string(NowUnix());
  const std::optional<std::string> signature =
      SignStandardWebhook(config.secret, id, timestamp, body);
  if (!signature) {
    return 0;
  }
  try {
    web::http::client::http_client_config client_config;
    client_config.set_timeout(config.timeout);
    web::http::client::http_client client(config.url, client_config);
    web::http::http_request request(web::http::methods::POST);
    request.headers().add("webhook-id", id);
    request.headers().add("webhook-timestamp", timestamp);
    request.headers().add("webhook-signature", *signature);
    request.headers().add("User-Agent", "OpenAI/1.0 (sbx-emulator)");
    request.set_body(body, "application/json");
    web::http::http_response response = client.request(request).get();
    return response.status_code();
  } catch (const std::exception&) {
    return 0;
  }
}

json WebhookSender::Stats() const {
  std::lock_guard lock(mu_);
  json list = json::array();
  int64_t delivered = 0;
  int64_t pending = 0;
  int64_t gave_up = 0;
  for (const Delivery& d : deliveries_) {
    delivered += d.delivered ? 1 : 0;
    gave_up += d.gave_up ? 1 : 0;
    pending += (!d.delivered && !d.gave_up) ? 1 : 0;
    list.push_back({{"webhook_id", d.webhook_id},
                    {"type", d.type},
                    {"session_id", d.session_id},
                    {"attempts", d.attempts},
                    {"statuses", d.statuses},
                    {"last_status", d.last_status},
                    {"delivered", d.delivered},
                    {"gave_up", d.gave_up}});
  }
  return {{"url", config_.url},
          {"configured", !config_.url.empty()},
          {"max_attempts", config_.max_attempts},
          {"retry_base_ms", config_.retry_base.count()},
          {"retry_cap_ms", config_.retry_cap.count()},
          {"deliveries", std::move(list)},
          {"delivered", delivered},
          {"pending", pending},
          {"gave_up", gave_up}};
}

HttpResponse HandleWebhookAdmin(WebhookSender& sender, const HttpRequest& req) {
  if (req.method == "GET") {
    return JsonResponse(200, sender.Stats());
  }
  if (req.method == "DELETE") {
    sender.Configure({});
    return JsonResponse(200, sender.Stats());
  }
  if (req.method != "POST") {
    return ErrorResponse(BadRequest("use GET, POST or DELETE"));
  }
  const json body = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
  if (!body.is_object()) {
    return ErrorResponse(BadRequest("body must be a JSON object"));
  }
  WebhookSender::Config config;
  try {
    config.url = body.value("url", "");
    config.secret = body.value("secret", "");
    config.max_attempts = body.value("max_attempts", config.max_attempts);
    config.retry_base = WebhookSender::Duration(
        body.value("retry_base_ms", static_cast<int64_t>(config.retry_base.count())));
    config.retry_cap = WebhookSender::Duration(
        body.value("retry_cap_ms", static_cast<int64_t>(config.retry_cap.count())));
  } catch (const std::exception& e) {
    return ErrorResponse(BadRequest(std::string("bad webhook config: ") + e.what()));
  }
  if (api::Status s = WebhookSender::Validate(config); !s.ok()) {
    return ErrorResponse(BadRequest(s.message()));
  }
  sender.Configure(std::move(config));
  return JsonResponse(200, sender.Stats());
}

}  // namespace sbx::emulator::internal::openai
