// ExecApi: the Sandbox API's command endpoints (§3): exec-sync, which runs one real process
// (argv, no shell) in the sandbox's isolation — a private mount namespace, or path rewriting of
// /home/sandbox-agent without one — with the timeout and output cap of the Options, and
// ListCommands, the sandbox's command history.
//
// Thread-safety: thread-safe; exec-sync blocks its caller (a connection thread) for the
// command's whole run without holding State::mu. Borrows the State, which must outlive it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "emulator/databricks/internal/state.h"
#include "emulator/internal/process_runner.h"

namespace sbx::emulator::internal::databricks {

class ExecApi {
 public:
  explicit ExecApi(State& state);

  HttpResponse ExecSync(const std::string& id, const HttpRequest& req);
  HttpResponse ListCommands(const std::string& id, const HttpRequest& req);

 private:
  SpawnSpec MakeSpawnSpec(const SandboxRec& sb, const std::string& cmd,
                          const std::vector<std::string>& args,
                          const std::map<std::string, std::string>& envs) const;

  State& state_;
};

}  // namespace sbx::emulator::internal::databricks
