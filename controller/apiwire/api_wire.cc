#include "controller/apiwire/api_wire.h"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "api/base64.h"
#include "api/codec.h"
#include "api/kinds.h"
#include "api/percent_encoding.h"
#include "api/rfc3339.h"
#include "controller/apiwire/internal/wire_json.h"

namespace sbx::controller::apiwire {
namespace {

using json = nlohmann::json;
using apiwire_internal::Bool;
using apiwire_internal::Dump;
using apiwire_internal::Int;
using apiwire_internal::KeyFromJson;
using apiwire_internal::KeyJson;
using apiwire_internal::ParseJson;
using apiwire_internal::Str;

std::string_view ReasonOf(api::StatusCode code) {
  using C = api::StatusCode;
  switch (code) {
    case C::kInvalidArgument:
      return "Invalid";
    case C::kNotFound:
      return "NotFound";
    case C::kAlreadyExists:
      return "AlreadyExists";
    case C::kAborted:
    case C::kFailedPrecondition:
      return "Conflict";
    case C::kOutOfRange:
      return "Expired";
    case C::kUnauthenticated:
      return "Unauthorized";
    case C::kPermissionDenied:
      return "Forbidden";
    case C::kResourceExhausted:
      return "TooManyRequests";
    case C::kUnavailable:
      return "ServiceUnavailable";
    case C::kDeadlineExceeded:
      return "Timeout";
    case C::kUnimplemented:
      return "MethodNotAllowed";
    case C::kCancelled:
      return "Cancelled";
    default:
      return "InternalError";
  }
}

std::optional<api::StatusCode> CodeFromName(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(api::StatusCode::kUnauthenticated); ++c) {
    const auto code = static_cast<api::StatusCode>(c);
    if (api::StatusCodeName(code) == name) {
      return code;
    }
  }
  return std::nullopt;
}

api::StatusCode CodeFromHttp(int http) {
  using C = api::StatusCode;
  switch (http) {
    case 400:
    case 422:
      return C::kInvalidArgument;
    case 401:
      return C::kUnauthenticated;
    case 403:
      return C::kPermissionDenied;
    case 404:
      return C::kNotFound;
    case 409:
      return C::kAborted;
    case 410:
      return C::kOutOfRange;
    case 413:
    case 429:
      return C::kResourceExhausted;
    case 503:
      return C::kUnavailable;
    case 504:
      return C::kDeadlineExceeded;
    default:
      return C::kInternal;
  }
}

std::string_view ActionName(ApplyAction action) {
  switch (action) {
    case ApplyAction::kCreated:
      return "created";
    case ApplyAction::kConfigured:
      return "configured";
    case ApplyAction::kUnchanged:
      return "unchanged";
    case ApplyAction::kPruned:
      return "pruned";
  }
  return "unchanged";
}

api::StatusOr<api::Object> ObjectFromJson(const json& j) {
  auto object = api::DecodeObjectJson(Dump(j));
  if (!object.ok()) {
    return api::InternalError("the server sent an object sbxctl cannot read: " +
                              object.status().message());
  }
  return object;
}

}  // namespace

std::string_view PluralOf(api::Kind kind) { return api::KindInfoOf(kind).plural; }

std::optional<api::Kind> KindOfPlural(std::string_view plural) {
  for (const api::KindInfo& info : api::Kinds()) {
    if (info.plural == plural) {
      return info.kind;
    }
  }
  return std::nullopt;
}

std::string CollectionPath(api::Kind kind, const std::optional<std::string>& namespace_) {
  std::string path(kApiPrefix);
  if (namespace_) {
    path += "/namespaces/" + api::PercentEncode(*namespace_);
  }
  return path + "/" + std::string(PluralOf(kind));
}

std::string ObjectPath(const api::ObjectKey& key) {
  return CollectionPath(key.kind, key.namespace_) + "/" + api::PercentEncode(key.name);
}

