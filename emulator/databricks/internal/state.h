// State: the Databricks emulator's model — the sandboxes with their lifecycle (§4: PENDING →
// RUNNING → STOPPING → STOPPED, idle auto-stop), their directories and processes, the
// ListCommands history, issued OAuth tokens and the exec log — behind one mutex, and how a
// sandbox renders as API JSON. Module-private to emulator/databricks; the router, the API
// handlers and the admin API all read and write it.
//
// Thread-safety: fields marked "Guarded by mu" are used only with `mu` held; methods named
// *Locked expect it held. RandomHex and ErrorResponse take their own lock. `root`, `bin_dir`,
// `isolation`, `host` and `port` are written by DatabricksEmulator::Start before serving.
// Owns a copy of the Options.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "emulator/databricks/databricks_emulator.h"
#include "emulator/databricks/internal/wire_format.h"
#include "emulator/internal/http_server.h"
#include "emulator/internal/process_runner.h"

namespace sbx::emulator::internal::databricks {

inline constexpr std::string_view kSandboxHome = "/home/sandbox-agent";
// Where the extra bin dir is mounted inside a command's namespace. It may not be reachable at
// its host path there: the sandbox's tmp is mounted over /tmp, and roots often live in /tmp.
inline constexpr std::string_view kNamespaceBinDir = "/run/sbx-emulator/bin";
// Where the bin dir's programs (the built-in `codex`) also appear inside a sandbox's mount
// namespace, overlaid on the host's own directory: on /etc/profile's PATH (login shells).
inline constexpr std::string_view kBuiltinBinDir = "/usr/local/bin";
inline constexpr std::string_view kMarkerName = "SBX_EMULATOR_SANDBOX";

struct CommandRec {
  std::string command_id;
  std::string cmd;
  std::vector<std::string> args;
  std::optional<std::int64_t> pid;
  bool finished = false;
  std::optional<int> exit_code;
};

struct SandboxRec {
  std::string id;
  std::string display_name;
  std::optional<Duration> inactivity_timeout;
  std::string image_uri;
  std::map<std::string, std::string> custom_tags;
  SandboxState state = SandboxState::kPending;
  SteadyClock::time_point transition_at;  // when PENDING/STOPPING ends
  bool deleting = false;                  // STOPPING on the way to gone (delete_via_stopping)
  SystemClock::time_point create_time;
  SystemClock::time_point update_time;
  SteadyClock::time_point last_activity;
  int running_execs = 0;
  std::set<pid_t> exec_pgids;  // process groups of in-flight exec-sync children
  std::vector<CommandRec> commands;
  std::uint64_t boot = 0;
  std::string owner;                // who created it (Principal): the per-user quota counts these
  bool fail_provisioning = false;   // this PENDING ends STOPPING → STOPPED, not RUNNING
  std::string egress_ip;            // public address of this boot ("" until it first runs)
  std::string next_boot_egress_ip;  // set by the admin API: the address the next boot gets
  int updates_in_flight = 0;        // PATCHes being applied (a concurrent one gets 409 ABORTED)
  // Every RUNNING interval of its life, for tests of compute accounting (admin API): when it
  // became RUNNING and when it left RUNNING (nullopt while it runs). Wall clock.
  struct RunningInterval {
    SystemClock::time_point start;
    std::optional<SystemClock::time_point> end;
  };
  std::vector<RunningInterval> running_intervals;
};

struct ExecLogEntry {
  std::string sandbox_id;
  std::string command_id;
  std::string cmd;
  std::vector<std::string> args;
  std::vector<std::string> env_names;  // names only: values may be secrets
};

struct IssuedToken {
  SteadyClock::time_point expires_at;
  std::set<std::string> scopes;
  std::string client_id;  // the service principal it was issued to
};

class State {
 public:
  explicit State(DatabricksEmulator::Options options);

  std::string base_url() const;  // "http://host:port"
  std::string RandomHex(int bytes);
  // The Databricks error body with a fresh RequestInfo request id; Retry-After if set.
  HttpResponse ErrorResponse(const ApiError& e);
  // "SBX_EMULATOR_SANDBOX=<instance>/<id>": the environment entry every process of it carries.
  std::string Marker(const std::string& sandbox_id) const;
  std::filesystem::path SandboxDir(const std::string& id) const;
  json SandboxJson(const SandboxRec& sb) const;

  // Who a /api/ request acts as: "sp:<client id>" for an OAuth token, else "user:<fingerprint
  // of the PAT>" (one PAT = one user). mu held.
  std::string PrincipalLocked(const HttpRequest& req) const;

  // ---- lifecycle (§4), mu held ---------------------------------------------------------------
  // After a state change at `at`: update_time = at, with options.update_time_on_transitions.
  void TransitionedLocked(SandboxRec& sb, SystemClock::time_point at) const;
  // Create and start: PENDING until `pending_delay` passes; an injected provisioning failure
  // (provisioning_failures) makes this one end STOPPING → STOPPED instead of RUNNING.
  void BeginPendingLocked(SandboxRec& sb, SteadyClock::time_point now);
  // The egress address a boot gets: the admin's next_boot_egress_ip, else a deterministic one
  // from (id, boot) in 198.18.0.0/15, so each start may change it (the seed: "stable while a
  // sandbox is running but can change across stop and restart cycles").
  std::string BootEgressIpLocked(SandboxRec& sb) const;
  Duration EffectiveTimeoutLocked(const SandboxRec& sb) const;
  // Kills every process of the sandbox: in-flight exec-sync groups and anything carrying its
  // marker (detached `setsid nohup` children included).
  void KillSandboxLocked(SandboxRec& sb);
  void WipeScratchLocked(const SandboxRec& sb);
  void BeginStopLocked(SandboxRec& sb, SteadyClock::time_point now);
  // Applies every transition whose time has come. Called on each observation and by the timer.
  void AdvanceLocked(SteadyClock::time_point now);
  std::optional<SteadyClock::time_point> NextDeadlineLocked() const;
  // The sandbox after applying due transitions, or null.
  SandboxRec* FindLocked(const std::string& id);
  // Runs the transitions on time until `st` is requested (the timer thread's body).
  void TimerLoop(std::stop_token st);

  const DatabricksEmulator::Options options;
  std::string instance_id;
  std::filesystem::path root;
  std::filesystem::path bin_dir;
  Isolation isolation = Isolation::kPathRewrite;
  std::string host = "127.0.0.1";
  int port = 0;

  std::mutex rng_mu;
  std::mt19937_64 rng;  // Guarded by rng_mu.

  std::mutex mu;
  std::condition_variable_any cv;
  bool stopped = false;                         // Guarded by mu.
  std::map<std::string, SandboxRec> sandboxes;  // Guarded by mu.
  std::map<std::string, IssuedToken> issued;    // Guarded by mu.
  std::vector<ExecLogEntry> exec_log;           // Guarded by mu.
  // Injected provisioning failures still to happen, by sandbox id ("" = any sandbox).
  std::map<std::string, int> provisioning_failures;  // Guarded by mu.
  std::uint64_t provisioning_failures_total = 0;     // Guarded by mu.
};

}  // namespace sbx::emulator::internal::databricks
