// sbxd's REST API wire format for what the store records besides objects (api_wire.h): events,
// audit records and their query, task logs, artifacts and the cloud inventory.
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/base64.h"
#include "api/percent_encoding.h"
#include "api/rfc3339.h"
#include "controller/apiwire/api_wire.h"
#include "controller/apiwire/internal/wire_json.h"

namespace sbx::controller::apiwire {
namespace {

using json = nlohmann::json;
using apiwire_internal::Dump;
using apiwire_internal::Int;
using apiwire_internal::KeyFromJson;
using apiwire_internal::KeyJson;
using apiwire_internal::ParseJson;
using apiwire_internal::Str;

// The wire names of the records' enums, one table each (both directions read it).
template <typename E>
struct WireName {
  E value;
  std::string_view name;
};
constexpr WireName<Store::TaskLogKind> kTaskLogKinds[] = {
    {Store::TaskLogKind::kAssistantDelta, "AssistantDelta"},
    {Store::TaskLogKind::kAssistant, "Assistant"},
    {Store::TaskLogKind::kCommand, "Command"},
    {Store::TaskLogKind::kOutputDelta, "OutputDelta"},
    {Store::TaskLogKind::kCommandResult, "CommandResult"},
    {Store::TaskLogKind::kStatus, "Status"},
};
constexpr WireName<Store::InventoryState> kInventoryStates[] = {
    {Store::InventoryState::kIntent, "Intent"},
    {Store::InventoryState::kLive, "Live"},
    {Store::InventoryState::kDeleting, "Deleting"},
    {Store::InventoryState::kAbandoned, "Abandoned"},
};

// The name of `value`; `fallback`'s for a value the table lacks.
template <typename E, size_t N>
std::string_view NameIn(const WireName<E> (&table)[N], E value, E fallback) {
  for (const WireName<E>& entry : table) {
    if (entry.value == value) {
      return entry.name;
    }
  }
  for (const WireName<E>& entry : table) {
    if (entry.value == fallback) {
      return entry.name;
    }
  }
  return {};
}

// The value named `name`; `fallback` for an unknown name (an older or newer server's).
template <typename E, size_t N>
E ValueIn(const WireName<E> (&table)[N], std::string_view name, E fallback) {
  for (const WireName<E>& entry : table) {
    if (entry.name == name) {
      return entry.value;
    }
  }
  return fallback;
}

std::string_view TaskLogKindName(Store::TaskLogKind kind) {
  return NameIn(kTaskLogKinds, kind, Store::TaskLogKind::kStatus);
}
Store::TaskLogKind TaskLogKindOf(std::string_view name) {
  return ValueIn(kTaskLogKinds, name, Store::TaskLogKind::kStatus);
}
std::string_view InventoryStateName(Store::InventoryState s) {
  return NameIn(kInventoryStates, s, Store::InventoryState::kIntent);
}
Store::InventoryState InventoryStateOf(std::string_view name) {
  return ValueIn(kInventoryStates, name, Store::InventoryState::kIntent);
}

}  // namespace

std::string EventsJson(const std::vector<Store::Event>& events) {
  json items = json::array();
  for (const Store::Event& e : events) {
    items.push_back(json{{"involvedObject", KeyJson(e.involved)},
                         {"type", e.type},
                         {"reason", e.reason},
                         {"message", e.message},
                         {"count", e.count},
                         {"firstTimestamp", e.first_seen},
                         {"lastTimestamp", e.last_seen}});
  }
  return Dump(json{{"kind", "EventList"}, {"items", items}});
}

api::StatusOr<std::vector<Store::Event>> DecodeEvents(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "event list"));
  std::vector<Store::Event> out;
  for (const json& e : j.value("items", json::array())) {
    Store::Event event;
    ASSIGN_OR_RETURN(event.involved, KeyFromJson(e.value("involvedObject", json::object())));
    event.type = Str(e, "type");
    event.reason = Str(e, "reason");
    event.message = Str(e, "message");
    event.count = Int(e, "count");
    event.first_seen = Str(e, "firstTimestamp");
    event.last_seen = Str(e, "lastTimestamp");
    out.push_back(std::move(event));
  }
  return out;
}

