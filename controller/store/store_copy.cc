#include "controller/store/store_copy.h"

#include <utility>
#include <vector>

#include "api/resources.h"
#include "api/validation.h"

namespace sbx::controller {

using api::OkStatus;

namespace {

// "4100" → "4,100".
std::string WithThousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out.push_back(',');
    }
    out.push_back(digits[i]);
  }
  return n < 0 ? "-" + out : out;
}

std::string Counted(int64_t n, std::string_view one, std::string_view many) {
  return WithThousands(n) + " " + std::string(n == 1 ? one : many);
}

// Counts what passes through, refusing a record whose object names are not DNS labels; forwards
// to `next` when given.
class CountingSink final : public StoreSink {
 public:
  explicit CountingSink(StoreSink* next) : next_(next) {}
  const CopyCounts& counts() const { return counts_; }

  Status Revision(int64_t revision) override {
    counts_.revision = revision;
    return next_ != nullptr ? next_->Revision(revision) : OkStatus();
  }
  Status PutObject(const StoredObject& object) override {
    ++counts_.objects;
    RETURN_IF_ERROR(CheckImportedKey(api::KeyOf(object.object), "object"));
    return next_ != nullptr ? next_->PutObject(object) : OkStatus();
  }
  Status PutInventory(const Store::InventoryRecord& record) override {
    ++counts_.inventory;
    RETURN_IF_ERROR(CheckImportedKey(record.owner, "the owner of inventory record"));
    return next_ != nullptr ? next_->PutInventory(record) : OkStatus();
  }
  Status PutEvent(const Store::Event& event) override {
    ++counts_.events;
    RETURN_IF_ERROR(CheckImportedKey(event.involved, "the object of an event"));
    return next_ != nullptr ? next_->PutEvent(event) : OkStatus();
  }
  Status PutTaskLog(const StoredTaskLog& log) override {
    ++counts_.task_logs;
    counts_.task_log_lines += static_cast<int64_t>(log.entries.size());
    RETURN_IF_ERROR(CheckImportedKey(log.task, "the task of a task log"));
    return next_ != nullptr ? next_->PutTaskLog(log) : OkStatus();
  }
  Status PutArtifact(const ObjectKey& task, const std::string& task_uid,
                     const Store::Artifact& artifact) override {
    ++counts_.artifacts;
    RETURN_IF_ERROR(CheckImportedKey(task, "the task of an artifact"));
    return next_ != nullptr ? next_->PutArtifact(task, task_uid, artifact) : OkStatus();
  }
  Status PutUsage(const Store::UsageRecord& record) override {
    ++counts_.usage_records;
    RETURN_IF_ERROR(CheckImportedKey(record.task, "the task of a usage record"));
    return next_ != nullptr ? next_->PutUsage(record) : OkStatus();
  }
  Status PutAudit(const Store::AuditRecord& record) override {
    ++counts_.audit_records;
    RETURN_IF_ERROR(CheckImportedKey(record.object, "the object of an audit record"));
    return next_ != nullptr ? next_->PutAudit(record) : OkStatus();
  }
  Status PutNotification(const Store::Notification& n) override {
    ++counts_.notifications;
    RETURN_IF_ERROR(CheckImportedKey(n.notifier, "the Notifier of a notification"));
    RETURN_IF_ERROR(CheckImportedKey(n.object, "the object of a notification"));
    return next_ != nullptr ? next_->PutNotification(n) : OkStatus();
  }
  Status PutNotificationDrops(const std::string& notifier_uid, int64_t dropped) override {
    return next_ != nullptr ? next_->PutNotificationDrops(notifier_uid, dropped) : OkStatus();
  }

 private:
  StoreSink* next_;
  CopyCounts counts_;
};

}  // namespace

std::string FormatCopyCounts(const CopyCounts& c) {
  return Counted(c.objects, "object", "objects") + ", " +
         Counted(c.inventory, "inventory record", "inventory records") + ", " +
         Counted(c.events, "event", "events") + ", " +
         Counted(c.task_logs, "task log", "task logs") + " (" +
         Counted(c.task_log_lines, "line", "lines") + "), " +
         Counted(c.artifacts, "artifact", "artifacts") +
         (c.usage_records > 0 ? ", " + Counted(c.usage_records, "usage record", "usage records")
                              : "") +
         (c.audit_records > 0 ? ", " + Counted(c.audit_records, "audit record", "audit records")
                              : "") +
         (c.notifications > 0
              ? ", " + Counted(c.notifications, "pending notification", "pending notifications")
              : "");
}

Status CheckSourceLease(Store& from, const CopyOptions& options, const Clock& clock) {
  if (options.ignore_lease) {
    return OkStatus();
  }
  // Any live lease: the leader's, or a replica's membership or workspace (--work-split
  // workspace), is a running sbxd writing to the source.
  ASSIGN_OR_RETURN(std::vector<Store::Lease> leases, from.ListLeases(""));
  for (const Store::Lease& lease : leases) {
    if (lease.expires_at <= clock.Now()) {
      continue;
    }
    return api::FailedPreconditionError(
        "the source store is in use: " + lease.holder + " holds its \"" + lease.name +
        "\" lease until " + FormatRfc3339(lease.expires_at) +
        " (stop that sbxd first, or pass --ignore-lease to copy anyway and lose what it writes "
        "after the copy)");
  }
  return OkStatus();
}

