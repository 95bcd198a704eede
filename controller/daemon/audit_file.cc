#include "controller/daemon/audit_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "controller/apiwire/api_wire.h"

namespace sbx::controller::daemon {
namespace {

api::Status FileError(const std::string& path, std::string_view what) {
  return api::FailedPreconditionError("--audit-log " + path + ": " + std::string(what) + ": " +
                                      std::strerror(errno));
}

// Writes all of `text` at the end of the file open as `fd`.
api::Status WriteAll(int fd, std::string_view text, const std::string& path) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return FileError(path, "cannot write");
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  return api::OkStatus();
}

}  // namespace

api::StatusOr<std::unique_ptr<AuditFile>> AuditFile::Open(Store& store, std::string path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return std::unique_ptr<AuditFile>(new AuditFile(store, std::move(path), 0));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return FileError(path, "cannot open");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = std::move(buffer).str();
  // A line cut short by a crash mid-write: drop it; its record is written again whole.
  const size_t complete = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (complete != text.size()) {
    if (::truncate(path.c_str(), static_cast<off_t>(complete)) != 0) {
      return FileError(path, "cannot cut its incomplete last line");
    }
    text.resize(complete);
  }
  int64_t last_id = 0;
  if (!text.empty()) {
    text.pop_back();
    const std::string last =
        text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
    const nlohmann::json j = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("id") || !j["id"].is_number_integer()) {
      return api::FailedPreconditionError("--audit-log " + path +
                                          ": its last line is not an audit record (another "
                                          "program's file? give sbxd a file of its own)");
    }
    last_id = j["id"].get<int64_t>();
  }
  return std::unique_ptr<AuditFile>(new AuditFile(store, std::move(path), last_id));
}

api::StatusOr<int64_t> AuditFile::CopyNew(int batch) {
  Store::AuditQuery query;
  query.after_id = last_id_;
  query.limit = batch;
  ASSIGN_OR_RETURN(std::vector<Store::AuditRecord> records, store_.ListAudit(query));
  if (records.empty()) {
    return 0;
  }
  std::string lines;
  for (const Store::AuditRecord& r : records) {
    lines += apiwire::AuditRecordJson(r) + "\n";
  }
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return FileError(path_, "cannot open");
  }
  api::Status written = WriteAll(fd, lines, path_);
  if (written.ok() && ::fsync(fd) != 0) {
    written = FileError(path_, "cannot sync");
  }
  ::close(fd);
  RETURN_IF_ERROR(written);
  last_id_ = records.back().id;
  return static_cast<int64_t>(records.size());
}

void AuditFile::Run(std::stop_token stop, Clock& clock, std::chrono::milliseconds interval,
                    const std::function<void(const api::Status&)>& report) {
  // Everything there is, in batches, now and every interval; once more after the stop, for the
  // last writes.
  for (bool more = true;; more = more && clock.SleepFor(interval, stop)) {
    for (;;) {
      api::StatusOr<int64_t> n = CopyNew();
      if (!n.ok()) {
        if (report) {
          report(n.status());
        }
        break;
      }
      if (*n < 1000) {
        break;
      }
    }
    if (!more) {
      return;
    }
  }
}

}  // namespace sbx::controller::daemon
