// GitSourceReconciler: GitOps pull (DESIGN §7.3). Every `spec.interval` — and at once after a
// spec change — it fetches `spec.ref` of `spec.url` with the git CLI (controller/gitops), reads
// the manifests under `spec.path` of that commit with the same decoder, defaults, validation
// and duplicate check as `sbxctl apply -f` (api/manifest_check.h), and applies them through
// Store::Apply in ONE transaction under `spec.applyset`, pruning the set's other members when
// `spec.prune` is enabled — the rules of `sbxctl apply --prune --applyset`:
//   - a commit with any error (decode, validation, duplicate, an object not allowed) applies
//     nothing: Ready=False with every error's "<path in repo>:<line>:<col>: …" and the commit
//     in the message; the objects of the last good commit stay as they are;
//   - a path with no manifests is refused (Ready=False, EmptyPath) unless prune.allowEmpty;
//   - an applyset shared with another GitSource, or (with prune) with members outside the
//     GitSource's namespace, refuses the sync (ApplysetConflict): a prune never reaches another
//     namespace (checked by a dry run just before the apply);
//   - what a GitSource may apply: objects of its own namespace only (an object that names no
//     namespace, or "default", is put in it, like `sbxctl apply -n`), and no GitSource (a
//     repository cannot create or change the sources sbxd pulls from). Anything else refuses
//     the commit (ObjectNotAllowed).
// Status: revision (the commit last applied), lastAppliedAt, objects (how many it applied),
// lastAttemptedRevision/lastAttemptAt (the last try, good or not: the next is due `interval`
// after it), conditions Ready (reason Applied, or why not) and Synced (False when the last
// pass could not fetch or apply).
//
// Fetches run off the engine's workers, on GitFetchPool's own bounded threads
// (options.fetch_workers): a due GitSource queues its fetch and returns; the pool enqueues it when
// the fetch ends, and the next pass applies what it found. A repository that never answers holds
// one fetch thread for --git-timeout, never a reconcile worker.
//
// Credentials: spec.credentials.tokenFrom / sshKeyFrom are resolved per fetch through
// CloudClients::Secret, the one resolver of secret references (the operator's allowed
// sources); the values reach git only (see git_client.h) and are scrubbed from every message.
//
// Deletion: with prune enabled, the members of the applyset in the GitSource's namespace are
// deleted (the controller finalizer waits for that); with prune disabled they stay, unmanaged. The
// git cache of the GitSource is removed either way.
//
// Thread-safety: Reconcile may run on several workers at once for different keys; the counters
// are safe to read from any thread. Collaborators must outlive the reconciler.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "api/resources.h"
#include "api/validation.h"
#include "controller/base/clock.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/engine/event_recorder.h"
#include "controller/engine/manager.h"
#include "controller/gitops/git_client.h"
#include "controller/reconcilers/git_fetch_pool.h"
#include "controller/store/store.h"

namespace sbx::controller {

struct GitSourceReconcilerOptions {
  // The most one manifest file of a repository may hold (as sbxctl's --max-manifest-bytes).
  size_t max_manifest_bytes = size_t{8} << 20;
  // The secret sources manifests of a repository may name (sbxd --secret-env-prefix).
  api::ValidationOptions validation;
  // Wakes a GitSource when its fetch ends. Null: fetches run inside the reconcile (sbxd --once,
  // unit tests).
  Enqueuer* enqueuer = nullptr;
  // Fetches at once, at most (sbxd --git-fetch-workers).
  size_t fetch_workers = 2;
};

class GitSourceReconciler final : public Reconciler {
 public:
  GitSourceReconciler(Store& store, CloudClients& clouds, gitops::GitClient& git, Clock& clock,
                      GitSourceReconcilerOptions options = {});

  api::Kind kind() const override { return api::Kind::kGitSource; }
  // Errors: the store's (retried by the Manager). A failed fetch or a broken commit is not an
  // error: it is the GitSource's status, and the next try comes after `interval`.
  api::StatusOr<ReconcileResult> Reconcile(const api::ObjectKey& key,
                                           std::stop_token stop) override;

  // For metrics: syncs by result ("success", "failure"), and the time of each GitSource's last
  // successful sync (seconds since the epoch) by "<namespace>/<name>".
  int64_t syncs_succeeded() const { return succeeded_.load(); }
  int64_t syncs_failed() const { return failed_.load(); }
  std::map<std::pair<std::string, std::string>, double> LastSuccess() const;

 private:
  api::StatusOr<ReconcileResult> Converge(api::Object& source, const api::ResourceStatus& before,
                                          std::stop_token stop);
  // The fetch of the spec as it is (credentials resolved now, for the pool to run), or nullopt
  // after Fail() when it cannot be made.
  std::optional<GitFetchPool::Job> PrepareFetch(api::Object& source);
  // Reads and applies what a fetch found; sets the conditions. Returns whether it applied.
  bool ApplyCommit(api::Object& source, const GitFetchResult& fetched);
  api::StatusOr<std::optional<ReconcileResult>> Finalize(api::Object& source);
  // Why applying `objects` under `apply` must not go ahead ("" when it may): another GitSource
  // has the same applyset, or the prune would delete objects outside the source's namespace.
  std::string ApplysetConflict(const api::Object& source, const std::vector<api::Object>& objects,
                               const ApplyOptions& apply);
  void Fail(api::Object& source, std::string_view reason, std::string message);

  Store& store_;
  CloudClients& clouds_;
  gitops::GitClient& git_;
  Clock& clock_;
  EventRecorder events_;
  const GitSourceReconcilerOptions options_;
  std::atomic<int64_t> succeeded_{0};
  std::atomic<int64_t> failed_{0};
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, double> last_success_;  // Guarded by mu_.
  GitFetchPool fetches_;  // last: its threads stop before the members they use go
};

// The git cache key of a GitSource: "<namespace>_<name>" (both DNS labels, so unambiguous).
// kInvalidArgument when either is not a DNS label (the store is not trusted to hold only
// validated names); GitClient checks the key once more before it touches the disk.
api::StatusOr<std::string> GitCacheKey(const api::ObjectKey& key);

}  // namespace sbx::controller
