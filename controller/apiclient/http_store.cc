#include "controller/apiclient/http_store.h"

#include <algorithm>

#include "api/codec.h"
#include "api/percent_encoding.h"
#include "controller/apiwire/api_wire.h"

namespace sbx::controller::apiclient {
namespace {

using api::PercentEncode;
using apiwire::kApiPrefix;
using apiwire::ObjectPath;

Status NotForClients(std::string_view what) {
  return api::PermissionDeniedError(std::string(what) +
                                    " is not offered to clients of the API server");
}

std::string SelectorQuery(const std::map<std::string, std::string>& selector) {
  std::string text;
  for (const auto& [k, v] : selector) {
    if (!text.empty()) {
      text += ',';
    }
    text += k;
    text += '=';
    text += v;
  }
  return text.empty() ? "" : "labelSelector=" + PercentEncode(text);
}

}  // namespace

HttpStore::HttpStore(http::HttpTransport& transport, http::StreamingTransport& streaming,
                     HttpStoreOptions options)
    : transport_(transport), streaming_(streaming), options_(std::move(options)) {
  while (!options_.server.empty() && options_.server.back() == '/') {
    options_.server.pop_back();
  }
}

StatusOr<std::string> HttpStore::Call(const std::string& method, const std::string& path_and_query,
                                      const std::optional<std::string>& body,
                                      std::chrono::milliseconds timeout) {
  http::HttpRequest request;
  request.method = method;
  request.url = options_.server + path_and_query;
  request.headers.emplace_back("Authorization", "Bearer " + options_.token);
  request.headers.emplace_back("Accept", "application/json");
  if (body) {
    request.headers.emplace_back("Content-Type", "application/json");
    request.body = *body;
  }
  request.timeout = timeout.count() > 0 ? timeout : options_.timeout;
  http::HttpResult result = transport_.Send(request, {});
  if (!result.status.ok()) {
    return api::UnavailableError("server " + options_.server + ": " + result.status.message());
  }
  if (result.response.status < 200 || result.response.status >= 300) {
    return apiwire::StatusFromReply(result.response.status, result.response.body);
  }
  return std::move(result.response.body);
}

void HttpStore::Remember(const Object& object) {
  if (object.kind == api::Kind::kAgentTask && !object.metadata.uid.empty()) {
    std::lock_guard lock(mu_);
    tasks_by_uid_[object.metadata.uid] = api::KeyOf(object);
  }
}

StatusOr<ObjectKey> HttpStore::TaskOf(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = tasks_by_uid_.find(uid);
  if (it == tasks_by_uid_.end()) {
    return api::NotFoundError("agent task with uid " + uid + " not read from the server yet");
  }
  return it->second;
}

StatusOr<std::vector<ApplyResult>> HttpStore::Apply(const std::vector<Object>& objects,
                                                    const ApplyOptions& options) {
  apiwire::ApplyRequest request;
  request.options = options;
  for (const Object& o : objects) {
    apiwire::ManifestFile f;
    f.file =
        std::string(api::KindName(o.kind)) + "/" + o.metadata.namespace_ + "/" + o.metadata.name;
    f.content = api::EncodeObjectJson(o, /*pretty=*/true);
    if (options.require_resource_version) {
      f.resource_version = o.metadata.resource_version;
    }
    request.manifests.push_back(std::move(f));
  }
  ASSIGN_OR_RETURN(std::string body, Call("POST", std::string(kApiPrefix) + "/apply",
                                          apiwire::ApplyRequestJson(request)));
  ASSIGN_OR_RETURN(std::vector<ApplyResult> results, apiwire::DecodeApplyResults(body));
  for (const ApplyResult& r : results) {
    Remember(r.object);
  }
  return results;
}

StatusOr<Object> HttpStore::Get(const ObjectKey& key) {
  ASSIGN_OR_RETURN(std::string body, Call("GET", ObjectPath(key)));
  auto object = api::DecodeObjectJson(body);
  if (!object.ok()) {
    return api::InternalError("the server sent an object sbxctl cannot read: " +
                              object.status().message());
  }
  Remember(*object);
  return object;
}

StatusOr<std::vector<Object>> HttpStore::List(const ListOptions& options) {
  std::vector<Object> out;
  const std::string query = SelectorQuery(options.label_selector);
  for (const api::Kind kind : api::kAllKinds) {
    if (options.kind && *options.kind != kind) {
      continue;
    }
    std::string path = apiwire::CollectionPath(kind, options.namespace_);
    if (!query.empty()) {
      path += "?" + query;
    }
    ASSIGN_OR_RETURN(std::string body, Call("GET", path));
    ASSIGN_OR_RETURN(apiwire::ObjectList list, apiwire::DecodeList(body));
    for (Object& o : list.items) {
      Remember(o);
      if (!options.unfinished_only || !api::HasFinished(o)) {  // the API has no such filter
        out.push_back(std::move(o));
      }
    }
  }
  // As SqliteStore: by kind, namespace, name (each page is; the concatenation by kind is too,
  // but the contract should not rest on the order of kAllKinds).
  std::sort(out.begin(), out.end(),
            [](const Object& a, const Object& b) { return api::KeyOf(a) < api::KeyOf(b); });
  return out;
}

StatusOr<Object> HttpStore::UpdateStatus(const Object&) { return NotForClients("writing status"); }

StatusOr<Object> HttpStore::UpdateControllerMetadata(const Object&) {
  return NotForClients("writing finalizers and owner references");
}

StatusOr<Object> HttpStore::PostWakeHint(const ObjectKey&) {
  return NotForClients("posting wake hints");
}

// options.audit is not sent: the server audits the write as its token's.
StatusOr<DeleteOutcome> HttpStore::Delete(const ObjectKey& key, const DeleteOptions&) {
  ASSIGN_OR_RETURN(std::string body, Call("DELETE", ObjectPath(key)));
  return apiwire::DecodeDeleteOutcome(body);
}

StatusOr<std::vector<Store::AuditRecord>> HttpStore::ListAudit(const AuditQuery& query) {
  const std::string q = apiwire::AuditQueryString(query);
  ASSIGN_OR_RETURN(std::string body,
                   Call("GET", std::string(kApiPrefix) + "/audit" + (q.empty() ? "" : "?" + q)));
  return apiwire::DecodeAudit(body);
}

Status HttpStore::AppendAudit(const AuditRecord&) { return NotForClients("writing the audit log"); }

StatusOr<std::vector<Store::Change>> HttpStore::WatchSince(int64_t since, int limit) {
  ASSIGN_OR_RETURN(std::string body,
                   Call("GET", std::string(kApiPrefix) + "/changes?resourceVersion=" +
                                   std::to_string(since) + "&limit=" + std::to_string(limit)));
  // One watch line per change.
  std::vector<Change> out;
  size_t start = 0;
  while (start < body.size()) {
    size_t nl = body.find('\n', start);
    if (nl == std::string::npos) {
      nl = body.size();
    }
    if (nl > start) {
      ASSIGN_OR_RETURN(Change change,
                       apiwire::DecodeWatchEvent(std::string_view(body).substr(start, nl - start)));
      if (change.object) {
        Remember(*change.object);
      }
      out.push_back(std::move(change));
    }
    start = nl + 1;
  }
  return out;
}

StatusOr<int64_t> HttpStore::CurrentRevision() {
  ASSIGN_OR_RETURN(std::string body, Call("GET", std::string(kApiPrefix) + "/revision"));
  return apiwire::DecodeRevision(body);
}

bool HttpStore::WaitForChange(std::chrono::milliseconds timeout) {
  std::optional<int64_t> since;
  {
    std::lock_guard lock(mu_);
    since = waited_revision_;
  }
  if (!since) {
    auto current = CurrentRevision();
    if (current.ok()) {
      std::lock_guard lock(mu_);
      waited_revision_ = *current;
    }
    return true;  // "may have changed": the caller reads once
  }
  const auto wait = std::clamp<std::chrono::milliseconds>(timeout, std::chrono::milliseconds(0),
                                                          std::chrono::milliseconds(30'000));
  auto body = Call("GET",
                   std::string(kApiPrefix) + "/changes?resourceVersion=" + std::to_string(*since) +
                       "&waitMs=" + std::to_string(wait.count()),
                   std::nullopt, wait + options_.timeout);
  if (!body.ok()) {
    return true;  // let the caller read, and see the error there
  }
  auto revision = apiwire::DecodeRevision(*body);
  if (!revision.ok()) {
    return true;
  }
  std::lock_guard lock(mu_);
  waited_revision_ = *revision;
  return *revision > *since;
}

StatusOr<int64_t> HttpStore::CompactChanges(int64_t) { return NotForClients("compaction"); }

Status HttpStore::RecordEvent(const Event&) { return NotForClients("recording events"); }

StatusOr<std::vector<Store::Event>> HttpStore::ListEvents(
    const std::optional<ObjectKey>& involved) {
  const std::string path =
      involved ? ObjectPath(*involved) + "/events" : std::string(kApiPrefix) + "/events";
  ASSIGN_OR_RETURN(std::string body, Call("GET", path));
  return apiwire::DecodeEvents(body);
}

StatusOr<int64_t> HttpStore::ExpireEvents(std::chrono::system_clock::time_point) {
  return NotForClients("expiring events");
}

Status HttpStore::PutInventory(const InventoryRecord&) {
  return NotForClients("writing the inventory");
}

StatusOr<std::optional<Store::InventoryRecord>> HttpStore::GetInventory(
    const std::string& workspace, const std::string& resource_type,
    const std::string& external_id) {
  ASSIGN_OR_RETURN(std::vector<InventoryRecord> records, ListInventory(workspace));
  for (InventoryRecord& r : records) {
    if (r.resource_type == resource_type && r.external_id == external_id) {
      return std::optional<InventoryRecord>(std::move(r));
    }
  }
  return std::optional<InventoryRecord>();
}

StatusOr<std::vector<Store::InventoryRecord>> HttpStore::ListInventory(
    const std::optional<std::string>& workspace) {
  ASSIGN_OR_RETURN(std::string body, Call("GET", std::string(kApiPrefix) + "/inventory"));
  ASSIGN_OR_RETURN(std::vector<InventoryRecord> records, apiwire::DecodeInventory(body));
  if (workspace) {
    std::erase_if(records, [&](const InventoryRecord& r) { return r.workspace != *workspace; });
  }
  return records;
}

Status HttpStore::DeleteInventory(const std::string&, const std::string&, const std::string&) {
  return NotForClients("writing the inventory");
}

StatusOr<std::optional<int64_t>> HttpStore::AcquireLease(const std::string&, const std::string&,
                                                         std::chrono::milliseconds) {
  return NotForClients("leases");
}

Status HttpStore::ReleaseLease(const std::string&, const std::string&) {
  return NotForClients("leases");
}

StatusOr<std::optional<Store::Lease>> HttpStore::GetLease(const std::string&) {
  return NotForClients("leases");
}

StatusOr<std::vector<Store::Lease>> HttpStore::ListLeases(const std::string&) {
  return NotForClients("leases");
}

StatusOr<int64_t> HttpStore::AppendTaskLog(const ObjectKey&, const std::string&,
                                           const std::vector<TaskLogEntry>&) {
  return NotForClients("writing task logs");
}

StatusOr<Store::TaskLogPage> HttpStore::ReadTaskLog(const std::string& task_uid, int64_t after_seq,
                                                    int limit) {
  auto key = TaskOf(task_uid);
  if (!key.ok()) {
    return TaskLogPage{};  // as the store: an unknown uid has an empty log
  }
  std::string path = ObjectPath(*key) + "/log?uid=" + PercentEncode(task_uid) +
                     "&afterSeq=" + std::to_string(after_seq);
  if (limit > 0) {
    path += "&limit=" + std::to_string(limit);
  }
  ASSIGN_OR_RETURN(std::string body, Call("GET", path));
  return apiwire::DecodeTaskLogPage(body);
}

Status HttpStore::PutArtifact(const ObjectKey&, const std::string&, const Artifact&) {
  return NotForClients("writing artifacts");
}

StatusOr<std::vector<Store::Artifact>> HttpStore::ListArtifacts(const std::string& task_uid) {
  auto key = TaskOf(task_uid);
  if (!key.ok()) {
    return std::vector<Artifact>{};
  }
  ASSIGN_OR_RETURN(std::string body,
                   Call("GET", ObjectPath(*key) + "/artifacts?uid=" + PercentEncode(task_uid)));
  return apiwire::DecodeArtifacts(body);
}

StatusOr<Store::Artifact> HttpStore::GetArtifact(const std::string& task_uid,
                                                 const std::string& path) {
  ASSIGN_OR_RETURN(ObjectKey key, TaskOf(task_uid));
  ASSIGN_OR_RETURN(std::string body,
                   Call("GET", ObjectPath(key) + "/artifacts?uid=" + PercentEncode(task_uid) +
                                   "&path=" + PercentEncode(path)));
  ASSIGN_OR_RETURN(std::vector<Artifact> artifacts, apiwire::DecodeArtifacts(body));
  if (artifacts.empty()) {
    return api::NotFoundError("artifact " + path + " not found");
  }
  return std::move(artifacts.front());
}

StatusOr<CommandResult> HttpStore::Exec(const ObjectKey& sandbox,
                                        const std::vector<std::string>& command,
                                        std::chrono::seconds timeout) {
  apiwire::ExecRequest request;
  request.command = command;
  request.timeout_seconds = timeout.count();
  ASSIGN_OR_RETURN(std::string body,
                   Call("POST", ObjectPath(sandbox) + "/exec", apiwire::ExecRequestJson(request),
                        timeout + options_.timeout));
  return apiwire::DecodeCommandResult(body);
}

Status HttpStore::ExecutorLog(const ObjectKey& worker, int tail_lines, bool follow,
                              const std::function<void(std::string_view)>& on_data,
                              std::stop_token stop) {
  http::HttpRequest request;
  request.method = "GET";
  request.url = options_.server + ObjectPath(worker) +
                "/log?tailLines=" + std::to_string(tail_lines) + (follow ? "&follow=true" : "");
  request.headers.emplace_back("Authorization", "Bearer " + options_.token);
  // A follow is silent while the executor writes nothing: allow a long silence.
  request.timeout = follow ? std::chrono::milliseconds(24LL * 3600 * 1000) : options_.timeout;
  http::StreamHandlers handlers;
  handlers.on_data = [&](std::string_view chunk) {
    on_data(chunk);
    return true;
  };
  http::HttpResult result = streaming_.Stream(request, handlers, stop);
  if (!result.status.ok()) {
    if (result.status.code() == api::StatusCode::kCancelled) {
      return api::OkStatus();  // the user stopped following
    }
    return api::UnavailableError("server " + options_.server + ": " + result.status.message());
  }
  if (result.response.status < 200 || result.response.status >= 300) {
    return apiwire::StatusFromReply(result.response.status, result.response.body);
  }
  return api::OkStatus();
}

}  // namespace sbx::controller::apiclient