int HttpStatusOf(api::StatusCode code) {
  using C = api::StatusCode;
  switch (code) {
    case C::kOk:
      return 200;
    case C::kInvalidArgument:
      return 422;
    case C::kNotFound:
      return 404;
    case C::kAlreadyExists:
    case C::kAborted:
    case C::kFailedPrecondition:
      return 409;
    case C::kOutOfRange:
      return 410;
    case C::kUnauthenticated:
      return 401;
    case C::kPermissionDenied:
      return 403;
    case C::kResourceExhausted:
      return 429;
    case C::kUnavailable:
      return 503;
    case C::kDeadlineExceeded:
      return 504;
    case C::kUnimplemented:
      return 405;
    case C::kCancelled:
      return 499;
    default:
      return 500;
  }
}

std::string StatusJson(const api::Status& status) {
  json causes = json::array();
  std::string message = status.message();
  size_t start = 0;
  while (start < message.size()) {
    size_t nl = message.find('\n', start);
    if (nl == std::string::npos) {
      nl = message.size();
    }
    if (nl > start) {
      causes.push_back(json{{"message", message.substr(start, nl - start)}});
    }
    start = nl + 1;
  }
  const int code = HttpStatusOf(status.code());
  return Dump(
      json{{"kind", "Status"},
           {"apiVersion", "v1"},
           {"metadata", json::object()},
           {"status", "Failure"},
           {"reason", std::string(ReasonOf(status.code()))},
           {"code", code},
           {"message", message},
           {"details",
            {{"sbxCode", std::string(api::StatusCodeName(status.code()))}, {"causes", causes}}}});
}

api::Status StatusFromReply(int http_status, std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && Str(j, "kind") == "Status") {
    api::StatusCode code = CodeFromHttp(http_status);
    if (auto d = j.find("details"); d != j.end() && d->is_object()) {
      if (auto named = CodeFromName(Str(*d, "sbxCode"))) {
        code = *named;
      }
    }
    if (code == api::StatusCode::kOk) {
      code = api::StatusCode::kUnknown;
    }
    return api::Status(code, Str(j, "message"));
  }
  std::string excerpt(body.substr(0, 200));
  return api::Status(CodeFromHttp(http_status), "the server answered HTTP " +
                                                    std::to_string(http_status) +
                                                    (excerpt.empty() ? "" : ": " + excerpt));
}

std::string ListJson(api::Kind kind, const std::vector<api::Object>& objects, int64_t revision) {
  // Objects are encoded by the codec and spliced in: no re-parse of each one.
  std::string out =
      "{\"apiVersion\":\"sbx.dev/v1alpha1\",\"kind\":\"" + std::string(api::KindName(kind)) +
      "List\",\"metadata\":{\"resourceVersion\":\"" + std::to_string(revision) + "\"},\"items\":[";
  for (size_t i = 0; i < objects.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += api::EncodeObjectJson(objects[i], /*pretty=*/false);
  }
  out += "]}";
  return out;
}

api::StatusOr<ObjectList> DecodeList(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "list"));
  ObjectList list;
  if (auto m = j.find("metadata"); m != j.end() && m->is_object()) {
    list.revision = Int(*m, "resourceVersion");
  }
  auto items = j.find("items");
  if (items == j.end() || !items->is_array()) {
    return api::InternalError("the server's list has no items");
  }
  for (const json& item : *items) {
    ASSIGN_OR_RETURN(api::Object o, ObjectFromJson(item));
    list.items.push_back(std::move(o));
  }
  return list;
}

std::string WatchEventJson(const Store::Change& change) {
  std::string type;
  std::string object;
  switch (change.type) {
    case Store::ChangeType::kAdded:
      type = "ADDED";
      break;
    case Store::ChangeType::kModified:
      type = "MODIFIED";
      break;
    case Store::ChangeType::kDeleted:
      type = "DELETED";
      break;
  }
  if (change.object) {
    object = api::EncodeObjectJson(*change.object, /*pretty=*/false);
  } else {
    api::Object gone = api::MakeObject(change.key.kind, change.key.name, change.key.namespace_);
    gone.metadata.resource_version = change.revision;
    object = api::EncodeObjectJson(gone, /*pretty=*/false);
  }
  return "{\"type\":\"" + type + "\",\"object\":" + object + "}\n";
}

std::string WatchErrorJson(const api::Status& status) {
  return "{\"type\":\"ERROR\",\"object\":" + StatusJson(status) + "}\n";
}

