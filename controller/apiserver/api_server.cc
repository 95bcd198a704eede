#include "controller/apiserver/api_server.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/kinds.h"
#include "api/manifest_check.h"
#include "api/rfc3339.h"
#include "controller/apiserver/internal/api_server_impl.h"
#include "controller/apiserver/internal/request_helpers.h"
#include "controller/apiwire/api_wire.h"

namespace sbx::controller::apiserver {
namespace {

using apiserver_internal::ErrorReply;
using apiserver_internal::JsonReply;
using apiserver_internal::ParseSelector;
using apiserver_internal::Query;
using apiserver_internal::QueryTrue;
// The wire format shared with the client (controller/apiwire).
using apiwire::ApplyResultsJson;
using apiwire::ArtifactsJson;
using apiwire::DecodeApplyRequest;
using apiwire::DeleteOutcomeJson;
using apiwire::EventsJson;
using apiwire::InventoryJson;
using apiwire::kApiPrefix;
using apiwire::KindOfPlural;
using apiwire::ListJson;
using apiwire::ManifestFile;
using apiwire::RevisionJson;

}  // namespace

void ApiServer::Impl::Handle(HttpExchange& x) {
  const HttpRequest& req = x.request();
  // /apis/sbx.dev/v1alpha1/...
  const auto& seg = req.segments;
  if (seg.size() < 3 || seg[0] != "apis" || seg[1] != "sbx.dev" || seg[2] != "v1alpha1") {
    x.Respond(ErrorReply(
        api::NotFoundError("no such path (the API is under " + std::string(kApiPrefix) + ")")));
    return;
  }
  const std::optional<Caller> caller = Authenticate(req);
  if (!caller) {
    x.Respond(Unauthenticated());
    return;
  }
  const std::vector<std::string> rest(seg.begin() + 3, seg.end());
  Route(x, *caller, rest);
}

HttpResponse ApiServer::Impl::Unauthenticated() {
  HttpResponse r = ErrorReply(api::UnauthenticatedError(
      "a bearer token is required (Authorization: Bearer TOKEN), and this one is not known"));
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"sbx\"");
  return r;
}

std::optional<Caller> ApiServer::Impl::Authenticate(const HttpRequest& req) const {
  const std::string header = req.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0) {
    return std::nullopt;
  }
  return tokens_.Authenticate(std::string_view(header).substr(kBearer.size()));
}

bool ApiServer::Impl::Allowed(HttpExchange& x, const Caller& caller, Role needed,
                              std::string_view verb, const std::vector<api::ObjectKey>& keys) {
  if (caller.role >= needed) {
    return true;
  }
  const api::Status denied = api::PermissionDeniedError(
      "token \"" + caller.name + "\" (" + std::string(RoleName(caller.role)) + ") may not " +
      std::string(verb) + "; that needs the " + std::string(RoleName(needed)) + " role");
  for (const api::ObjectKey& key : keys) {
    AppendAudit(caller, std::string(verb), key, std::string(api::StatusCodeName(denied.code())));
  }
  x.Respond(ErrorReply(denied));
  return false;
}

