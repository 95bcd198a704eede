#include "controller/apiserver/api_server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "api/codec.h"
#include "api/kinds.h"
#include "api/manifest_check.h"
#include "api/rfc3339.h"
#include "controller/apiwire/api_wire.h"
#include "controller/cloud/executor_log.h"

namespace sbx::controller::apiserver {
namespace {

using Change = Store::Change;
using Ms = std::chrono::milliseconds;
// The wire format shared with the client (controller/apiwire).
using apiwire::ApplyResultsJson;
using apiwire::ArtifactsJson;
using apiwire::CommandResultJson;
using apiwire::DecodeApplyRequest;
using apiwire::DecodeExecRequest;
using apiwire::DeleteOutcomeJson;
using apiwire::EventsJson;
using apiwire::HttpStatusOf;
using apiwire::InventoryJson;
using apiwire::kApiPrefix;
using apiwire::KindOfPlural;
using apiwire::ListJson;
using apiwire::ManifestFile;
using apiwire::RevisionJson;
using apiwire::StatusJson;
using apiwire::TaskLogEntryJson;
using apiwire::TaskLogPageJson;
using apiwire::WatchErrorJson;
using apiwire::WatchEventJson;

constexpr size_t kMaxRing = 20'000;          // changes the hub keeps for watchers
constexpr int kHubBatch = 1000;              // changes read per store call
constexpr Ms kHubPoll{200};                  // WaitForChange slice of the hub
constexpr Ms kWatchSlice{1000};              // how often a quiet watch checks its peer
constexpr int64_t kMaxTaskLogPage = 10'000;  // entries per task-log page

HttpResponse JsonReply(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse ErrorReply(const api::Status& status) {
  return JsonReply(HttpStatusOf(status.code()), StatusJson(status));
}

std::optional<std::string> Query(const HttpRequest& request, const std::string& name) {
  auto it = request.query.find(name);
  if (it == request.query.end()) {
    return std::nullopt;
  }
  return it->second;
}

bool QueryTrue(const HttpRequest& request, const std::string& name) {
  auto v = Query(request, name);
  return v && (*v == "true" || *v == "1" || *v == "All");
}

api::StatusOr<std::optional<int64_t>> QueryInt(const HttpRequest& request, const std::string& name,
                                               int64_t min, int64_t max) {
  auto v = Query(request, name);
  if (!v || v->empty()) {
    return std::optional<int64_t>();
  }
  if (v->size() > 18 || v->find_first_not_of("-0123456789") != std::string::npos) {
    return api::InvalidArgumentError("query parameter " + name + ": not a number");
  }
  int64_t n = 0;
  try {
    n = std::stoll(*v);
  } catch (const std::exception&) {
    return api::InvalidArgumentError("query parameter " + name + ": not a number");
  }
  if (n < min || n > max) {
    return api::InvalidArgumentError("query parameter " + name + ": must be between " +
                                     std::to_string(min) + " and " + std::to_string(max));
  }
  return std::optional<int64_t>(n);
}

api::StatusOr<std::map<std::string, std::string>> ParseSelector(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) {
      comma = text.size();
    }
    const std::string_view term = text.substr(start, comma - start);
    start = comma + 1;
    if (term.empty()) {
      continue;
    }
    const size_t eq = term.find('=');
    if (eq == std::string_view::npos || eq == 0 || term.find("!=") != std::string_view::npos) {
      return api::InvalidArgumentError("labelSelector \"" + std::string(term) +
                                       "\": only key=value terms are supported");
    }
    std::string_view value = term.substr(eq + 1);
    if (!value.empty() && value.front() == '=') {
      value.remove_prefix(1);
    }
    out[std::string(term.substr(0, eq))] = std::string(value);
  }
  return out;
}

bool Matches(const api::Object& o, const std::map<std::string, std::string>& selector) {
  for (const auto& [k, v] : selector) {
    auto it = o.metadata.labels.find(k);
    if (it == o.metadata.labels.end() || it->second != v) {
      return false;
    }
  }
  return true;
}

// One change log fan-out: a reader thread appends every change to a bounded ring and wakes
// the watchers, who take what is newer than their position.
class WatchHub {
 public:
  explicit WatchHub(Store& store) : store_(store) {}

