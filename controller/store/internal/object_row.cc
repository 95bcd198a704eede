#include "controller/store/internal/object_row.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <utility>

#include "api/codec.h"

namespace sbx::controller::store_internal {

using json = nlohmann::json;
using api::KindName;

Status DataLossError(std::string message) {
  return Status(api::StatusCode::kDataLoss, std::move(message));
}

std::string_view ChangeTypeName(Store::ChangeType type) {
  switch (type) {
    case Store::ChangeType::kAdded:
      return "ADDED";
    case Store::ChangeType::kModified:
      return "MODIFIED";
    case Store::ChangeType::kDeleted:
      return "DELETED";
  }
  return "MODIFIED";
}

std::optional<Store::ChangeType> ParseChangeType(std::string_view text) {
  if (text == "ADDED") {
    return Store::ChangeType::kAdded;
  }
  if (text == "MODIFIED") {
    return Store::ChangeType::kModified;
  }
  if (text == "DELETED") {
    return Store::ChangeType::kDeleted;
  }
  return std::nullopt;
}

std::string_view InventoryStateName(Store::InventoryState state) {
  switch (state) {
    case Store::InventoryState::kIntent:
      return "intent";
    case Store::InventoryState::kLive:
      return "live";
    case Store::InventoryState::kDeleting:
      return "deleting";
    case Store::InventoryState::kAbandoned:
      return "abandoned";
  }
  return "intent";
}

std::optional<Store::InventoryState> ParseInventoryState(std::string_view text) {
  if (text == "intent") {
    return Store::InventoryState::kIntent;
  }
  if (text == "live") {
    return Store::InventoryState::kLive;
  }
  if (text == "deleting") {
    return Store::InventoryState::kDeleting;
  }
  if (text == "abandoned") {
    return Store::InventoryState::kAbandoned;
  }
  return std::nullopt;
}

std::string_view TaskLogKindName(Store::TaskLogKind kind) {
  switch (kind) {
    case Store::TaskLogKind::kAssistantDelta:
      return "assistant.delta";
    case Store::TaskLogKind::kAssistant:
      return "assistant";
    case Store::TaskLogKind::kCommand:
      return "command";
    case Store::TaskLogKind::kOutputDelta:
      return "output.delta";
    case Store::TaskLogKind::kCommandResult:
      return "command.result";
    case Store::TaskLogKind::kStatus:
      return "status";
  }
  return "status";
}

Store::TaskLogKind ParseTaskLogKind(std::string_view name) {
  for (Store::TaskLogKind k : {Store::TaskLogKind::kAssistantDelta, Store::TaskLogKind::kAssistant,
                               Store::TaskLogKind::kCommand, Store::TaskLogKind::kOutputDelta,
                               Store::TaskLogKind::kCommandResult}) {
    if (TaskLogKindName(k) == name) {
      return k;
    }
  }
  return Store::TaskLogKind::kStatus;
}

Store::Event RecordedEvent(const Store::Event& event, const std::string& now) {
  Store::Event recorded = event;
  recorded.count = std::max<int64_t>(event.count, 1);
  recorded.first_seen = event.first_seen.empty() ? now : event.first_seen;
  recorded.last_seen = event.last_seen.empty() ? now : event.last_seen;
  return recorded;
}

Store::InventoryRecord PutInventoryRecord(const Store::InventoryRecord& record,
                                          const std::string& now) {
  Store::InventoryRecord put = record;
  put.created_at = record.created_at.empty() ? now : record.created_at;
  put.updated_at = record.updated_at.empty() ? now : record.updated_at;
  return put;
}

Status CheckArtifactSize(const Store::Artifact& artifact) {
  if (artifact.bytes == static_cast<int64_t>(artifact.content.size())) {
    return api::OkStatus();
  }
  return api::InvalidArgumentError("artifact " + artifact.path + ": bytes " +
                                   std::to_string(artifact.bytes) + " but " +
                                   std::to_string(artifact.content.size()) + " bytes of content");
}

Status CheckArtifactBudget(const ObjectKey& task, const Store::Artifact& artifact, int64_t others) {
  if (others + artifact.bytes <= kMaxTaskArtifactBytes) {
    return api::OkStatus();
  }
  return api::ResourceExhaustedError("artifact " + artifact.path + " (" +
                                     std::to_string(artifact.bytes) + " bytes) would take task " +
                                     task.ToString() + " past 16 MiB of artifacts");
}

Store::TaskLogEntry StoredTaskLogEntry(const Store::TaskLogEntry& entry, int64_t seq,
                                       int64_t max_bytes, std::string at) {
  Store::TaskLogEntry stored;
  stored.seq = seq;
  stored.kind = entry.kind;
  stored.item_id = entry.item_id;
  stored.text = entry.text.substr(0, static_cast<size_t>(std::max<int64_t>(max_bytes, 0)));
  stored.exit_code = entry.exit_code;
  stored.at = std::move(at);
  return stored;
}

std::string MapToJson(const std::map<std::string, std::string>& map) { return json(map).dump(); }

std::string FinalizersToJson(const std::vector<std::string>& finalizers) {
  return json(finalizers).dump();
}

std::string OwnersToJson(const std::vector<api::OwnerReference>& owners) {
  json array = json::array();
  for (const auto& owner : owners) {
    array.push_back({{"kind", std::string(KindName(owner.kind))},
                     {"name", owner.name},
                     {"uid", owner.uid},
                     {"controller", owner.controller}});
  }
  return array.dump();
}

std::string MakeUuidV4(std::mt19937_64& random) {
  std::array<uint8_t, 16> bytes{};
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t r = random();
    for (size_t j = 0; j < 8; ++j) {
      bytes[i + j] = static_cast<uint8_t>(r >> (8 * j));
    }
  }
  bytes[6] = static_cast<uint8_t>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<uint8_t>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  out.reserve(36);
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      out.push_back('-');
    }
    out.push_back(kHex[bytes[i] >> 4]);
    out.push_back(kHex[bytes[i] & 0x0f]);
  }
  return out;
}