void ApiServer::Impl::Route(HttpExchange& x, const Caller& caller,
                            const std::vector<std::string>& rest) {
  const std::string& method = x.request().method;
  const auto bad_method = [&] {
    x.Respond(ErrorReply(api::UnimplementedError("method " + method + " is not allowed here")));
  };
  if (rest.size() == 1 && rest[0] == "apply") {
    if (method != "POST") {
      return bad_method();
    }
    Apply(x, caller);  // checks the role itself, to audit a refusal with the objects named
    return;
  }
  if (rest.size() == 1 && rest[0] == "audit") {
    if (method != "GET") {
      return bad_method();
    }
    if (Allowed(x, caller, Role::kAdmin, "read the audit log")) {
      AuditLog(x);
    }
    return;
  }
  if (rest.size() == 1 && rest[0] == "changes") {
    if (method != "GET") {
      return bad_method();
    }
    Changes(x);
    return;
  }
  if (rest.size() == 1 &&
      (rest[0] == "revision" || rest[0] == "events" || rest[0] == "inventory")) {
    if (method != "GET") {
      return bad_method();
    }
    if (rest[0] == "revision") {
      auto rev = store_.CurrentRevision();
      x.Respond(rev.ok() ? JsonReply(200, RevisionJson(*rev)) : ErrorReply(rev.status()));
    } else if (rest[0] == "events") {
      Events(x, std::nullopt);
    } else {
      auto records = store_.ListInventory(std::nullopt);
      x.Respond(records.ok() ? JsonReply(200, InventoryJson(*records))
                             : ErrorReply(records.status()));
    }
    return;
  }
  // {plural} | namespaces/{ns}/{plural}[/{name}[/{sub}]]
  std::optional<std::string> ns;
  size_t i = 0;
  if (rest.size() >= 3 && rest[0] == "namespaces") {
    ns = rest[1];
    i = 2;
  }
  if (i >= rest.size()) {
    x.Respond(ErrorReply(api::NotFoundError("no such path")));
    return;
  }
  const std::optional<api::Kind> kind = KindOfPlural(rest[i]);
  if (!kind) {
    x.Respond(ErrorReply(
        api::NotFoundError("unknown resource \"" + rest[i] + "\" (" + api::PluralList() + ")")));
    return;
  }
  if (i + 1 == rest.size()) {
    if (method != "GET") {
      return bad_method();
    }
    if (QueryTrue(x.request(), "watch")) {
      Watch(x, *kind, ns);
    } else {
      List(x, *kind, ns);
    }
    return;
  }
  if (!ns) {
    x.Respond(ErrorReply(api::NotFoundError("objects are under namespaces/{ns}/")));
    return;
  }
  const api::ObjectKey key{*kind, *ns, rest[i + 1]};
  if (i + 2 == rest.size()) {
    if (method == "GET") {
      auto o = store_.Get(key);
      x.Respond(o.ok() ? JsonReply(200, api::EncodeObjectJson(*o, false)) : ErrorReply(o.status()));
    } else if (method == "DELETE") {
      if (Allowed(x, caller, Role::kEditor, "delete", {key})) {
        Delete(x, caller, key);
      }
    } else {
      bad_method();
    }
    return;
  }
  if (i + 3 != rest.size()) {
    x.Respond(ErrorReply(api::NotFoundError("no such path")));
    return;
  }
  const std::string& sub = rest[i + 2];
  if (sub == "events" && method == "GET") {
    Events(x, key);
  } else if (sub == "log" && method == "GET" && *kind == api::Kind::kAgentTask) {
    TaskLog(x, key);
  } else if (sub == "artifacts" && method == "GET" && *kind == api::Kind::kAgentTask) {
    Artifacts(x, key);
  } else if (sub == "cancel" && method == "POST" && *kind == api::Kind::kAgentTask) {
    if (Allowed(x, caller, Role::kEditor, "cancel", {key})) {
      Cancel(x, caller, key);
    }
  } else if (sub == "log" && method == "GET" && *kind == api::Kind::kAgentWorker) {
    ExecutorLog(x, key);
  } else if (sub == "exec" && method == "POST" && *kind == api::Kind::kSandbox) {
    if (Allowed(x, caller, Role::kAdmin, "exec", {key})) {
      Exec(x, caller, key);
    }
  } else {
    x.Respond(ErrorReply(api::NotFoundError("no such path")));
  }
}

void ApiServer::Impl::List(HttpExchange& x, api::Kind kind, const std::optional<std::string>& ns) {
  auto selector = ParseSelector(Query(x.request(), "labelSelector").value_or(""));
  if (!selector.ok()) {
    x.Respond(ErrorReply(selector.status()));
    return;
  }
  // The revision before the read: a watch from it misses nothing written after the list.
  auto rev = store_.CurrentRevision();
  if (!rev.ok()) {
    x.Respond(ErrorReply(rev.status()));
    return;
  }
  ListOptions options;
  options.kind = kind;
  options.namespace_ = ns;
  options.label_selector = *selector;
  auto objects = store_.List(options);
  if (!objects.ok()) {
    x.Respond(ErrorReply(objects.status()));
    return;
  }
  x.Respond(JsonReply(200, ListJson(kind, *objects, *rev)));
}

void ApiServer::Impl::Events(HttpExchange& x, const std::optional<api::ObjectKey>& key) {
  auto events = store_.ListEvents(key);
  if (!events.ok()) {
    x.Respond(ErrorReply(events.status()));
    return;
  }
  if (!key) {
    if (auto ns = Query(x.request(), "namespace")) {
      std::erase_if(*events, [&](const Store::Event& e) { return e.involved.namespace_ != *ns; });
    }
  }
  x.Respond(JsonReply(200, EventsJson(*events)));
}

