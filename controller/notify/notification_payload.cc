#include "controller/notify/notification_payload.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "api/kinds.h"
#include "api/rfc3339.h"

namespace sbx::controller::notify {
namespace {

using json = nlohmann::json;

}  // namespace

std::string WebhookPayload(const Store::Notification& n) {
  json body{{"type", n.type},
            {"reason", n.reason},
            {"object",
             {{"kind", std::string(api::KindName(n.object.kind))},
              {"namespace", n.object.namespace_},
              {"name", n.object.name},
              {"uid", n.object_uid}}},
            {"message", n.message},
            {"time", api::FormatRfc3339(api::FromUnixMillis(n.time_ms))}};
  if (!n.task_json.empty()) {
    json task = json::parse(n.task_json, nullptr, /*allow_exceptions=*/false);
    if (!task.is_discarded()) {
      body["task"] = std::move(task);
    }
  }
  return body.dump();
}

std::string SlackPayload(const Store::Notification& n) {
  std::string text = "[" + n.type + "] " + n.reason + " " +
                     std::string(api::KindInfoOf(n.object.kind).singular) + " " +
                     n.object.namespace_ + "/" + n.object.name + ": " + n.message;
  const json task =
      n.task_json.empty() ? json() : json::parse(n.task_json, nullptr, /*allow_exceptions=*/false);
  if (task.is_object()) {
    text += " (phase " + task.value("phase", "") + ", worker " + task.value("worker", "-");
    if (task.contains("durationSeconds") && task["durationSeconds"].is_number_integer()) {
      text += ", " + std::to_string(task["durationSeconds"].get<int64_t>()) + "s";
    }
    if (task.contains("usage") && task["usage"].is_object()) {
      const json& u = task["usage"];
      text +=
          ", " +
          std::to_string(u.value("inputTokens", int64_t{0}) + u.value("outputTokens", int64_t{0})) +
          " tokens";
    }
    text += ")";
  }
  return json{{"text", text}}.dump();
}

}  // namespace sbx::controller::notify