namespace {
json AuditRecordObject(const Store::AuditRecord& r) {
  return json{{"id", r.id},
              {"time", api::FormatRfc3339Millis(api::FromUnixMillis(r.time_ms))},
              {"actor", r.actor},
              {"role", r.role},
              {"verb", r.verb},
              {"object", KeyJson(r.object)},
              {"resourceVersionBefore", r.resource_version_before},
              {"resourceVersionAfter", r.resource_version_after},
              {"result", r.result},
              {"source", r.source},
              {"specDigest", r.spec_digest}};
}
}  // namespace

std::string AuditRecordJson(const Store::AuditRecord& record) {
  return Dump(AuditRecordObject(record));
}

std::string AuditJson(const std::vector<Store::AuditRecord>& records) {
  json items = json::array();
  for (const Store::AuditRecord& r : records) {
    items.push_back(AuditRecordObject(r));
  }
  return Dump(json{{"kind", "AuditList"}, {"items", items}});
}

api::StatusOr<std::vector<Store::AuditRecord>> DecodeAudit(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "audit list"));
  std::vector<Store::AuditRecord> out;
  for (const json& e : j.value("items", json::array())) {
    Store::AuditRecord r;
    r.id = Int(e, "id");
    const std::optional<api::WallTime> time = api::ParseRfc3339(Str(e, "time"));
    if (!time) {
      return api::InvalidArgumentError("audit record " + std::to_string(r.id) +
                                       " has no valid time");
    }
    r.time_ms = api::UnixMillis(*time);
    r.actor = Str(e, "actor");
    r.role = Str(e, "role");
    r.verb = Str(e, "verb");
    ASSIGN_OR_RETURN(r.object, KeyFromJson(e.value("object", json::object())));
    r.resource_version_before = Int(e, "resourceVersionBefore");
    r.resource_version_after = Int(e, "resourceVersionAfter");
    r.result = Str(e, "result");
    r.source = Str(e, "source");
    r.spec_digest = Str(e, "specDigest");
    out.push_back(std::move(r));
  }
  return out;
}

std::string AuditQueryString(const Store::AuditQuery& query) {
  std::string q;
  const auto add = [&](std::string_view name, const std::string& value) {
    q += (q.empty() ? "" : "&") + std::string(name) + "=" + api::PercentEncode(value);
  };
  if (query.after_id > 0) {
    add("afterId", std::to_string(query.after_id));
  }
  if (query.since_ms > 0) {
    add("sinceMs", std::to_string(query.since_ms));
  }
  if (!query.actor.empty()) {
    add("actor", query.actor);
  }
  if (query.limit > 0) {
    add("limit", std::to_string(query.limit));
  }
  return q;
}

api::StatusOr<Store::AuditQuery> ParseAuditQuery(
    const std::function<std::optional<std::string>(std::string_view)>& param) {
  Store::AuditQuery query;
  const auto number = [&](std::string_view name, int64_t max) -> api::StatusOr<int64_t> {
    const std::optional<std::string> text = param(name);
    if (!text) {
      return 0;
    }
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec != std::errc() || end != text->data() + text->size() || value < 0 || value > max) {
      return api::InvalidArgumentError(std::string(name) + " must be a number from 0 to " +
                                       std::to_string(max));
    }
    return value;
  };
  ASSIGN_OR_RETURN(query.after_id, number("afterId", INT64_MAX));
  ASSIGN_OR_RETURN(query.since_ms, number("sinceMs", INT64_MAX));
  ASSIGN_OR_RETURN(const int64_t limit, number("limit", 100000));
  query.limit = static_cast<int>(limit);
  query.actor = param("actor").value_or("");
  return query;
}