void ApiServer::Impl::Artifacts(HttpExchange& x, const api::ObjectKey& key) {
  auto task = store_.Get(key);
  if (!task.ok()) {
    x.Respond(ErrorReply(task.status()));
    return;
  }
  if (auto uid = Query(x.request(), "uid"); uid && *uid != task->metadata.uid) {
    // Asked for an earlier task of that name: it is gone, and so are its artifacts.
    if (Query(x.request(), "path")) {
      x.Respond(ErrorReply(api::NotFoundError("artifact not found")));
    } else {
      x.Respond(JsonReply(200, ArtifactsJson({})));
    }
    return;
  }
  if (auto path = Query(x.request(), "path")) {
    auto artifact = store_.GetArtifact(task->metadata.uid, *path);
    x.Respond(artifact.ok() ? JsonReply(200, ArtifactsJson({*artifact}))
                            : ErrorReply(artifact.status()));
    return;
  }
  auto list = store_.ListArtifacts(task->metadata.uid);
  x.Respond(list.ok() ? JsonReply(200, ArtifactsJson(*list)) : ErrorReply(list.status()));
}

void ApiServer::Impl::Audit(const Caller& caller, const api::ObjectKey& key, std::string reason,
                            const std::string& what) {
  Store::Event event;
  event.involved = key;
  event.reason = std::move(reason);
  event.message = what + " by \"" + caller.name + "\" (" + std::string(RoleName(caller.role)) +
                  ") through the API";
  const std::string now = api::FormatRfc3339(clock_.Now());
  event.first_seen = now;
  event.last_seen = now;
  // The write happened; its record is best effort.
  static_cast<void>(store_.RecordEvent(event));
}

WriteAudit ApiServer::Impl::WriteBy(const Caller& caller, std::string verb) {
  return {caller.name, std::string(RoleName(caller.role)), std::move(verb), "api"};
}

void ApiServer::Impl::AppendAudit(const Caller& caller, std::string verb, const api::ObjectKey& key,
                                  std::string result) {
  // What it records already happened (or was refused); its record is best effort.
  static_cast<void>(
      store_.AppendAudit(AuditOf(WriteBy(caller, std::move(verb)), key, std::move(result))));
}

void ApiServer::Impl::AuditLog(HttpExchange& x) {
  auto query = apiwire::ParseAuditQuery(
      [&](std::string_view name) { return Query(x.request(), std::string(name)); });
  if (!query.ok()) {
    x.Respond(ErrorReply(query.status()));
    return;
  }
  auto records = store_.ListAudit(*query);
  x.Respond(records.ok() ? JsonReply(200, apiwire::AuditJson(*records))
                         : ErrorReply(records.status()));
}

