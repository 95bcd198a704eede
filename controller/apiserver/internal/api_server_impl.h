// ApiServer::Impl, declared once for the two files that define it: api_server.cc (routing,
// authentication, reads, writes) and api_server_streams.cc (watches, follows, the change log,
// and what is proxied to sandboxes). Private to apiserver/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controller/apiserver/api_server.h"
#include "controller/apiserver/internal/watch_hub.h"

namespace sbx::controller::apiserver {

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

  void Handle(HttpExchange& x);

 private:
  static HttpResponse Unauthenticated();

  std::optional<Caller> Authenticate(const HttpRequest& req) const;

  // Whether the caller's role is at least `needed`; if not, answers 403 and audits the refusal
  // of `verb` (what the caller tried) on each of `keys`.
  bool Allowed(HttpExchange& x, const Caller& caller, Role needed, std::string_view verb,
               const std::vector<api::ObjectKey>& keys = {});

  void Route(HttpExchange& x, const Caller& caller, const std::vector<std::string>& rest);

  // ---- reads --------------------------------------------------------------------------------

  void List(HttpExchange& x, api::Kind kind, const std::optional<std::string>& ns);

  // The change log of every kind, for HttpStore: ?resourceVersion=N&limit=L → the changes after
  // N as watch lines (410 when compacted); with ?waitMs=T instead, waits up to T for a change
  // after N and answers the current revision.
  void Changes(HttpExchange& x);

  void Events(HttpExchange& x, const std::optional<api::ObjectKey>& key);

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
  bool TakeSlot(HttpExchange& x);

  void Watch(HttpExchange& x, api::Kind kind, const std::optional<std::string>& ns);

  void Artifacts(HttpExchange& x, const api::ObjectKey& key);

  // A page of the task's log (?afterSeq, ?limit), or with ?follow=true every entry as a JSON
  // line until the task has finished and its log is read to the end.
  void TaskLog(HttpExchange& x, const api::ObjectKey& key);

  // ---- writes -------------------------------------------------------------------------------

  void Audit(const Caller& caller, const api::ObjectKey& key, std::string reason,
             const std::string& what);
  // Who the caller is, for the audit log (the store writes the records with the write).
  static WriteAudit WriteBy(const Caller& caller, std::string verb);
  // An audit record of something that is not an object write (a refusal, an exec), best effort.
  void AppendAudit(const Caller& caller, std::string verb, const api::ObjectKey& key,
                   std::string result);

  // GET audit (admin): ?afterId, ?sinceMs, ?actor, ?limit.
  void AuditLog(HttpExchange& x);

  void Apply(HttpExchange& x, const Caller& caller);

  void Delete(HttpExchange& x, const Caller& caller, const api::ObjectKey& key);

  void Cancel(HttpExchange& x, const Caller& caller, const api::ObjectKey& key);

  // ---- proxied to the sandbox -----------------------------------------------------------------

  void Exec(HttpExchange& x, const Caller& caller, const api::ObjectKey& key);

  // The executor log of an AgentWorker as text/plain (?tailLines=N, ?follow=true).
  void ExecutorLog(HttpExchange& x, const api::ObjectKey& key);

  Store& store_;
  const TokenTable& tokens_;
  SandboxCommands* commands_;
  Clock& clock_;
  ApiServerOptions options_;
  apiserver_internal::WatchHub hub_;
  bool started_ = false;
  std::atomic<bool> stopped_{false};
  std::atomic<size_t> watches_{0};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

}  // namespace sbx::controller::apiserver