api::StatusOr<Store::Change> DecodeWatchEvent(std::string_view line) {
  ASSIGN_OR_RETURN(json j, ParseJson(line, "watch event"));
  const std::string type = Str(j, "type");
  auto object = j.find("object");
  if (object == j.end() || !object->is_object()) {
    return api::InternalError("a watch event without an object");
  }
  if (type == "ERROR") {
    const int code = static_cast<int>(Int(*object, "code"));
    return StatusFromReply(code == 0 ? 500 : code, Dump(*object));
  }
  ASSIGN_OR_RETURN(api::Object o, ObjectFromJson(*object));
  Store::Change change;
  change.revision = o.metadata.resource_version;
  change.key = api::KeyOf(o);
  if (type == "ADDED") {
    change.type = Store::ChangeType::kAdded;
  } else if (type == "MODIFIED") {
    change.type = Store::ChangeType::kModified;
  } else if (type == "DELETED") {
    change.type = Store::ChangeType::kDeleted;
    return change;
  } else {
    return api::InternalError("unknown watch event type \"" + type + "\"");
  }
  change.object = std::move(o);
  return change;
}

std::string ApplyRequestJson(const ApplyRequest& request) {
  json manifests = json::array();
  for (const ManifestFile& m : request.manifests) {
    json f{{"file", m.file}, {"content", m.content}};
    if (m.resource_version) {
      f["resourceVersion"] = std::to_string(*m.resource_version);
    }
    manifests.push_back(std::move(f));
  }
  return Dump(json{{"manifests", manifests},
                   {"dryRun", request.options.dry_run},
                   {"prune", request.options.prune},
                   {"applyset", request.options.applyset},
                   {"pruneAllowEmpty", request.options.prune_allow_empty},
                   {"requireResourceVersion", request.options.require_resource_version}});
}

api::StatusOr<ApplyRequest> DecodeApplyRequest(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return api::InvalidArgumentError("request body: not a JSON object");
  }
  ApplyRequest request;
  auto manifests = j.find("manifests");
  if (manifests == j.end() || !manifests->is_array()) {
    return api::InvalidArgumentError("request body: manifests: a list of {file, content} needed");
  }
  for (size_t i = 0; i < manifests->size(); ++i) {
    const json& m = (*manifests)[i];
    const std::string where = "request body: manifests[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("content") || !m["content"].is_string()) {
      return api::InvalidArgumentError(where + ".content: a string is needed");
    }
    ManifestFile f;
    f.file = Str(m, "file");
    if (f.file.empty()) {
      f.file = "manifests[" + std::to_string(i) + "]";
    }
    f.content = m["content"].get<std::string>();
    if (m.contains("resourceVersion")) {
      f.resource_version = Int(m, "resourceVersion");
    }
    request.manifests.push_back(std::move(f));
  }
  request.options.dry_run = Bool(j, "dryRun");
  request.options.prune = Bool(j, "prune");
  request.options.applyset = Str(j, "applyset");
  request.options.prune_allow_empty = Bool(j, "pruneAllowEmpty");
  request.options.require_resource_version = Bool(j, "requireResourceVersion");
  return request;
}

std::string ApplyResultsJson(const std::vector<ApplyResult>& results) {
  std::string out = "{\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    if (i > 0) {
      out += ',';
    }
    out += "{\"action\":\"" + std::string(ActionName(results[i].action)) +
           "\",\"key\":" + Dump(KeyJson(results[i].key)) +
           ",\"object\":" + api::EncodeObjectJson(results[i].object, false) + "}";
  }
  return out + "]}";
}

api::StatusOr<std::vector<ApplyResult>> DecodeApplyResults(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "apply result"));
  std::vector<ApplyResult> out;
  auto results = j.find("results");
  if (results == j.end() || !results->is_array()) {
    return api::InternalError("the server's apply result has no results");
  }
  for (const json& r : *results) {
    ApplyResult result;
    const std::string action = Str(r, "action");
    for (const ApplyAction a : {ApplyAction::kCreated, ApplyAction::kConfigured,
                                ApplyAction::kUnchanged, ApplyAction::kPruned}) {
      if (ActionName(a) == action) {
        result.action = a;
      }
    }
    if (r.contains("key")) {
      ASSIGN_OR_RETURN(result.key, KeyFromJson(r["key"]));
    }
    if (r.contains("object")) {
      ASSIGN_OR_RETURN(result.object, ObjectFromJson(r["object"]));
    }
    out.push_back(std::move(result));
  }
  return out;
}