void ApiServer::Impl::Apply(HttpExchange& x, const Caller& caller) {
  auto request = DecodeApplyRequest(x.request().body);
  if (caller.role < Role::kEditor) {
    // Refused before anything else is checked (Kubernetes authorizes before it decodes); the
    // objects the request names, as far as their text decodes, are audited as refused.
    std::vector<api::ObjectKey> named;
    if (request.ok()) {
      std::vector<api::Manifest> manifests;
      std::vector<std::string> errors;
      for (const ManifestFile& f : request->manifests) {
        api::DecodeManifestText(f.content, f.file, manifests, errors);
      }
      named.reserve(manifests.size());
      for (const api::Manifest& m : manifests) {
        named.push_back(api::KeyOf(m.object));
      }
    }
    Allowed(x, caller, Role::kEditor, "apply", named);
    return;
  }
  if (!request.ok()) {
    x.Respond(ErrorReply(request.status()));
    return;
  }
  ApplyOptions& options = request->options;
  options.audit = WriteBy(caller, "apply");
  if (options.prune && options.applyset.empty()) {
    x.Respond(ErrorReply(api::InvalidArgumentError("prune requires an applyset")));
    return;
  }
  // The CLI's path: decode every text, then default, validate and refuse duplicates, every
  // error placed at file:line:col. Nothing is written unless all of it is good.
  std::vector<api::Manifest> manifests;
  std::vector<std::string> errors;
  std::vector<std::optional<int64_t>> versions;
  for (const ManifestFile& f : request->manifests) {
    const size_t before = manifests.size();
    api::DecodeManifestText(f.content, f.file, manifests, errors);
    for (size_t i = before; i < manifests.size(); ++i) {
      versions.push_back(f.resource_version);
    }
  }
  api::ManifestCheckOptions check;
  check.validation = options_.validation;
  api::CheckManifests(manifests, check, errors);
  if (!errors.empty()) {
    std::string message;
    for (const std::string& line : errors) {
      message += (message.empty() ? "" : "\n") + line;
    }
    x.Respond(ErrorReply(api::InvalidArgumentError(message)));
    return;
  }
  if (manifests.empty() && !options.prune) {
    x.Respond(ErrorReply(api::InvalidArgumentError("no objects passed to apply")));
    return;
  }
  std::vector<api::Object> objects;
  objects.reserve(manifests.size());
  for (size_t i = 0; i < manifests.size(); ++i) {
    api::Object o = std::move(manifests[i].object);
    if (options.require_resource_version) {
      if (!versions[i]) {
        x.Respond(ErrorReply(api::InvalidArgumentError(
            manifests[i].file + ": requireResourceVersion needs its resourceVersion")));
        return;
      }
      o.metadata.resource_version = *versions[i];
    }
    objects.push_back(std::move(o));
  }
  auto results = store_.Apply(objects, options);
  if (!results.ok()) {
    x.Respond(ErrorReply(results.status()));
    return;
  }
  if (!options.dry_run) {
    for (const ApplyResult& r : *results) {
      if (r.action == ApplyAction::kCreated) {
        Audit(caller, r.key, "AppliedByApi", "created");
      } else if (r.action == ApplyAction::kConfigured) {
        Audit(caller, r.key, "AppliedByApi", "configured");
      } else if (r.action == ApplyAction::kPruned) {
        Audit(caller, r.key, "PrunedByApi", "pruned from applyset \"" + options.applyset + "\"");
      }
    }
  }
  x.Respond(JsonReply(200, ApplyResultsJson(*results)));
}

void ApiServer::Impl::Delete(HttpExchange& x, const Caller& caller, const api::ObjectKey& key) {
  auto outcome = store_.Delete(key, {WriteBy(caller, "delete")});
  if (!outcome.ok()) {
    x.Respond(ErrorReply(outcome.status()));
    return;
  }
  Audit(caller, key, "DeletedByApi", "deleted");
  x.Respond(JsonReply(200, DeleteOutcomeJson(*outcome)));
}

void ApiServer::Impl::Cancel(HttpExchange& x, const Caller& caller, const api::ObjectKey& key) {
  const std::string now = api::FormatRfc3339(clock_.Now());
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto task = store_.Get(key);
    if (!task.ok()) {
      x.Respond(ErrorReply(task.status()));
      return;
    }
    const api::TaskPhase phase = task->agent_task_status().phase;
    if (api::IsFinished(phase)) {
      x.Respond(JsonReply(200, "{\"status\":\"AlreadyFinished\",\"phase\":\"" +
                                   std::string(api::TaskPhaseName(phase)) + "\"}"));
      return;
    }
    task->metadata.annotations.try_emplace(std::string(api::kCancelRequestedAnnotation), now);
    ApplyOptions options;
    options.require_resource_version = true;
    options.audit = WriteBy(caller, "cancel");
    auto written = store_.Apply({*task}, options);
    if (written.ok()) {
      Audit(caller, key, "CancelRequestedByApi", "cancel requested");
      x.Respond(JsonReply(200, "{\"status\":\"CancelRequested\"}"));
      return;
    }
    if (written.status().code() != api::StatusCode::kAborted) {
      x.Respond(ErrorReply(written.status()));
      return;
    }
  }
  x.Respond(ErrorReply(api::AbortedError("the task kept changing; try again")));
}

ApiServer::ApiServer(Store& store, Store& watch_store, const TokenTable& tokens,
                     SandboxCommands* commands, Clock& clock, ApiServerOptions options)
    : impl_(std::make_unique<Impl>(store, watch_store, tokens, commands, clock,
                                   std::move(options))) {}
ApiServer::~ApiServer() { Stop(); }
api::Status ApiServer::Start() { return impl_->Start(); }
void ApiServer::Stop() { impl_->Stop(); }
void ApiServer::Handle(HttpExchange& exchange) { impl_->Handle(exchange); }
std::optional<HttpResponse> ApiServer::CheckHead(const HttpRequest& head) const {
  return impl_->CheckHead(head);
}
size_t ApiServer::active_watches() const { return impl_->active_watches(); }

}  // namespace sbx::controller::apiserver