  api::Status Start() {
    ASSIGN_OR_RETURN(const int64_t current, store_.CurrentRevision());
    {
      std::lock_guard lock(mu_);
      floor_ = current;
      last_ = current;
    }
    thread_ = std::jthread([this](std::stop_token stop) { Run(stop); });
    return api::OkStatus();
  }

  void Stop() {
    stopping_ = true;
    thread_.request_stop();
    cv_.notify_all();
    if (thread_.joinable()) {
      thread_.join();
    }
    cv_.notify_all();
  }

  bool stopping() const { return stopping_.load(); }

  int64_t last() {
    std::lock_guard lock(mu_);
    return last_;
  }

  // Changes with revision > since, waiting up to `wait` for one. From the store itself when
  // `since` is older than the ring (kOutOfRange there when compacted away).
  api::StatusOr<std::vector<Change>> Next(int64_t since, Ms wait) {
    std::unique_lock lock(mu_);
    if (since < floor_) {
      lock.unlock();
      return catchup_store_ ? catchup_store_->WatchSince(since, kHubBatch)
                            : store_.WatchSince(since, kHubBatch);
    }
    cv_.wait_for(lock, wait, [&] { return stopping_.load() || last_ > since; });
    std::vector<Change> out;
    // The ring is in revision order: skip to the first change after `since`.
    auto it = std::upper_bound(ring_.begin(), ring_.end(), since,
                               [](int64_t rev, const Change& c) { return rev < c.revision; });
    for (; it != ring_.end() && out.size() < static_cast<size_t>(kHubBatch); ++it) {
      out.push_back(*it);
    }
    return out;
  }

  // Catch-up reads for watchers behind the ring go to this store (the request store), not to
  // the hub's own connection.
  void set_catchup_store(Store* store) { catchup_store_ = store; }

 private:
  void Run(std::stop_token stop) {
    int idle = 0;
    while (!stop.stop_requested()) {
      const bool changed = store_.WaitForChange(kHubPoll);
      if (!changed && ++idle < 10) {
        continue;  // still read every ~2 s, in case a change notice was missed
      }
      idle = 0;
      for (;;) {
        int64_t from = 0;
        {
          std::lock_guard lock(mu_);
          from = last_;
        }
        auto changes = store_.WatchSince(from, kHubBatch);
        if (!changes.ok()) {
          if (changes.status().code() == api::StatusCode::kOutOfRange) {
            // Compacted past the hub (it fell far behind): start over from now; watchers
            // behind the new floor get their 410 from the store.
            auto current = store_.CurrentRevision();
            std::lock_guard lock(mu_);
            if (current.ok()) {
              ring_.clear();
              floor_ = *current;
              last_ = *current;
            }
          }
          break;
        }
        if (changes->empty()) {
          break;
        }
        {
          std::lock_guard lock(mu_);
          for (Change& c : *changes) {
            last_ = std::max(last_, c.revision);
            ring_.push_back(std::move(c));
          }
          while (ring_.size() > kMaxRing) {
            floor_ = ring_.front().revision;
            ring_.pop_front();
          }
        }
        cv_.notify_all();
        if (changes->size() < static_cast<size_t>(kHubBatch)) {
          break;
        }
      }
    }
  }

  Store& store_;
  Store* catchup_store_ = nullptr;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Change> ring_;  // Guarded by mu_. Revisions (floor_, last_].
  int64_t floor_ = 0;        // Guarded by mu_.
  int64_t last_ = 0;         // Guarded by mu_.
  std::jthread thread_;
};

// Passes text through a scrub function a whole line at a time: a secret split across two reads
// is complete (and found) once its line is. A line longer than kMaxHeld goes as it is so far.
class LineScrubber {
 public:
  explicit LineScrubber(const std::function<std::string(std::string_view)>& scrub)
      : scrub_(scrub) {}
  // What can be released of `bytes` (and of what was held before), scrubbed.
  std::string Add(std::string_view bytes) {
    held_.append(bytes);
    size_t end = held_.rfind('\n');
    if (end == std::string::npos) {
      if (held_.size() < kMaxHeld) {
        return "";
      }
      end = held_.size() - 1;
    }
    std::string out = Scrub(std::string_view(held_).substr(0, end + 1));
    held_.erase(0, end + 1);
    return out;
  }
  // The rest, scrubbed.
  std::string Flush() {
    std::string out = Scrub(held_);
    held_.clear();
    return out;
  }

