#include "controller/reconcilers/git_source_reconciler.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/conditions.h"
#include "api/manifest_check.h"
#include "api/validation.h"
#include "controller/base/classify_error.h"
#include "controller/reconcilers/internal/object_updates.h"
#include "controller/reconcilers/reconcile_skeleton.h"

namespace sbx::controller {
namespace {

using api::ConditionStatus;
using api::WallTime;
namespace condition = api::condition;
namespace reason = api::reason;

// A condition message holds this many error lines at most (a commit can break many files).
constexpr size_t kMaxErrorLines = 20;

std::string RefText(const api::GitRef& ref) {
  if (!ref.branch.empty()) {
    return "branch " + ref.branch;
  }
  if (!ref.tag.empty()) {
    return "tag " + ref.tag;
  }
  return "commit " + ref.commit;
}

std::string JoinErrors(const std::vector<std::string>& errors) {
  std::string out;
  for (size_t i = 0; i < errors.size() && i < kMaxErrorLines; ++i) {
    out += (i == 0 ? "" : "; ") + errors[i];
  }
  if (errors.size() > kMaxErrorLines) {
    out += "; and " + std::to_string(errors.size() - kMaxErrorLines) + " more";
  }
  return out;
}

double EpochSeconds(WallTime t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

// A GitSource's writes in the audit log: source "gitsource/<namespace>/<name>", role "gitops".
WriteAudit GitOpsAudit(const api::Object& source, std::string verb, std::string actor) {
  WriteAudit who{std::move(actor), "gitops", std::move(verb),
                 "gitsource/" + source.metadata.namespace_ + "/" + source.metadata.name};
  who.record_failures = false;
  return who;
}

}  // namespace

api::StatusOr<std::string> GitCacheKey(const api::ObjectKey& key) {
  // Checked again at every use: the names come from the store, which a manifest validator did
  // not necessarily guard (a restored backup, a hand edit, `sbxctl migrate`).
  for (const std::string& part : {key.namespace_, key.name}) {
    if (std::string problem = api::ValidateDnsLabel(part); !problem.empty()) {
      return api::InvalidArgumentError("GitSource " + key.namespace_.substr(0, 80) + "/" +
                                       key.name.substr(0, 80) + " has no git cache: " + problem);
    }
  }
  return key.namespace_ + "_" + key.name;
}

GitSourceReconciler::GitSourceReconciler(Store& store, CloudClients& clouds, gitops::GitClient& git,
                                         Clock& clock, GitSourceReconcilerOptions options)
    : store_(store),
      clouds_(clouds),
      git_(git),
      clock_(clock),
      events_(store, clock),
      options_(std::move(options)),
      fetches_(options_.enqueuer, options_.fetch_workers) {}

std::map<std::pair<std::string, std::string>, double> GitSourceReconciler::LastSuccess() const {
  std::lock_guard lock(mu_);
  return last_success_;
}

api::StatusOr<ReconcileResult> GitSourceReconciler::Reconcile(const api::ObjectKey& key,
                                                              std::stop_token stop) {
  ReconcileSteps<ReconcileTarget> steps;
  steps.converge = [this](ReconcileTarget& t) {
    return Converge(t.object, t.original_status, t.stop);
  };
  steps.finalize = [this](ReconcileTarget& t) { return Finalize(t.object); };
  steps.record_outcome = [this](ReconcileTarget& t, const api::Status& status) {
    RecordSyncedError(t.object, status, clock_);
  };
  steps.forget = [this](const api::ObjectKey& gone) {
    fetches_.Forget(gone);  // stops a running fetch before its cache goes
    if (api::StatusOr<std::string> cache_key = GitCacheKey(gone); cache_key.ok()) {
      (void)git_.Remove(*cache_key);
    }
    std::lock_guard lock(mu_);
    last_success_.erase({gone.namespace_, gone.name});
  };
  return RunReconcile(store_, key, stop, steps);
}

api::StatusOr<ReconcileResult> GitSourceReconciler::Converge(api::Object& source,
                                                             const api::ResourceStatus& before,
                                                             std::stop_token stop) {
  const api::GitSourceSpec& spec = source.git_source_spec();
  api::GitSourceStatus& status = source.git_source_status();
  const auto interval = std::chrono::duration_cast<std::chrono::milliseconds>(spec.interval);
  // After a restart the metric starts from what status remembers.
  if (std::optional<WallTime> applied = ParseRfc3339(status.last_applied_at)) {
    std::lock_guard lock(mu_);
    last_success_.try_emplace({source.metadata.namespace_, source.metadata.name},
                              EpochSeconds(*applied));
  }
  // A fetch of this spec that has ended is applied now; one still running wakes us when it ends.
  const api::ObjectKey key = api::KeyOf(source);
  const std::string& uid = source.metadata.uid;
  const int64_t generation = source.metadata.generation;
  GitFetchPool::Outcome fetched = fetches_.Take(key, uid, generation);
  if (fetched.state == GitFetchPool::State::kPending) {
    return ReconcileResult::RequeueAfter(interval);
  }
  if (fetched.state == GitFetchPool::State::kNone) {
    // Due: never tried, the spec changed since the last try (or while a fetch of the old spec
    // ran: its outcome was stale), or `interval` has passed since.
    const auto& previous = std::get<api::GitSourceStatus>(before);
    const bool spec_changed = previous.observed_generation != generation || fetched.stale;
    if (!spec_changed) {
      if (std::optional<WallTime> last = ParseRfc3339(status.last_attempt_at)) {
        const auto next = *last + interval;
        const WallTime now = clock_.Now();
        if (now < next) {
          return ReconcileResult::RequeueAfter(
              std::chrono::duration_cast<std::chrono::milliseconds>(next - now) +
              std::chrono::milliseconds(1));
        }
      }
    }
    std::optional<GitFetchPool::Job> job = PrepareFetch(source);
    if (!job) {
      status.last_attempt_at = FormatRfc3339(clock_.Now());
      return ReconcileResult::RequeueAfter(interval);
    }
    fetches_.Start(key, uid, generation, *std::move(job));
    fetched = fetches_.Take(key, uid, generation);  // done already when synchronous
    if (fetched.state != GitFetchPool::State::kDone) {
      return ReconcileResult::RequeueAfter(interval);
    }
  }
  if (stop.stop_requested()) {
    return api::CancelledError("stopped before applying a sync");
  }
  status.last_attempt_at = FormatRfc3339(clock_.Now());
  ApplyCommit(source, *fetched.result);
  return ReconcileResult::RequeueAfter(interval);
}

void GitSourceReconciler::Fail(api::Object& source, std::string_view why, std::string message) {
  const api::GitSourceStatus& status = source.git_source_status();
  if (!status.revision.empty()) {
    message += " (still at " + status.revision + ")";
  }
  reconcilers_internal::SetCondition(source, condition::kReady, ConditionStatus::kFalse, why,
                                     message, clock_);
  reconcilers_internal::SetCondition(source, condition::kSynced, ConditionStatus::kFalse, why,
                                     message, clock_);
  failed_.fetch_add(1);
  events_.Warning(api::KeyOf(source), std::string(why), std::move(message));
}

std::optional<GitFetchPool::Job> GitSourceReconciler::PrepareFetch(api::Object& source) {
  const api::GitSourceSpec& spec = source.git_source_spec();
  gitops::GitAuth auth;
  if (!spec.credentials.token_from.empty()) {
    api::StatusOr<std::string> token = clouds_.Secret(
        source.metadata.namespace_, spec.credentials.token_from, "spec.credentials.tokenFrom");
    if (!token.ok()) {
      Fail(source,
           token.status().reason().empty() ? reason::kCredentialsMissing : token.status().reason(),
           ConditionMessage(token.status()));
      return std::nullopt;
    }
    auth.token = *std::move(token);
  }
  if (!spec.credentials.ssh_key_from.empty()) {
    api::StatusOr<std::string> key = clouds_.Secret(
        source.metadata.namespace_, spec.credentials.ssh_key_from, "spec.credentials.sshKeyFrom");
    if (!key.ok()) {
      Fail(source,
           key.status().reason().empty() ? reason::kCredentialsMissing : key.status().reason(),
           ConditionMessage(key.status()));
      return std::nullopt;
    }
    auth.ssh_key = *std::move(key);
  }

  api::StatusOr<std::string> cache_key = GitCacheKey(api::KeyOf(source));
  if (!cache_key.ok()) {
    Fail(source, reason::kFetchFailed, std::string(cache_key.status().message()));
    return std::nullopt;
  }
  // What the job needs, copied: it runs on a pool thread after this pass has returned.
  return [this, cache_key = *std::move(cache_key), url = spec.url, ref = spec.ref, path = spec.path,
          auth = std::move(auth)](std::stop_token stop) {
    GitFetchResult out;
    out.commit = git_.Fetch(cache_key, url, ref, auth, stop);
    if (out.commit.ok()) {
      out.files = git_.ReadFiles(cache_key, *out.commit, path, options_.max_manifest_bytes, stop);
    }
    return out;
  };
}

bool GitSourceReconciler::ApplyCommit(api::Object& source, const GitFetchResult& fetched) {
  const api::GitSourceSpec& spec = source.git_source_spec();
  api::GitSourceStatus& status = source.git_source_status();
  const std::string& ns = source.metadata.namespace_;
  const api::StatusOr<std::string>& commit = fetched.commit;
  if (!commit.ok()) {
    Fail(source, reason::kFetchFailed,
         "fetching " + RefText(spec.ref) + " of " + spec.url + ": " +
             std::string(commit.status().message()));
    return false;
  }
  status.last_attempted_revision = *commit;
  const api::StatusOr<std::vector<gitops::GitFile>>& files = fetched.files;
  if (!files.ok()) {
    Fail(source, reason::kInvalidManifest,
         "commit " + *commit + ": " + std::string(files.status().message()));
    return false;
  }

  // The same path as sbxctl apply -f and POST /apply: decode, default, validate, duplicates.
  std::vector<api::Manifest> manifests;
  std::vector<std::string> errors;
  for (const gitops::GitFile& file : *files) {
    api::DecodeManifestText(file.content, file.path, manifests, errors);
  }
  api::ManifestCheckOptions check;
  check.namespace_override = ns;
  check.validation = options_.validation;
  api::CheckManifests(manifests, check, errors);
  if (!errors.empty()) {
    Fail(source, reason::kInvalidManifest, "commit " + *commit + ": " + JoinErrors(errors));
    return false;
  }
  for (const api::Manifest& m : manifests) {
    if (m.object.kind == api::Kind::kGitSource) {
      errors.push_back(api::ManifestLocation(m) + ": a GitSource cannot apply a GitSource");
    } else if (m.object.metadata.namespace_ != ns) {
      errors.push_back(api::ManifestLocation(m) + ": metadata.namespace: \"" +
                       m.object.metadata.namespace_ + "\" is not the GitSource's namespace \"" +
                       ns + "\" (a GitSource applies objects of its own namespace only)");
    }
  }
  if (!errors.empty()) {
    Fail(source, reason::kObjectNotAllowed, "commit " + *commit + ": " + JoinErrors(errors));
    return false;
  }
  if (manifests.empty() && !(spec.prune.enabled && spec.prune.allow_empty)) {
    Fail(source, reason::kEmptyPath,
         "commit " + *commit + ": no manifests under path \"" + spec.path +
             "\"; refusing to apply nothing" +
             (spec.prune.enabled ? " and prune every member of applyset \"" + spec.applyset +
                                       "\" (set prune.allowEmpty to allow it)"
                                 : ""));
    return false;
  }

  std::vector<api::Object> objects;
  objects.reserve(manifests.size());
  for (api::Manifest& m : manifests) {
    objects.push_back(std::move(m.object));
  }
  ApplyOptions apply;
  apply.applyset = spec.applyset;
  apply.prune = spec.prune.enabled;
  apply.prune_allow_empty = spec.prune.allow_empty;
  // The audit log names the commit as the actor: its author is who asked (DESIGN §8.3). A failed
  // apply is retried every interval and shown in the GitSource's status, so it is not recorded.
  apply.audit = GitOpsAudit(source, "apply", "git:" + *commit);
  if (std::string conflict = ApplysetConflict(source, objects, apply); !conflict.empty()) {
    Fail(source, reason::kApplysetConflict, "commit " + *commit + ": " + conflict);
    return false;
  }
  api::StatusOr<std::vector<ApplyResult>> applied = store_.Apply(objects, apply);
  if (!applied.ok()) {
    Fail(source, reason::kApplyFailed,
         "commit " + *commit + ": " + std::string(applied.status().message()));
    return false;
  }
  int created = 0;
  int configured = 0;
  int pruned = 0;
  for (const ApplyResult& r : *applied) {
    created += r.action == ApplyAction::kCreated ? 1 : 0;
    configured += r.action == ApplyAction::kConfigured ? 1 : 0;
    pruned += r.action == ApplyAction::kPruned ? 1 : 0;
  }
  const WallTime now = clock_.Now();
  status.revision = *commit;
  status.last_applied_at = FormatRfc3339(now);
  status.objects = static_cast<int32_t>(objects.size());
  const std::string message = "applied " + std::to_string(objects.size()) + " objects of commit " +
                              *commit + " (" + std::to_string(created) + " created, " +
                              std::to_string(configured) + " configured, " +
                              std::to_string(pruned) + " pruned)";
  reconcilers_internal::SetCondition(source, condition::kReady, ConditionStatus::kTrue,
                                     reason::kApplied, message, clock_);
  reconcilers_internal::SetCondition(source, condition::kSynced, ConditionStatus::kTrue,
                                     reason::kSynced, "", clock_);
  succeeded_.fetch_add(1);
  {
    std::lock_guard lock(mu_);
    last_success_[{ns, source.metadata.name}] = EpochSeconds(now);
  }
  if (created + configured + pruned > 0) {
    events_.Normal(api::KeyOf(source), std::string(reason::kApplied), message);
  }
  return true;
}

std::string GitSourceReconciler::ApplysetConflict(const api::Object& source,
                                                  const std::vector<api::Object>& objects,
                                                  const ApplyOptions& apply) {
  const std::string& ns = source.metadata.namespace_;
  // Two GitSources on one applyset would prune each other's objects on every sync.
  ListOptions sources;
  sources.kind = api::Kind::kGitSource;
  api::StatusOr<std::vector<api::Object>> all = store_.List(sources);
  if (!all.ok()) {
    return "cannot list GitSources: " + std::string(all.status().message());
  }
  for (const api::Object& other : *all) {
    if (api::KeyOf(other) != api::KeyOf(source) &&
        other.git_source_spec().applyset == apply.applyset) {
      return "applyset \"" + apply.applyset + "\" is also the applyset of GitSource " +
             other.metadata.namespace_ + "/" + other.metadata.name;
    }
  }
  if (!apply.prune) {
    return "";
  }
  // The namespace rule holds for pruning too: an applyset named after another namespace's set
  // (sbxctl apply --applyset, or another GitSource's default) must not delete objects there.
  ApplyOptions dry = apply;
  dry.dry_run = true;
  api::StatusOr<std::vector<ApplyResult>> would = store_.Apply(objects, dry);
  if (!would.ok()) {
    return "";  // the real apply reports it
  }
  for (const ApplyResult& r : *would) {
    if (r.action == ApplyAction::kPruned && r.key.namespace_ != ns) {
      return "applyset \"" + apply.applyset + "\" has members outside namespace \"" + ns + "\" (" +
             r.key.ToString() + "); a GitSource prunes only in its own namespace";
    }
  }
  return "";
}

api::StatusOr<std::optional<ReconcileResult>> GitSourceReconciler::Finalize(api::Object& source) {
  const api::GitSourceSpec& spec = source.git_source_spec();
  if (spec.prune.enabled) {
    // Deleting the source with prune on deletes what it applied — the members of its applyset
    // in its own namespace (found by a dry-run prune), never anything elsewhere.
    ApplyOptions dry;
    dry.applyset = spec.applyset;
    dry.prune = true;
    dry.prune_allow_empty = true;
    dry.dry_run = true;
    ASSIGN_OR_RETURN(std::vector<ApplyResult> members, store_.Apply({}, dry));
    for (const ApplyResult& r : members) {
      if (r.action != ApplyAction::kPruned || r.key.namespace_ != source.metadata.namespace_) {
        continue;
      }
      api::StatusOr<DeleteOutcome> deleted =
          store_.Delete(r.key, {GitOpsAudit(source, "prune", "sbxd")});
      if (!deleted.ok() && deleted.status().code() != api::StatusCode::kNotFound) {
        return deleted.status();
      }
    }
  }
  // A running fetch is stopped first: it must not write into the cache after its removal. A key
  // the store's names cannot make is no cache of ours: nothing to remove.
  fetches_.Forget(api::KeyOf(source));
  if (api::StatusOr<std::string> cache_key = GitCacheKey(api::KeyOf(source)); cache_key.ok()) {
    (void)git_.Remove(*cache_key);
  }
  return std::optional<ReconcileResult>();
}

}  // namespace sbx::controller
