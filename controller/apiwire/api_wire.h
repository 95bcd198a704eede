// ApiWire: the JSON of sbxd's REST API (DESIGN §7.3), shared by the server (api_server.h) and
// its client (controller/apiclient/http_store.h), so both sides read what the other writes.
//
// Paths are Kubernetes-style under kApiPrefix ("/apis/sbx.dev/v1alpha1"): objects are
// `namespaces/{ns}/{plural}[/{name}]`, lists carry `metadata.resourceVersion` (the store
// revision read before listing), watch events are JSON lines `{"type":"ADDED|MODIFIED|DELETED|
// ERROR","object":{…}}`, and errors are a Kubernetes `Status` object:
//   {"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,
//    "message":"…","details":{"sbxCode":"NOT_FOUND","causes":[{"message":"file:line:col: …"}]}}
// `details.sbxCode` carries the canonical status code so a client reproduces the error exactly.
// Stateless functions; thread-safe. Decoders return kInternal for a reply they cannot read.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/cloud/sandbox_commands.h"
#include "controller/store/store.h"

namespace sbx::controller::apiwire {

inline constexpr std::string_view kApiPrefix = "/apis/sbx.dev/v1alpha1";

// The kind's plural (api/kinds.h): "sandboxes", "agentworkers", ….
std::string_view PluralOf(api::Kind kind);
// Only the plural (the path segment). nullopt otherwise.
std::optional<api::Kind> KindOfPlural(std::string_view plural);
// "/apis/sbx.dev/v1alpha1/namespaces/{ns}/{plural}[/{name}]", each segment percent-encoded.
std::string ObjectPath(const api::ObjectKey& key);
std::string CollectionPath(api::Kind kind, const std::optional<std::string>& namespace_);

// ---- errors ---------------------------------------------------------------------------------
int HttpStatusOf(api::StatusCode code);
std::string StatusJson(const api::Status& status);
// The api::Status an error reply stands for (code from details.sbxCode, else from the HTTP
// status); a body that is not a Status keeps the HTTP status and a short excerpt.
api::Status StatusFromReply(int http_status, std::string_view body);

// ---- objects --------------------------------------------------------------------------------
std::string ListJson(api::Kind kind, const std::vector<api::Object>& objects, int64_t revision);
struct ObjectList {
  std::vector<api::Object> items;
  int64_t revision = 0;
};
api::StatusOr<ObjectList> DecodeList(std::string_view body);

// One watch line (with its trailing '\n'). A kDeleted change carries the object's identity
// and the deleting revision as its resourceVersion.
std::string WatchEventJson(const Store::Change& change);
// A watch ERROR line for `status` (410 Expired for kOutOfRange).
std::string WatchErrorJson(const api::Status& status);
// Decodes one watch line: a change, or the error the server ended the watch with.
api::StatusOr<Store::Change> DecodeWatchEvent(std::string_view line);

// ---- apply ----------------------------------------------------------------------------------
// POST /apply: {"manifests":[{"file":"a.yaml","content":"…","resourceVersion":12?}],
//               "dryRun":false,"prune":false,"applyset":"","pruneAllowEmpty":false,
//               "requireResourceVersion":false}
struct ManifestFile {
  std::string file;
  std::string content;
  std::optional<int64_t> resource_version;  // for requireResourceVersion: of its one object
};
struct ApplyRequest {
  std::vector<ManifestFile> manifests;
  ApplyOptions options;
};
std::string ApplyRequestJson(const ApplyRequest& request);
api::StatusOr<ApplyRequest> DecodeApplyRequest(std::string_view body);
// {"results":[{"action":"created","object":{…}}]}
std::string ApplyResultsJson(const std::vector<ApplyResult>& results);
api::StatusOr<std::vector<ApplyResult>> DecodeApplyResults(std::string_view body);

// ---- delete ---------------------------------------------------------------------------------
std::string DeleteOutcomeJson(DeleteOutcome outcome);
api::StatusOr<DeleteOutcome> DecodeDeleteOutcome(std::string_view body);

// ---- events, task logs, artifacts, inventory ---------------------------------------------------
std::string EventsJson(const std::vector<Store::Event>& events);
api::StatusOr<std::vector<Store::Event>> DecodeEvents(std::string_view body);
std::string TaskLogEntryJson(const Store::TaskLogEntry& entry);
std::string TaskLogPageJson(const Store::TaskLogPage& page);
api::StatusOr<Store::TaskLogPage> DecodeTaskLogPage(std::string_view body);
std::string ArtifactsJson(const std::vector<Store::Artifact>& artifacts);
api::StatusOr<std::vector<Store::Artifact>> DecodeArtifacts(std::string_view body);
std::string InventoryJson(const std::vector<Store::InventoryRecord>& records);
api::StatusOr<std::vector<Store::InventoryRecord>> DecodeInventory(std::string_view body);
// ---- audit log (GET audit, admin only; also sbxctl audit -o json and sbxd --audit-log) --------
// One record as one line of JSON: {"id":7,"time":"…Z","actor":…,"role":…,"verb":…,"object":
// {kind,namespace,name},"resourceVersionBefore":…,"resourceVersionAfter":…,"result":…,"source":
// …,"specDigest":…}.
std::string AuditRecordJson(const Store::AuditRecord& record);
std::string AuditJson(const std::vector<Store::AuditRecord>& records);
api::StatusOr<std::vector<Store::AuditRecord>> DecodeAudit(std::string_view body);
// The query string of GET audit for `query` ("afterId=…&sinceMs=…&actor=…&limit=…", the unset
// ones left out), and back.
std::string AuditQueryString(const Store::AuditQuery& query);
api::StatusOr<Store::AuditQuery> ParseAuditQuery(
    const std::function<std::optional<std::string>(std::string_view)>& param);
std::string RevisionJson(int64_t revision);
api::StatusOr<int64_t> DecodeRevision(std::string_view body);

// ---- exec -----------------------------------------------------------------------------------
// POST namespaces/{ns}/sandboxes/{name}/exec: {"command":["ls","-l"],"timeoutSeconds":60}
struct ExecRequest {
  std::vector<std::string> command;
  int64_t timeout_seconds = 60;
};
std::string ExecRequestJson(const ExecRequest& request);
api::StatusOr<ExecRequest> DecodeExecRequest(std::string_view body);
// {"outcome":"Completed|Failed|TimedOut|Unknown","exitCode":0?,"stdout":"…","stderr":"…",
//  "truncated":false}; stdout/stderr base64 (a program's bytes need not be UTF-8).
std::string CommandResultJson(const CommandResult& result);
api::StatusOr<CommandResult> DecodeCommandResult(std::string_view body);

}  // namespace sbx::controller::apiwire