namespace {
json TaskLogEntryObject(const Store::TaskLogEntry& e) {
  json j{{"seq", e.seq},
         {"kind", std::string(TaskLogKindName(e.kind))},
         {"itemId", e.item_id},
         {"text", e.text},
         {"at", e.at}};
  if (e.exit_code) {
    j["exitCode"] = *e.exit_code;
  }
  return j;
}
}  // namespace

std::string TaskLogEntryJson(const Store::TaskLogEntry& entry) {
  return Dump(TaskLogEntryObject(entry));
}

std::string TaskLogPageJson(const Store::TaskLogPage& page) {
  json entries = json::array();
  for (const Store::TaskLogEntry& e : page.entries) {
    entries.push_back(TaskLogEntryObject(e));
  }
  return Dump(json{{"entries", entries}, {"lastSeq", page.last_seq}, {"dropped", page.dropped}});
}

api::StatusOr<Store::TaskLogPage> DecodeTaskLogPage(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "task log"));
  Store::TaskLogPage page;
  page.last_seq = Int(j, "lastSeq");
  page.dropped = Int(j, "dropped");
  for (const json& e : j.value("entries", json::array())) {
    Store::TaskLogEntry entry;
    entry.seq = Int(e, "seq");
    entry.kind = TaskLogKindOf(Str(e, "kind"));
    entry.item_id = Str(e, "itemId");
    entry.text = Str(e, "text");
    entry.at = Str(e, "at");
    if (e.contains("exitCode")) {
      entry.exit_code = Int(e, "exitCode");
    }
    page.entries.push_back(std::move(entry));
  }
  return page;
}

std::string ArtifactsJson(const std::vector<Store::Artifact>& artifacts) {
  json items = json::array();
  for (const Store::Artifact& a : artifacts) {
    json item{{"path", a.path}, {"bytes", a.bytes}, {"sha256", a.sha256}};
    if (!a.content.empty()) {
      item["content"] = api::Base64Encode(a.content);
    }
    items.push_back(std::move(item));
  }
  return Dump(json{{"items", items}});
}

api::StatusOr<std::vector<Store::Artifact>> DecodeArtifacts(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "artifact list"));
  std::vector<Store::Artifact> out;
  for (const json& a : j.value("items", json::array())) {
    Store::Artifact artifact;
    artifact.path = Str(a, "path");
    artifact.bytes = Int(a, "bytes");
    artifact.sha256 = Str(a, "sha256");
    if (a.contains("content")) {
      auto content = api::Base64Decode(Str(a, "content"));
      if (!content) {
        return api::InternalError("the server sent an artifact that is not base64");
      }
      artifact.content = *std::move(content);
    }
    out.push_back(std::move(artifact));
  }
  return out;
}

std::string InventoryJson(const std::vector<Store::InventoryRecord>& records) {
  json items = json::array();
  for (const Store::InventoryRecord& r : records) {
    items.push_back(json{{"workspace", r.workspace},
                         {"resourceType", r.resource_type},
                         {"externalId", r.external_id},
                         {"state", std::string(InventoryStateName(r.state))},
                         {"owner", KeyJson(r.owner)},
                         {"ownerUid", r.owner_uid},
                         {"createdAt", r.created_at},
                         {"updatedAt", r.updated_at}});
  }
  return Dump(json{{"items", items}});
}

api::StatusOr<std::vector<Store::InventoryRecord>> DecodeInventory(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "inventory"));
  std::vector<Store::InventoryRecord> out;
  for (const json& r : j.value("items", json::array())) {
    Store::InventoryRecord record;
    record.workspace = Str(r, "workspace");
    record.resource_type = Str(r, "resourceType");
    record.external_id = Str(r, "externalId");
    record.state = InventoryStateOf(Str(r, "state"));
    ASSIGN_OR_RETURN(record.owner, KeyFromJson(r.value("owner", json::object())));
    record.owner_uid = Str(r, "ownerUid");
    record.created_at = Str(r, "createdAt");
    record.updated_at = Str(r, "updatedAt");
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace sbx::controller::apiwire