StatusOr<CopyCounts> CountStore(Store& from) {
  CountingSink counter(nullptr);
  RETURN_IF_ERROR(from.ExportTo(counter));
  return counter.counts();
}

StatusOr<CopyCounts> CopyStore(Store& from, Store& to, const CopyOptions& options,
                               const Clock& clock) {
  if (&from == &to) {
    return api::InvalidArgumentError("cannot copy a store into itself");
  }
  RETURN_IF_ERROR(CheckSourceLease(from, options, clock));
  CopyCounts counts;
  bool copied = false;
  const Status status = to.ImportFrom([&](StoreSink& destination) -> Status {
    CountingSink counter(&destination);
    RETURN_IF_ERROR(from.ExportTo(counter));
    counts = counter.counts();
    copied = true;
    // An error is the one way to have ImportFrom roll back.
    return options.dry_run ? api::AbortedError("dry run: rolled back") : OkStatus();
  });
  if (options.dry_run && copied && status.code() == api::StatusCode::kAborted) {
    return counts;
  }
  RETURN_IF_ERROR(status);
  return counts;
}

Status CheckEmptyForImport(std::string_view database, const CopyCounts& held) {
  std::vector<std::string> what;
  if (held.objects > 0) {
    what.push_back(Counted(held.objects, "object", "objects"));
  }
  if (held.inventory > 0) {
    what.push_back(Counted(held.inventory, "inventory record", "inventory records"));
  }
  if (held.events > 0) {
    what.push_back(Counted(held.events, "event", "events"));
  }
  if (held.task_logs > 0 || held.task_log_lines > 0) {
    what.push_back(Counted(held.task_logs, "task log", "task logs") + " (" +
                   Counted(held.task_log_lines, "line", "lines") + ")");
  }
  if (held.artifacts > 0) {
    what.push_back(Counted(held.artifacts, "artifact", "artifacts"));
  }
  if (held.usage_records > 0) {
    what.push_back(Counted(held.usage_records, "usage record", "usage records"));
  }
  if (held.audit_records > 0) {
    what.push_back(Counted(held.audit_records, "audit record", "audit records"));
  }
  if (held.notifications > 0) {
    what.push_back(Counted(held.notifications, "pending notification", "pending notifications"));
  }
  if (what.empty()) {
    return OkStatus();
  }
  std::string list;
  for (const std::string& w : what) {
    list += (list.empty() ? "" : ", ") + w;
  }
  return api::FailedPreconditionError("database " + std::string(database) +
                                      " is not empty (it holds " + list +
                                      "); a store is only copied into an empty one");
}

Status CheckImportedObject(std::string_view database, const StoredObject& stored) {
  const api::ObjectMeta& meta = stored.object.metadata;
  std::string missing;
  if (meta.uid.empty()) {
    missing = "uid";
  } else if (meta.resource_version <= 0) {
    missing = "resourceVersion";
  } else if (meta.generation <= 0) {
    missing = "generation";
  } else if (meta.creation_timestamp.empty()) {
    missing = "creationTimestamp";
  }
  if (missing.empty()) {
    return OkStatus();
  }
  return api::InvalidArgumentError("importing into database " + std::string(database) + ": " +
                                   api::KeyOf(stored.object).ToString() + " has no " + missing);
}

Status CheckImportedKey(const ObjectKey& key, std::string_view what) {
  // Names reach file paths (the git cache) and URLs: a store is not trusted to hold only what
  // the validator let in (#24).
  for (const auto& [field, value] :
       {std::pair<std::string_view, const std::string&>{"namespace", key.namespace_},
        std::pair<std::string_view, const std::string&>{"name", key.name}}) {
    if (std::string problem = api::ValidateDnsLabel(value); !problem.empty()) {
      std::string shown = value.substr(0, 80);
      for (char& c : shown) {
        c = (c < 0x20 || c == 0x7f) ? '?' : c;  // one line, whatever the source holds
      }
      std::string message(what);
      message.append(" ").append(api::KindName(key.kind)).append(" has ").append(field);
      message.append(" \"").append(shown).append("\": ").append(problem);
      message.append("; nothing was copied");
      return api::InvalidArgumentError(message);
    }
  }
  return OkStatus();
}

Status CheckImportedArtifact(const ObjectKey& task, const Store::Artifact& artifact) {
  if (artifact.bytes == static_cast<int64_t>(artifact.content.size())) {
    return OkStatus();
  }
  return api::InvalidArgumentError("artifact " + artifact.path + " of task " + task.ToString() +
                                   ": bytes " + std::to_string(artifact.bytes) + " but " +
                                   std::to_string(artifact.content.size()) + " bytes of content");
}

}  // namespace sbx::controller
