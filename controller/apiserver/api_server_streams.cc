// The long-lived requests of the API server: watches, task-log follows, the change log for
// HttpStore, and what is proxied to sandboxes (exec, the executor log). Each holds one of
// max_watches slots while it streams, and ends soon after its peer closes or the server stops.
#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/kinds.h"
#include "api/rfc3339.h"
#include "controller/apiserver/internal/api_server_impl.h"
#include "controller/apiserver/internal/line_scrubber.h"
#include "controller/apiserver/internal/request_helpers.h"
#include "controller/apiwire/api_wire.h"
#include "controller/cloud/executor_log.h"

namespace sbx::controller::apiserver {
namespace {

using Change = Store::Change;
using Ms = std::chrono::milliseconds;
using apiserver_internal::ErrorReply;
using apiserver_internal::JsonReply;
using apiserver_internal::kHubBatch;
using apiserver_internal::LineScrubber;
using apiserver_internal::Matches;
using apiserver_internal::ParseSelector;
using apiserver_internal::Query;
using apiserver_internal::QueryInt;
using apiserver_internal::QueryTrue;
// The wire format shared with the client (controller/apiwire).
using apiwire::CommandResultJson;
using apiwire::DecodeExecRequest;
using apiwire::RevisionJson;
using apiwire::TaskLogEntryJson;
using apiwire::TaskLogPageJson;
using apiwire::WatchErrorJson;
using apiwire::WatchEventJson;

constexpr Ms kWatchSlice{1000};              // how often a quiet watch checks its peer
constexpr int64_t kMaxTaskLogPage = 10'000;  // entries per task-log page

}  // namespace

void ApiServer::Impl::Changes(HttpExchange& x) {
  const HttpRequest& req = x.request();
  auto since = QueryInt(req, "resourceVersion", 0, INT64_MAX);
  auto limit = QueryInt(req, "limit", 1, kHubBatch);
  auto wait = QueryInt(req, "waitMs", 0, 30'000);
  if (!since.ok() || !limit.ok() || !wait.ok()) {
    x.Respond(
        ErrorReply(!since.ok() ? since.status() : (!limit.ok() ? limit.status() : wait.status())));
    return;
  }
  const int64_t from = since->value_or(0);
  if (wait->has_value()) {
    if (!TakeSlot(x)) {
      return;
    }
    WatchSlot slot(watches_);
    auto changes = hub_.Next(from, Ms(**wait));
    const int64_t last = hub_.last();
    x.Respond(JsonReply(200, RevisionJson(changes.ok() ? std::max(last, from) : from)));
    return;
  }
  auto changes = store_.WatchSince(from, static_cast<int>(limit->value_or(kHubBatch)));
  if (!changes.ok()) {
    x.Respond(ErrorReply(changes.status()));
    return;
  }
  std::string lines;
  for (const Change& c : *changes) {
    lines += WatchEventJson(c);
  }
  HttpResponse r;
  r.content_type = "application/json";
  r.body = std::move(lines);
  x.Respond(r);
}

bool ApiServer::Impl::TakeSlot(HttpExchange& x) {
  if (watches_.load() >= options_.max_watches) {
    x.Respond(ErrorReply(api::ResourceExhaustedError("too many watches and follows open (" +
                                                     std::to_string(options_.max_watches) + ")")));
    return false;
  }
  return true;
}

void ApiServer::Impl::Watch(HttpExchange& x, api::Kind kind, const std::optional<std::string>& ns) {
  const HttpRequest& req = x.request();
  auto selector = ParseSelector(Query(req, "labelSelector").value_or(""));
  if (!selector.ok()) {
    x.Respond(ErrorReply(selector.status()));
    return;
  }
  auto from = QueryInt(req, "resourceVersion", 0, INT64_MAX);
  auto timeout = QueryInt(req, "timeoutSeconds", 1, INT64_MAX);
  if (!from.ok() || !timeout.ok()) {
    x.Respond(ErrorReply(!from.ok() ? from.status() : timeout.status()));
    return;
  }
  if (!TakeSlot(x)) {
    return;
  }
  WatchSlot slot(watches_);
  const auto limit = std::min<std::chrono::seconds>(
      options_.max_watch, std::chrono::seconds(timeout->value_or(options_.max_watch.count())));
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::set<api::ObjectKey> known;  // keys this watcher was shown: their deletes pass a selector
  const auto wanted = [&](const api::ObjectKey& key, const api::Object* o) {
    if (key.kind != kind || (ns && key.namespace_ != *ns)) {
      return false;
    }
    if (o != nullptr) {
      if (Matches(*o, *selector)) {
        known.insert(key);
        return true;
      }
      // No longer matching: a watcher that saw it is told it left (as DELETED).
      return known.erase(key) > 0;
    }
    return known.erase(key) > 0 || selector->empty();
  };

  int64_t since = 0;
  std::string initial;
  if (from->has_value()) {
    since = **from;
    // Too old: say so before streaming (410, the Kubernetes "Expired").
    auto probe = store_.WatchSince(since, 1);
    if (!probe.ok()) {
      x.Respond(ErrorReply(probe.status().code() == api::StatusCode::kOutOfRange
                               ? api::Status(api::StatusCode::kOutOfRange,
                                             "too old resource version: " + std::to_string(since) +
                                                 " (compacted); list "
                                                 "again and watch from its resourceVersion")
                               : probe.status()));
      return;
    }
  } else {
    // No resourceVersion: the current objects as ADDED, then what changes after the list.
    auto rev = store_.CurrentRevision();
    ListOptions options;
    options.kind = kind;
    options.namespace_ = ns;
    auto objects = rev.ok() ? store_.List(options) : rev.status();
    if (!objects.ok()) {
      x.Respond(ErrorReply(objects.status()));
      return;
    }
    since = *rev;
    for (api::Object& o : *objects) {
      const api::ObjectKey key = api::KeyOf(o);
      if (wanted(key, &o)) {
        Change c;
        c.type = Store::ChangeType::kAdded;
        c.key = key;
        c.revision = o.metadata.resource_version;
        c.object = std::move(o);
        initial += WatchEventJson(c);
      }
    }
  }
  HttpResponse head;
  head.content_type = "application/json";
  head.headers.emplace_back("Cache-Control", "no-store");
  if (!x.StartStream(head) || !x.WriteChunk(initial)) {
    return;
  }
  while (!hub_.stopping() && std::chrono::steady_clock::now() < deadline) {
    auto changes = hub_.Next(since, kWatchSlice);
    if (!changes.ok()) {
      x.WriteChunk(WatchErrorJson(changes.status()));
      break;
    }
    std::string batch;
    for (const Change& c : *changes) {
      since = std::max(since, c.revision);
      if (!wanted(c.key, c.object ? &*c.object : nullptr)) {
        continue;
      }
      if (c.object && !Matches(*c.object, *selector)) {
        Change gone = c;  // it left the selection
        gone.type = Store::ChangeType::kDeleted;
        batch += WatchEventJson(gone);
      } else {
        batch += WatchEventJson(c);
      }
    }
    if (!batch.empty() && !x.WriteChunk(batch)) {
      return;
    }
    if (changes->empty() && x.PeerClosed()) {
      return;
    }
  }
  x.FinishStream();
}

void ApiServer::Impl::TaskLog(HttpExchange& x, const api::ObjectKey& key) {
  const HttpRequest& req = x.request();
  auto after = QueryInt(req, "afterSeq", 0, INT64_MAX);
  auto limit = QueryInt(req, "limit", 0, kMaxTaskLogPage);
  if (!after.ok() || !limit.ok()) {
    x.Respond(ErrorReply(!after.ok() ? after.status() : limit.status()));
    return;
  }
  auto task = store_.Get(key);
  if (!task.ok()) {
    x.Respond(ErrorReply(task.status()));
    return;
  }
  if (auto uid = Query(req, "uid"); uid && *uid != task->metadata.uid) {
    x.Respond(JsonReply(200, TaskLogPageJson({})));  // an earlier task of that name
    return;
  }
  int64_t seq = after->value_or(0);
  const int page_limit = static_cast<int>(limit->value_or(kMaxTaskLogPage));
  if (!QueryTrue(req, "follow")) {
    auto page = store_.ReadTaskLog(task->metadata.uid, seq, page_limit);
    x.Respond(page.ok() ? JsonReply(200, TaskLogPageJson(*page)) : ErrorReply(page.status()));
    return;
  }
  if (!TakeSlot(x)) {
    return;
  }
  WatchSlot slot(watches_);
  HttpResponse head;
  head.content_type = "application/json";
  if (!x.StartStream(head)) {
    return;
  }
  const std::string uid = task->metadata.uid;
  const auto deadline = std::chrono::steady_clock::now() + options_.max_watch;
  while (!hub_.stopping() && std::chrono::steady_clock::now() < deadline) {
    // The task before its log: once it is finished, the log read after it is complete.
    auto now = store_.Get(key);
    const bool finished =
        !now.ok() || now->metadata.uid != uid || api::IsFinished(now->agent_task_status().phase);
    auto page = store_.ReadTaskLog(uid, seq, kMaxTaskLogPage);
    if (!page.ok()) {
      x.WriteChunk(WatchErrorJson(page.status()));
      break;
    }
    std::string batch;
    for (const Store::TaskLogEntry& e : page->entries) {
      seq = std::max(seq, e.seq);
      batch += TaskLogEntryJson(e) + "\n";
    }
    if (!batch.empty() && !x.WriteChunk(batch)) {
      return;
    }
    if (finished && page->entries.empty()) {
      break;
    }
    if (page->entries.empty()) {
      if (x.PeerClosed()) {
        return;
      }
      static_cast<void>(hub_.Next(hub_.last(), Ms(500)));  // wakes on any object change
    }
  }
  x.FinishStream();
}

void ApiServer::Impl::Exec(HttpExchange& x, const Caller& caller, const api::ObjectKey& key) {
  if (commands_ == nullptr) {
    x.Respond(ErrorReply(api::UnimplementedError("this sbxd does not run commands")));
    return;
  }
  auto request = DecodeExecRequest(x.request().body);
  if (!request.ok()) {
    x.Respond(ErrorReply(request.status()));
    return;
  }
  if (request->timeout_seconds < 1 ||
      request->timeout_seconds > options_.max_exec_timeout.count()) {
    x.Respond(
        ErrorReply(api::InvalidArgumentError("timeoutSeconds must be between 1 and " +
                                             std::to_string(options_.max_exec_timeout.count()))));
    return;
  }
  auto sandbox = store_.Get(key);
  if (!sandbox.ok()) {
    x.Respond(ErrorReply(sandbox.status()));
    return;
  }
  // The sandbox sbx created, never the spec's sandboxId/workspaceRef (#24).
  auto created = api::CreatedSandbox(*sandbox);
  if (!created.ok()) {
    x.Respond(ErrorReply(created.status()));
    return;
  }
  CommandRequest command;
  command.cmd = request->command.front();
  command.args.assign(request->command.begin() + 1, request->command.end());
  command.timeout = std::chrono::seconds(request->timeout_seconds);
  // Only the program's name is recorded: arguments may hold anything.
  Audit(caller, key, "ExecByApi", "exec of \"" + command.cmd + "\"");
  auto result =
      commands_->Run(key.namespace_, created->workspace_ref, created->sandbox_id, command);
  AppendAudit(caller, "exec", key,
              result.ok() ? "ok" : std::string(api::StatusCodeName(result.status().code())));
  if (!result.ok()) {
    x.Respond(
        ErrorReply(api::Status(result.status().code(), "exec in sandbox " + created->sandbox_id +
                                                           ": " + result.status().message())));
    return;
  }
  x.Respond(JsonReply(200, CommandResultJson(*result)));
}

void ApiServer::Impl::ExecutorLog(HttpExchange& x, const api::ObjectKey& key) {
  if (commands_ == nullptr) {
    x.Respond(ErrorReply(api::UnimplementedError("this sbxd does not read sandboxes")));
    return;
  }
  auto tail = QueryInt(x.request(), "tailLines", -1, 1'000'000);
  if (!tail.ok()) {
    x.Respond(ErrorReply(tail.status()));
    return;
  }
  auto worker = store_.Get(key);
  if (!worker.ok()) {
    x.Respond(ErrorReply(worker.status()));
    return;
  }
  const api::AgentWorkerSpec& spec = worker->agent_worker_spec();
  const api::ObjectKey sandbox_key{api::Kind::kSandbox, key.namespace_,
                                   spec.sandbox ? key.name : spec.sandbox_ref};
  auto sandbox = store_.Get(sandbox_key);
  if (!sandbox.ok()) {
    x.Respond(ErrorReply(sandbox.status()));
    return;
  }
  const std::string& state = sandbox->sandbox_status().state;
  if (state != "RUNNING") {
    x.Respond(ErrorReply(api::FailedPreconditionError(
        "sandbox " + sandbox_key.name + " of agentworker/" + key.name + " is not running (state " +
        (state.empty() ? "unknown" : state) +
        "); the executor log can only be read from a running sandbox")));
    return;
  }
  auto created = api::CreatedSandbox(*sandbox);
  if (!created.ok()) {
    x.Respond(ErrorReply(created.status()));
    return;
  }
  const ExecutorLogTarget target{key.namespace_, created->workspace_ref, created->sandbox_id,
                                 key.name};
  auto first = ReadExecutorLogTail(*commands_, target, static_cast<int>(tail->value_or(-1)),
                                   options_.max_log_bytes);
  if (!first.ok()) {
    x.Respond(ErrorReply(api::Status(first.status().code(), "logs of agentworker/" + key.name +
                                                                " in sandbox " + target.sandbox_id +
                                                                ": " + first.status().message())));
    return;
  }
  // Scrubbed a whole line at a time, so that a key cut by a read boundary is still found.
  LineScrubber scrubber(options_.scrub_log);
  if (!QueryTrue(x.request(), "follow")) {
    HttpResponse r;
    r.content_type = "text/plain; charset=utf-8";
    r.body = scrubber.Add(first->bytes) + scrubber.Flush();
    x.Respond(r);
    return;
  }
  if (!TakeSlot(x)) {
    return;
  }
  WatchSlot slot(watches_);
  HttpResponse head;
  head.content_type = "text/plain; charset=utf-8";
  // An empty chunk would end the stream: only text is written.
  const auto send = [&x](const std::string& text) { return text.empty() || x.WriteChunk(text); };
  if (!x.StartStream(head) || !send(scrubber.Add(first->bytes))) {
    return;
  }
  size_t offset = first->size;
  std::string inode = first->inode;
  const auto deadline = std::chrono::steady_clock::now() + options_.max_watch;
  while (!hub_.stopping() && std::chrono::steady_clock::now() < deadline) {
    // Sleep in slices so a closed peer or a stopping server ends the follow soon.
    const auto until = std::chrono::steady_clock::now() + options_.log_poll;
    while (!hub_.stopping() && std::chrono::steady_clock::now() < until) {
      if (x.PeerClosed()) {
        return;
      }
      std::unique_lock lock(sleep_mu_);
      sleep_cv_.wait_for(lock, Ms(100));
    }
    auto next = ReadExecutorLogFrom(*commands_, target, offset, inode, options_.max_log_bytes);
    if (!next.ok()) {
      continue;  // the sandbox may be restarting: keep following
    }
    if (next->inode != inode || next->size < offset) {
      offset = 0;
      inode = next->inode;
    }
    offset += next->bytes.size();
    if (!send(scrubber.Add(next->bytes))) {
      return;
    }
  }
  (void)send(scrubber.Flush());
  x.FinishStream();
}

}  // namespace sbx::controller::apiserver
