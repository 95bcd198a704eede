// AuditFile: `sbxd --audit-log FILE` (DESIGN §8.3). Copies every record of the store's audit
// log into FILE as one JSON line each (apiwire::AuditRecordJson), in id order, for a SIEM to
// ship: the writes of every surface (the API, sbxctl on the store, GitSources), whichever process
// made them, since the records are in the store.
//
// Nothing is skipped and nothing repeated across restarts and crashes: the file itself is the
// cursor. Open reads the id of its last complete line and continues after it; a last line cut
// short by a crash mid-write is removed first (it is written again whole). Each round appends
// whole lines and fsyncs before it moves the cursor. A file that is new or empty (rotated away)
// gets the whole retained log; each line carries its `id`, for a shipper to drop a repeat.
//
// The file is created mode 0600 and reopened every round, so a log rotator may rename it.
// With replicas, each sbxd given --audit-log writes its own complete copy.
//
// Thread-safety: one thread (CopyNew and Run are not to be called concurrently). Ownership: the
// store and clock must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>

#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller::daemon {

class AuditFile {
 public:
  // Reads where FILE left off (creating nothing yet). kFailedPrecondition naming the file when
  // it cannot be read or its last line is not an audit record.
  static api::StatusOr<std::unique_ptr<AuditFile>> Open(Store& store, std::string path);

  // One round: appends the records after the last one written, at most `batch` (0: all).
  // Returns how many it wrote; on an error the cursor stays, so the next round tries again.
  api::StatusOr<int64_t> CopyNew(int batch = 1000);

  // CopyNew every `interval` until `stop`, then once more; errors go to `report` (optional).
  void Run(std::stop_token stop, Clock& clock, std::chrono::milliseconds interval,
           const std::function<void(const api::Status&)>& report);

  int64_t last_id() const { return last_id_; }

 private:
  AuditFile(Store& store, std::string path, int64_t last_id)
      : store_(store), path_(std::move(path)), last_id_(last_id) {}

  Store& store_;
  const std::string path_;
  int64_t last_id_;
};

}  // namespace sbx::controller::daemon
