#include "controller/store/scrubbing_store.h"

#include "api/codec.h"

namespace sbx::controller {

StatusOr<Object> ScrubbingStore::UpdateStatus(const Object& object) {
  // The status as the store will hold it; scrubbing its JSON text reaches every string field,
  // present and future, without a list of them to keep up to date.
  const std::string json = api::EncodeStatusJson(object);
  const std::string scrubbed = scrub_(json);
  if (scrubbed == json) {
    return store_.UpdateStatus(object);
  }
  StatusOr<api::ResourceStatus> status = api::DecodeStatusJson(object.kind, scrubbed);
  if (!status.ok()) {
    return api::InternalError(
        "status of " + KeyOf(object).ToString() +
        " no longer decodes after scrubbing secrets: " + status.status().message());
  }
  Object clean = object;
  clean.status = *std::move(status);
  return store_.UpdateStatus(clean);
}

Status ScrubbingStore::RecordEvent(const Event& event) {
  Event clean = event;
  clean.reason = scrub_(event.reason);
  clean.message = scrub_(event.message);
  return store_.RecordEvent(clean);
}

StatusOr<int64_t> ScrubbingStore::AppendTaskLog(const ObjectKey& task, const std::string& task_uid,
                                                const std::vector<TaskLogEntry>& entries) {
  std::vector<TaskLogEntry> scrubbed = entries;
  for (TaskLogEntry& e : scrubbed) {
    e.text = scrub_(e.text);
  }
  return store_.AppendTaskLog(task, task_uid, scrubbed);
}

}  // namespace sbx::controller