 private:
  static constexpr size_t kMaxHeld = size_t{64} * 1024;
  std::string Scrub(std::string_view text) const {
    return scrub_ ? scrub_(text) : std::string(text);
  }
  const std::function<std::string(std::string_view)>& scrub_;
  std::string held_;
};

}  // namespace

class ApiServer::Impl {
 public:
  Impl(Store& store, Store& watch_store, const TokenTable& tokens, SandboxCommands* commands,
       Clock& clock, ApiServerOptions options)
      : store_(store),
        tokens_(tokens),
        commands_(commands),
        clock_(clock),
        options_(std::move(options)),
        hub_(watch_store) {
    hub_.set_catchup_store(&store_);
  }

  api::Status Start() {
    if (started_) {
      return api::FailedPreconditionError("ApiServer already started");
    }
    started_ = true;
    return hub_.Start();
  }

  void Stop() {
    if (!started_ || stopped_.exchange(true)) {
      return;
    }
    hub_.Stop();
  }

  size_t active_watches() const { return watches_.load(); }

  std::optional<HttpResponse> CheckHead(const HttpRequest& head) const {
    if (Authenticate(head)) {
      return std::nullopt;
    }
    return Unauthenticated();
  }

  void Handle(HttpExchange& x) {
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

 private:
  static HttpResponse Unauthenticated() {
    HttpResponse r = ErrorReply(api::UnauthenticatedError(
        "a bearer token is required (Authorization: Bearer TOKEN), and this one is not known"));
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"sbx\"");
    return r;
  }

  std::optional<Caller> Authenticate(const HttpRequest& req) const {
    const std::string header = req.Header("authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0) {
      return std::nullopt;
    }
    return tokens_.Authenticate(std::string_view(header).substr(kBearer.size()));
  }

  static bool Allowed(HttpExchange& x, const Caller& caller, Role needed, std::string_view what) {
    if (caller.role >= needed) {
      return true;
    }
    x.Respond(ErrorReply(api::PermissionDeniedError(
        "token \"" + caller.name + "\" (" + std::string(RoleName(caller.role)) + ") may not " +
        std::string(what) + "; that needs the " + std::string(RoleName(needed)) + " role")));
    return false;
  }

