// The store's records in a dialect-neutral form, shared by the SQL stores' translation units:
// one object row as stored (metadata kept as canonical JSON text), the text forms of change types
// and inventory states, the change log's object JSON, and turning a row back into an api::Object.
// Nothing here knows SQLite: a PostgreSQL store (issue #17) can reuse all of it.
//
// Thread-safety: pure functions and plain values. Module-private to controller/store.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/store/store.h"

namespace sbx::controller::store_internal {

// One object row as stored; JSON columns kept as text.
struct ObjectRow {
  ObjectKey key;
  std::string uid;
  int64_t generation = 0;
  int64_t resource_version = 0;
  std::string spec;
  std::string status;
  std::string labels = "{}";
  std::string annotations = "{}";
  std::string owner_references = "[]";
  std::string finalizers = "[]";
  std::string deletion_timestamp;  // "" when not being deleted (NULL in the table)
  std::string applyset;            // "" when in no applyset (NULL in the table)
  std::string creation_timestamp;
  std::string update_timestamp;
  // api::HasFinished of the object, set wherever the status is (ObjectToRow, UpdateStatus); the
  // column ListOptions::unfinished_only filters on. The change log does not carry it.
  bool finished = false;
};

// kDataLoss with `message`: what the database holds cannot be what the store wrote.
Status DataLossError(std::string message);

// "ADDED", "MODIFIED", "DELETED" (the change log's type column) and back.
std::string_view ChangeTypeName(Store::ChangeType type);
std::optional<Store::ChangeType> ParseChangeType(std::string_view text);

// "intent", "live", "deleting", "abandoned" (the inventory's state column) and back.
std::string_view InventoryStateName(Store::InventoryState state);
std::optional<Store::InventoryState> ParseInventoryState(std::string_view text);

// "assistant.delta", "assistant", "command", "output.delta", "command.result", "status" (the task
// log's kind column) and back; an unknown name reads as kStatus.
std::string_view TaskLogKindName(Store::TaskLogKind kind);
Store::TaskLogKind ParseTaskLogKind(std::string_view name);

// An event as RecordEvent stores it: count at least 1, first and last seen `now` when unset.
Store::Event RecordedEvent(const Store::Event& event, const std::string& now);
// An inventory record as PutInventory stores it: created and updated `now` when unset.
Store::InventoryRecord PutInventoryRecord(const Store::InventoryRecord& record,
                                          const std::string& now);

// PutArtifact's checks: kInvalidArgument unless `artifact.bytes` is its content's size;
// kResourceExhausted if it and the task's other artifacts (`others` bytes) pass
// kMaxTaskArtifactBytes.
Status CheckArtifactSize(const Store::Artifact& artifact);
Status CheckArtifactBudget(const ObjectKey& task, const Store::Artifact& artifact, int64_t others);

// An appended entry as AppendTaskLog stores it: numbered `seq`, stamped `at`, its text cut to
// `max_bytes`.
Store::TaskLogEntry StoredTaskLogEntry(const Store::TaskLogEntry& entry, int64_t seq,
                                       int64_t max_bytes, std::string at);

// Canonical JSON of the metadata the store keeps as JSON columns. std::map and nlohmann's
// object are both sorted, so equal values give equal text and can be compared as strings.
std::string MapToJson(const std::map<std::string, std::string>& map);
std::string FinalizersToJson(const std::vector<std::string>& finalizers);
std::string OwnersToJson(const std::vector<api::OwnerReference>& owners);

// A random RFC 4122 version-4 UUID, lower-case, from `random`.
std::string MakeUuidV4(std::mt19937_64& random);

// The change log's object JSON: the API shape (apiVersion, kind, metadata, spec, status) built
// from the row's columns, so that a change decodes back into exactly the stored object.
std::string EncodeChangeObject(const ObjectRow& row);
// The row EncodeChangeObject was given (applyset and update_timestamp excepted, which are not in
// the API shape); kDataLoss if `text` is not such JSON.
StatusOr<ObjectRow> DecodeChangeObject(const ObjectKey& key, std::string_view text);

// The row that stores `object` as it is (uid, resourceVersion, timestamps … taken from its
// metadata, not assigned), with `applyset` and `update_timestamp`: an imported object.
ObjectRow ObjectToRow(const Object& object, std::string applyset, std::string update_timestamp);

// The api::Object a row stores; kDataLoss naming `database` and the object if a column does not
// decode.
StatusOr<Object> RowToObject(std::string_view database, const ObjectRow& row);

}  // namespace sbx::controller::store_internal
