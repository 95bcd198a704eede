#include "controller/webhook/webhook_receiver.h"

#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace sbx::controller {
namespace {

using json = nlohmann::json;

constexpr char kActionRequired[] = "agent.session.action_required";
constexpr char kSessionFailed[] = "agent.session.failed";
constexpr char kEnvironmentConnection[] = "environment_connection";

std::string Header(const WebhookRequest& request, const char* name) {
  auto it = request.headers.find(name);
  return it == request.headers.end() ? std::string() : it->second;
}

// The envelope {"id","object","created_at","type","data":{"id", "required_action":{"type"}}}
// (reference §3.7), reduced to what sbxd acts on; nullopt when it is not that shape.
struct Envelope {
  std::string type;
  std::string session_id;
  std::string action_type;
};

std::optional<Envelope> ParseEnvelope(const std::string& body) {
  try {
    const json j = json::parse(body);
    if (!j.is_object() || !j.contains("type") || !j["type"].is_string() || !j.contains("data") ||
        !j["data"].is_object()) {
      return std::nullopt;
    }
    Envelope e;
    e.type = j["type"].get<std::string>();
    const json& data = j["data"];
    if (data.contains("id") && data["id"].is_string()) {
      e.session_id = data["id"].get<std::string>();
    }
    if (data.contains("required_action") && data["required_action"].is_object()) {
      const json& action = data["required_action"];
      if (action.contains("type") && action["type"].is_string()) {
        e.action_type = action["type"].get<std::string>();
      }
    }
    return e;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

WebhookReceiver::WebhookReceiver(WebhookVerifier& verifier, Store& store, WakeHints& hints,
                                 WebhookReceiverOptions options)
    : verifier_(verifier), store_(store), hints_(hints), options_(std::move(options)) {}

void WebhookReceiver::Run(Enqueuer& out, std::stop_token stop) {
  std::unique_lock lock(mu_);
  out_ = &out;
  cv_.wait(lock, stop, [] { return false; });
  out_ = nullptr;
  // Deliveries already acting finish with `out` before the Manager stops its queue.
  cv_.wait(lock, [this] { return acting_ == 0; });
}

bool WebhookReceiver::running() const {
  std::lock_guard lock(mu_);
  return out_ != nullptr;
}

std::map<std::pair<std::string, std::string>, int64_t> WebhookReceiver::Counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

WebhookResponse WebhookReceiver::Count(std::string_view result, std::string_view reason,
                                       int status) {
  std::lock_guard lock(mu_);
  ++counts_[{std::string(result), std::string(reason)}];
  return {status, std::string(reason) + "\n"};
}

WebhookResponse WebhookReceiver::Handle(const WebhookRequest& request) {
  if (request.path != options_.path) {
    return Count("rejected", "not_found", 404);
  }
  if (request.method != "POST") {
    return Count("rejected", "method_not_allowed", 405);
  }
  if (request.body_too_large) {
    return Count("rejected", Label(WebhookRejection::kTooLarge), 413);
  }
  const WebhookHeaders headers{Header(request, "webhook-id"), Header(request, "webhook-timestamp"),
                               Header(request, "webhook-signature")};
  if (std::optional<WebhookRejection> refused = verifier_.Verify(headers, request.body)) {
    return Count("rejected", Label(*refused), HttpStatusOf(*refused));
  }
  const std::optional<Envelope> envelope = ParseEnvelope(request.body);
  if (!envelope) {
    return Count("rejected", "bad_body", 400);
  }
  Enqueuer* out = nullptr;
  {
    std::lock_guard lock(mu_);
    if (out_ == nullptr) {
      ++counts_[{"unavailable", "not_leader"}];
      return {503, "not_leader\n"};
    }
    out = out_;
    ++acting_;
  }
  WebhookResponse response;
  if (std::optional<WebhookRejection> refused = verifier_.Reserve(headers.id)) {
    response = Count("rejected", Label(*refused), HttpStatusOf(*refused));
  } else {
    response = Act(envelope->type, envelope->session_id, envelope->action_type, *out);
    if (response.status >= 500) {
      verifier_.Release(headers.id);
    }
  }
  std::lock_guard lock(mu_);
  if (--acting_ == 0) {
    cv_.notify_all();
  }
  return response;
}

WebhookResponse WebhookReceiver::Act(const std::string& type, const std::string& session_id,
                                     const std::string& action_type, Enqueuer& out) {
  if (type != kActionRequired && type != kSessionFailed) {
    return Count("accepted", "ignored_type", 200);
  }
  if (type == kActionRequired && action_type != kEnvironmentConnection) {
    return Count("accepted", "ignored_action", 200);
  }
  if (session_id.empty()) {
    return Count("accepted", "unknown_session", 200);
  }
  ListOptions workers;
  workers.kind = api::Kind::kAgentWorker;
  api::StatusOr<std::vector<api::Object>> listed = store_.List(workers);
  if (!listed.ok()) {
    return Count("unavailable", "store_error", 503);
  }
  bool found = false;
  for (const api::Object& worker : *listed) {
    if (worker.agent_worker_status().session_id == session_id) {
      const api::ObjectKey key = api::KeyOf(worker);
      if (options_.share_hints) {
        if (api::StatusOr<api::Object> posted = store_.PostWakeHint(key);
            !posted.ok() && posted.status().code() != api::StatusCode::kNotFound) {
          return Count("unavailable", "store_error", 503);
        }
      }
      hints_.Mark(key);
      out.Enqueue(key);
      found = true;
    }
  }
  return Count("accepted", found ? "enqueued" : "unknown_session", 200);
}

}  // namespace sbx::controller