  void Route(HttpExchange& x, const Caller& caller, const std::vector<std::string>& rest) {
    const std::string& method = x.request().method;
    const auto bad_method = [&] {
      x.Respond(ErrorReply(api::UnimplementedError("method " + method + " is not allowed here")));
    };
    if (rest.size() == 1 && rest[0] == "apply") {
      if (method != "POST") {
        return bad_method();
      }
      if (Allowed(x, caller, Role::kEditor, "apply")) {
        Apply(x, caller);
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
        x.Respond(o.ok() ? JsonReply(200, api::EncodeObjectJson(*o, false))
                         : ErrorReply(o.status()));
      } else if (method == "DELETE") {
        if (Allowed(x, caller, Role::kEditor, "delete")) {
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
      if (Allowed(x, caller, Role::kEditor, "cancel")) {
        Cancel(x, caller, key);
      }
    } else if (sub == "log" && method == "GET" && *kind == api::Kind::kAgentWorker) {
      ExecutorLog(x, key);
    } else if (sub == "exec" && method == "POST" && *kind == api::Kind::kSandbox) {
      if (Allowed(x, caller, Role::kAdmin, "exec")) {
        Exec(x, caller, key);
      }
    } else {
      x.Respond(ErrorReply(api::NotFoundError("no such path")));
    }
  }

  // ---- reads --------------------------------------------------------------------------------

  void List(HttpExchange& x, api::Kind kind, const std::optional<std::string>& ns) {
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

  // The change log of every kind, for HttpStore: ?resourceVersion=N&limit=L → the changes after
  // N as watch lines (410 when compacted); with ?waitMs=T instead, waits up to T for a change
  // after N and answers the current revision.
  void Changes(HttpExchange& x) {
    const HttpRequest& req = x.request();
    auto since = QueryInt(req, "resourceVersion", 0, INT64_MAX);
    auto limit = QueryInt(req, "limit", 1, kHubBatch);
    auto wait = QueryInt(req, "waitMs", 0, 30'000);
    if (!since.ok() || !limit.ok() || !wait.ok()) {
      x.Respond(ErrorReply(!since.ok() ? since.status()
                                       : (!limit.ok() ? limit.status() : wait.status())));
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

  void Events(HttpExchange& x, const std::optional<api::ObjectKey>& key) {
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

  // A slot among max_watches, or a 429 answered.
  class WatchSlot {
   public:
    explicit WatchSlot(std::atomic<size_t>& n) : n_(n) { ++n_; }
    ~WatchSlot() { --n_; }
    WatchSlot(const WatchSlot&) = delete;
    WatchSlot& operator=(const WatchSlot&) = delete;

   private:
    std::atomic<size_t>& n_;
  };
  bool TakeSlot(HttpExchange& x) {
    if (watches_.load() >= options_.max_watches) {
      x.Respond(ErrorReply(api::ResourceExhaustedError(
          "too many watches and follows open (" + std::to_string(options_.max_watches) + ")")));
      return false;
    }
    return true;
  }

  void Watch(HttpExchange& x, api::Kind kind, const std::optional<std::string>& ns) {
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
        x.Respond(
            ErrorReply(probe.status().code() == api::StatusCode::kOutOfRange
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

  void Artifacts(HttpExchange& x, const api::ObjectKey& key) {
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

  // A page of the task's log (?afterSeq, ?limit), or with ?follow=true every entry as a JSON
  // line until the task has finished and its log is read to the end.
  void TaskLog(HttpExchange& x, const api::ObjectKey& key) {
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

  // ---- writes -------------------------------------------------------------------------------

  void Audit(const Caller& caller, const api::ObjectKey& key, std::string reason,
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

  void Apply(HttpExchange& x, const Caller& caller) {
    auto request = DecodeApplyRequest(x.request().body);
    if (!request.ok()) {
      x.Respond(ErrorReply(request.status()));
      return;
    }
    const ApplyOptions& options = request->options;
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

  void Delete(HttpExchange& x, const Caller& caller, const api::ObjectKey& key) {
    auto outcome = store_.Delete(key);
    if (!outcome.ok()) {
      x.Respond(ErrorReply(outcome.status()));
      return;
    }
    Audit(caller, key, "DeletedByApi", "deleted");
    x.Respond(JsonReply(200, DeleteOutcomeJson(*outcome)));
  }

  void Cancel(HttpExchange& x, const Caller& caller, const api::ObjectKey& key) {
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

  // ---- proxied to the sandbox -----------------------------------------------------------------

  void Exec(HttpExchange& x, const Caller& caller, const api::ObjectKey& key) {
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
    if (!result.ok()) {
      x.Respond(
          ErrorReply(api::Status(result.status().code(), "exec in sandbox " + created->sandbox_id +
                                                             ": " + result.status().message())));
      return;
    }
    x.Respond(JsonReply(200, CommandResultJson(*result)));
  }

  // The executor log of an AgentWorker as text/plain (?tailLines=N, ?follow=true).
  void ExecutorLog(HttpExchange& x, const api::ObjectKey& key) {
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
          "sandbox " + sandbox_key.name + " of agentworker/" + key.name +
          " is not running (state " + (state.empty() ? "unknown" : state) +
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
      x.Respond(ErrorReply(api::Status(first.status().code(),
                                       "logs of agentworker/" + key.name + " in sandbox " +
                                           target.sandbox_id + ": " + first.status().message())));
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

  Store& store_;
  const TokenTable& tokens_;
  SandboxCommands* commands_;
  Clock& clock_;
  ApiServerOptions options_;
  WatchHub hub_;
  bool started_ = false;
  std::atomic<bool> stopped_{false};
  std::atomic<size_t> watches_{0};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

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