std::string DeleteOutcomeJson(DeleteOutcome outcome) {
  std::string name = "Deleted";
  if (outcome == DeleteOutcome::kMarkedForDeletion) {
    name = "MarkedForDeletion";
  } else if (outcome == DeleteOutcome::kAlreadyDeleting) {
    name = "AlreadyDeleting";
  }
  return Dump(json{{"kind", "Status"}, {"status", "Success"}, {"outcome", name}});
}

api::StatusOr<DeleteOutcome> DecodeDeleteOutcome(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "delete result"));
  const std::string outcome = Str(j, "outcome");
  if (outcome == "MarkedForDeletion") {
    return DeleteOutcome::kMarkedForDeletion;
  }
  if (outcome == "AlreadyDeleting") {
    return DeleteOutcome::kAlreadyDeleting;
  }
  return DeleteOutcome::kDeleted;
}

std::string RevisionJson(int64_t revision) {
  return "{\"resourceVersion\":\"" + std::to_string(revision) + "\"}";
}

api::StatusOr<int64_t> DecodeRevision(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "revision"));
  return Int(j, "resourceVersion");
}

std::string ExecRequestJson(const ExecRequest& request) {
  return Dump(json{{"command", request.command}, {"timeoutSeconds", request.timeout_seconds}});
}

api::StatusOr<ExecRequest> DecodeExecRequest(std::string_view body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return api::InvalidArgumentError("request body: not a JSON object");
  }
  ExecRequest request;
  auto command = j.find("command");
  if (command == j.end() || !command->is_array() || command->empty()) {
    return api::InvalidArgumentError("request body: command: a non-empty list of strings needed");
  }
  for (const json& arg : *command) {
    if (!arg.is_string()) {
      return api::InvalidArgumentError("request body: command: only strings");
    }
    request.command.push_back(arg.get<std::string>());
  }
  if (j.contains("timeoutSeconds")) {
    request.timeout_seconds = Int(j, "timeoutSeconds");
  }
  return request;
}

std::string CommandResultJson(const CommandResult& result) {
  std::string outcome = "Unknown";
  switch (result.outcome) {
    case CommandOutcome::kCompleted:
      outcome = "Completed";
      break;
    case CommandOutcome::kFailed:
      outcome = "Failed";
      break;
    case CommandOutcome::kTimedOut:
      outcome = "TimedOut";
      break;
    case CommandOutcome::kUnknown:
      break;
  }
  json j{{"outcome", outcome},
         {"stdout", api::Base64Encode(result.stdout_text)},
         {"stderr", api::Base64Encode(result.stderr_text)},
         {"truncated", result.truncated}};
  if (result.exit_code) {
    j["exitCode"] = *result.exit_code;
  }
  return Dump(j);
}

api::StatusOr<CommandResult> DecodeCommandResult(std::string_view body) {
  ASSIGN_OR_RETURN(json j, ParseJson(body, "exec result"));
  CommandResult result;
  const std::string outcome = Str(j, "outcome");
  result.outcome = outcome == "Completed"  ? CommandOutcome::kCompleted
                   : outcome == "Failed"   ? CommandOutcome::kFailed
                   : outcome == "TimedOut" ? CommandOutcome::kTimedOut
                                           : CommandOutcome::kUnknown;
  if (j.contains("exitCode")) {
    result.exit_code = static_cast<int>(Int(j, "exitCode"));
  }
  auto out = api::Base64Decode(Str(j, "stdout"));
  auto err = api::Base64Decode(Str(j, "stderr"));
  if (!out || !err) {
    return api::InternalError("the server's exec result is not base64");
  }
  result.stdout_text = *std::move(out);
  result.stderr_text = *std::move(err);
  result.truncated = Bool(j, "truncated");
  return result;
}

}  // namespace sbx::controller::apiwire