std::string EncodeChangeObject(const ObjectRow& row) {
  json meta = {{"name", row.key.name},
               {"namespace", row.key.namespace_},
               {"uid", row.uid},
               {"generation", row.generation},
               {"resourceVersion", row.resource_version},
               {"creationTimestamp", row.creation_timestamp}};
  if (!row.deletion_timestamp.empty()) {
    meta["deletionTimestamp"] = row.deletion_timestamp;
  }
  std::string meta_text = meta.dump();
  meta_text.pop_back();  // splice the JSON columns in as they are, without re-parsing them
  meta_text += ",\"labels\":" + row.labels + ",\"annotations\":" + row.annotations +
               ",\"finalizers\":" + row.finalizers +
               ",\"ownerReferences\":" + row.owner_references + "}";
  std::string out = "{\"apiVersion\":" + json(std::string(api::kApiVersion)).dump() +
                    ",\"kind\":" + json(std::string(KindName(row.key.kind))).dump() +
                    ",\"metadata\":" + meta_text + ",\"spec\":" + row.spec +
                    ",\"status\":" + row.status + "}";
  return out;
}

StatusOr<ObjectRow> DecodeChangeObject(const ObjectKey& key, std::string_view text) {
  ObjectRow row;
  row.key = key;
  try {
    const json object = json::parse(text);
    const json& meta = object.at("metadata");
    row.uid = meta.at("uid").get<std::string>();
    row.generation = meta.at("generation").get<int64_t>();
    row.resource_version = meta.at("resourceVersion").get<int64_t>();
    row.creation_timestamp = meta.value("creationTimestamp", "");
    row.deletion_timestamp = meta.value("deletionTimestamp", "");
    row.labels = meta.value("labels", json::object()).dump();
    row.annotations = meta.value("annotations", json::object()).dump();
    row.finalizers = meta.value("finalizers", json::array()).dump();
    row.owner_references = meta.value("ownerReferences", json::array()).dump();
    row.spec = object.at("spec").dump();
    row.status = object.at("status").dump();
  } catch (const json::exception& e) {
    return DataLossError(std::string("bad change record: ") + e.what());
  }
  return row;
}

ObjectRow ObjectToRow(const Object& object, std::string applyset, std::string update_timestamp) {
  const api::ObjectMeta& meta = object.metadata;
  ObjectRow row;
  row.key = api::KeyOf(object);
  row.uid = meta.uid;
  row.generation = meta.generation;
  row.resource_version = meta.resource_version;
  row.spec = api::EncodeSpecJson(object);
  row.status = api::EncodeStatusJson(object);
  row.labels = MapToJson(meta.labels);
  row.annotations = MapToJson(meta.annotations);
  row.owner_references = OwnersToJson(meta.owner_references);
  row.finalizers = FinalizersToJson(meta.finalizers);
  row.deletion_timestamp = meta.deletion_timestamp;
  row.applyset = std::move(applyset);
  row.creation_timestamp = meta.creation_timestamp;
  row.update_timestamp = std::move(update_timestamp);
  row.finished = api::HasFinished(object);
  return row;
}

StatusOr<Object> RowToObject(std::string_view database, const ObjectRow& row) {
  const std::string where = "database " + std::string(database) + ": " + row.key.ToString() + ": ";
  Object object = api::MakeObject(row.key.kind, row.key.name, row.key.namespace_);
  auto spec = api::DecodeSpecJson(row.key.kind, row.spec);
  if (!spec.ok()) {
    return DataLossError(where + "spec: " + spec.status().message());
  }
  object.spec = std::move(spec).value();
  auto status = api::DecodeStatusJson(row.key.kind, row.status);
  if (!status.ok()) {
    return DataLossError(where + "status: " + status.status().message());
  }
  object.status = std::move(status).value();
  api::ObjectMeta& meta = object.metadata;
  meta.uid = row.uid;
  meta.generation = row.generation;
  meta.resource_version = row.resource_version;
  meta.creation_timestamp = row.creation_timestamp;
  meta.deletion_timestamp = row.deletion_timestamp;
  try {
    meta.labels = json::parse(row.labels).get<std::map<std::string, std::string>>();
    meta.annotations = json::parse(row.annotations).get<std::map<std::string, std::string>>();
    meta.finalizers = json::parse(row.finalizers).get<std::vector<std::string>>();
    for (const json& owner : json::parse(row.owner_references)) {
      api::OwnerReference ref;
      auto kind = api::ParseKind(owner.at("kind").get<std::string>());
      if (!kind.ok()) {
        return DataLossError(where + "ownerReferences: " + kind.status().message());
      }
      ref.kind = *kind;
      ref.name = owner.at("name").get<std::string>();
      ref.uid = owner.at("uid").get<std::string>();
      ref.controller = owner.value("controller", true);
      meta.owner_references.push_back(std::move(ref));
    }
  } catch (const json::exception& e) {
    return DataLossError(where + "metadata: " + e.what());
  }
  return object;
}

}  // namespace sbx::controller::store_internal
