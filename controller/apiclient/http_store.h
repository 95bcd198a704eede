// HttpStore: the Store interface over sbxd's REST API (controller/apiserver), so that every
// sbxctl verb runs against a server exactly as against a local SQLite file (DESIGN §7.3:
// `sbxctl --server URL --token T`). What a client may do is what its token's role allows;
// what the API does not offer to clients (status and controller-metadata writes, leases,
// inventory writes, compaction, task-log appends) is kPermissionDenied here.
//
// Watching: WatchSince reads `GET …/changes?resourceVersion=N` (410 → kOutOfRange, as the
// store's own "resourceVersion too old"); WaitForChange long-polls the same endpoint with
// `waitMs`, so a follower costs one request per change or per wait slice. Task logs and
// artifacts are addressed by the task's name on the wire: HttpStore remembers the name of
// every AgentTask uid it has returned (a caller reads the task before its log, as sbxctl does).
//
// Beyond Store: Exec and ExecutorLog, proxied to the sandbox by sbxd.
//
// Thread-safety: safe from several threads (the uid map and revision are under one mutex).
// Ownership: borrows the transports, which must outlive it. Never logs or returns the token.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "controller/cloud/http/http_transport.h"
#include "controller/cloud/sandbox_commands.h"
#include "controller/store/store.h"

namespace sbx::controller::apiclient {

struct HttpStoreOptions {
  std::string server;  // "https://host:port" (no path)
  std::string token;   // the bearer token; sent only to `server`
  std::chrono::milliseconds timeout{60'000};
};

class HttpStore final : public Store {
 public:
  HttpStore(http::HttpTransport& transport, http::StreamingTransport& streaming,
            HttpStoreOptions options);

  StatusOr<std::vector<ApplyResult>> Apply(const std::vector<Object>& objects,
                                           const ApplyOptions& options) override;
  StatusOr<Object> Get(const ObjectKey& key) override;
  StatusOr<std::vector<Object>> List(const ListOptions& options) override;
  StatusOr<Object> UpdateStatus(const Object& object) override;
  StatusOr<Object> UpdateControllerMetadata(const Object& object) override;
  StatusOr<Object> PostWakeHint(const ObjectKey& key) override;
  using Store::Delete;
  StatusOr<DeleteOutcome> Delete(const ObjectKey& key, const DeleteOptions& options) override;
  StatusOr<std::vector<Change>> WatchSince(int64_t since, int limit) override;
  StatusOr<int64_t> CurrentRevision() override;
  bool WaitForChange(std::chrono::milliseconds timeout) override;
  StatusOr<int64_t> CompactChanges(int64_t revision) override;
  Status RecordEvent(const Event& event) override;
  StatusOr<std::vector<Event>> ListEvents(const std::optional<ObjectKey>& involved) override;
  // GET audit (the admin role); the server writes the records itself, from the token.
  StatusOr<std::vector<AuditRecord>> ListAudit(const AuditQuery& query) override;
  Status AppendAudit(const AuditRecord& record) override;
  StatusOr<int64_t> ExpireEvents(std::chrono::system_clock::time_point cutoff) override;
  Status PutInventory(const InventoryRecord& record) override;
  StatusOr<std::optional<InventoryRecord>> GetInventory(const std::string& workspace,
                                                        const std::string& resource_type,
                                                        const std::string& external_id) override;
  StatusOr<std::vector<InventoryRecord>> ListInventory(
      const std::optional<std::string>& workspace) override;
  Status DeleteInventory(const std::string& workspace, const std::string& resource_type,
                         const std::string& external_id) override;
  using Store::TryAcquireLease;
  StatusOr<std::optional<int64_t>> AcquireLease(const std::string& name, const std::string& holder,
                                                std::chrono::milliseconds ttl) override;
  Status ReleaseLease(const std::string& name, const std::string& holder) override;
  StatusOr<std::optional<Lease>> GetLease(const std::string& name) override;
  StatusOr<std::vector<Lease>> ListLeases(const std::string& prefix) override;
  StatusOr<int64_t> AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                  const std::vector<TaskLogEntry>& entries) override;
  StatusOr<TaskLogPage> ReadTaskLog(const std::string& task_uid, int64_t after_seq,
                                    int limit) override;
  Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                     const Artifact& artifact) override;
  StatusOr<std::vector<Artifact>> ListArtifacts(const std::string& task_uid) override;
  StatusOr<Artifact> GetArtifact(const std::string& task_uid, const std::string& path) override;

  // Runs `command` in the sandbox of Sandbox `sandbox` through sbxd (admin role).
  StatusOr<CommandResult> Exec(const ObjectKey& sandbox, const std::vector<std::string>& command,
                               std::chrono::seconds timeout);
  // The executor log of AgentWorker `worker` (the last `tail_lines`, all when < 0); with
  // `follow`, keeps handing over what is appended until `stop` or the server ends the stream.
  // `on_data` gets the log's bytes as they arrive.
  Status ExecutorLog(const ObjectKey& worker, int tail_lines, bool follow,
                     const std::function<void(std::string_view)>& on_data, std::stop_token stop);

  const std::string& server() const { return options_.server; }

 private:
  StatusOr<std::string> Call(const std::string& method, const std::string& path_and_query,
                             const std::optional<std::string>& body = std::nullopt,
                             std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  void Remember(const Object& object);
  StatusOr<ObjectKey> TaskOf(const std::string& uid);

  http::HttpTransport& transport_;
  http::StreamingTransport& streaming_;
  HttpStoreOptions options_;
  std::mutex mu_;
  std::map<std::string, ObjectKey> tasks_by_uid_;  // Guarded by mu_.
  std::optional<int64_t> waited_revision_;         // Guarded by mu_.
};

}  // namespace sbx::controller::apiclient
