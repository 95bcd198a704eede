// sbx-emulator: runs the local cloud emulators on loopback ports until SIGTERM/SIGINT.
// Prints one "<api>: <url>" line per API on stdout (flushed) once it is serving, then waits;
// on a signal it kills every sandbox process and exits 0. Flags: see emulator/README.md.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "cli/main_guard.h"
#include "emulator/databricks/databricks_emulator.h"
#include "emulator/executor/standin_executor.h"
#include "emulator/internal/fault_injector.h"
#include "emulator/openai/openai_emulator.h"

namespace {

using Millis = std::chrono::milliseconds;

// "250ms", "1.5s", "10m", "1h", or a bare number of seconds.
bool ParseFlagDuration(const std::string& text, Millis& out) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    double scale = 0;
    if (unit == "ms") {
      scale = 1;
    } else if (unit == "s" || unit.empty()) {
      scale = 1000;
    } else if (unit == "m") {
      scale = 60'000;
    } else if (unit == "h") {
      scale = 3'600'000;
    }
    if (scale == 0 || v < 0) {
      return false;
    }
    out = Millis(std::llround(v * scale));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// CLI11 option bound to a duration.
CLI::Option* AddDuration(CLI::App& app, const std::string& name, Millis& target,
                         const std::string& help) {
  return app
      .add_option_function<std::string>(
          name,
          [&target, name](const std::string& s) {
            if (!ParseFlagDuration(s, target)) {
              throw CLI::ValidationError(name, "expected a duration like 250ms, 1s, 10m, 1h");
            }
          },
          help)
      ->type_name("DURATION");
}

// `sbx-emulator executor …`: the stand-in for `codex exec-server --remote …` (see
// emulator/executor/standin_executor.h). Reads CODEX_API_KEY like codex; SIGTERM/SIGINT → 0.
int RunExecutor(int argc, char** argv) {
  CLI::App app{"sbx-emulator executor: stand-in for `codex exec-server --remote` (plain JSON-RPC)"};
  sbx::emulator::StandinExecutorOptions opts;
  app.add_option("--remote", opts.remote,
                 "Registry base URL (the session's environment.remote_url)");
  app.add_option("--environment-id", opts.environment_id, "The session's environment.id");
  app.add_option("--name", opts.name, "Executor name (informational)");
  app.allow_extras();  // codex flags the stand-in ignores (--exit-on-stdin-close, -c k=v, …)
  CLI11_PARSE(app, argc, argv);
  if (const char* key = std::getenv("CODEX_API_KEY")) {
    opts.api_key = key;
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::stop_source stop;
  std::jthread waiter([&stop, signals](std::stop_token done) {
    timespec tick{0, 100'000'000};
    while (!done.stop_requested()) {
      if (sigtimedwait(&signals, nullptr, &tick) > 0) {
        stop.request_stop();
        return;
      }
    }
  });
  int rc = sbx::emulator::RunStandinExecutor(opts, std::cerr, stop.get_token());
  waiter.request_stop();
  return rc;
}

// Installs `<bin_dir>/codex`, a wrapper that runs this binary's stand-in executor for
// `codex exec-server …`, so that emulated sandboxes (whose PATH starts with bin_dir) find it.
// With `builtin` (--builtin-codex), `<bin_dir>/codex` is a symlink to that binary instead (the
// real codex; it must be visible inside sandboxes, i.e. not under /tmp).
void InstallCodexWrapper(const std::filesystem::path& bin_dir, const std::string& builtin) {
  std::error_code ec;
  if (!builtin.empty()) {
    std::filesystem::create_directories(bin_dir, ec);
    std::filesystem::remove(bin_dir / "codex", ec);
    std::filesystem::create_symlink(std::filesystem::absolute(builtin, ec), bin_dir / "codex", ec);
    if (ec) {
      spdlog::warn("cannot link {} as the built-in codex ({})", builtin, ec.message());
    }
    return;
  }
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    spdlog::warn("cannot find my own path ({}); no stand-in codex installed", ec.message());
    return;
  }
  std::filesystem::create_directories(bin_dir, ec);
  // The wrapper runs a copy of this binary that sits next to it in bin_dir: emulated sandboxes
  // see bin_dir (bind-mounted at /run/sbx-emulator/bin) but get a private /tmp, so a binary
  // built under /tmp (a CI clone, say) would be invisible to them by its own path.
  const std::filesystem::path copy = bin_dir / "sbx-emulator";
  std::filesystem::remove(copy, ec);
  std::filesystem::create_hard_link(self, copy, ec);
  if (ec) {
    std::filesystem::copy_file(self, copy, std::filesystem::copy_options::overwrite_existing, ec);
  }
  if (ec) {
    spdlog::warn("cannot copy myself to {} ({}); no stand-in codex installed", copy.string(),
                 ec.message());
    return;
  }
  const std::filesystem::path target = bin_dir / "codex";
  {
    std::ofstream out(target, std::ios::trunc);
    out << "#!/bin/sh\n"
           "# sbx-emulator stand-in for codex: `codex exec-server ...` runs the stand-in "
           "executor.\n"
           "if [ \"$1\" = exec-server ]; then shift; exec \"$(dirname \"$0\")/sbx-emulator\" "
           "executor \"$@\"; fi\n"
           "if [ \"$1\" = --version ]; then echo 'codex-cli 0.171.0 (sbx-emulator stand-in)'; exit "
           "0; "
           "fi\n"
           "echo 'codex (sbx-emulator stand-in): only \"codex exec-server\" is supported' >&2\n"
           "exit 2\n";
  }
  std::filesystem::permissions(target, std::filesystem::perms(0755),
                               std::filesystem::perm_options::replace, ec);
}

// The program itself; main (at the end) runs it behind a catch-all.
// The flags of both halves, and what they leave to be resolved after parsing.
struct EmulatorFlags {
  sbx::emulator::DatabricksEmulator::Options opts;
  std::string host = "127.0.0.1";
  int databricks_port = 0;
  std::vector<std::string> tokens;
  std::string builtin_codex;
  bool no_namespace = false;
  // The OpenAI Agents API half (started only with --openai-port).
  int openai_port = -1;
  sbx::emulator::OpenAiEmulator::Options openai_opts;
  std::vector<std::string> openai_keys;
  std::vector<std::string> executor_keys;
  std::string registration_failure = "none";
  std::string ip_allowlist;
};

void AddDatabricksFlags(CLI::App& app, EmulatorFlags& f) {
  sbx::emulator::DatabricksEmulator::Options& opts = f.opts;
  app.add_option("--host", f.host, "Address to listen on")->capture_default_str();
  app.add_option("--databricks-port", f.databricks_port, "Databricks API port (0 = any free port)")
      ->capture_default_str();
  app.add_option("--root", opts.root_dir,
                 "State directory (sandbox homes live under <root>/sandboxes); default: a new "
                 "temporary directory");
  app.add_option("--bin-dir", opts.bin_dir,
                 "Directory prepended to commands' PATH (default <root>/bin)");
  AddDuration(app, "--pending-delay", opts.pending_delay, "PENDING → RUNNING delay (default 1s)");
  AddDuration(app, "--stopping-delay", opts.stopping_delay,
              "STOPPING → STOPPED delay (default 1s)");
  AddDuration(app, "--default-inactivity-timeout", opts.default_inactivity_timeout,
              "Idle auto-stop when the sandbox sets none (default 0 = never, as the API "
              "documents; e.g. 10m models a server-side default)");
  AddDuration(app, "--default-exec-timeout", opts.default_execution_timeout,
              "exec-sync timeout when none is given (default 5m)");
  AddDuration(app, "--max-exec-timeout", opts.max_execution_timeout,
              "exec-sync timeout clamp (default 1h)");
  AddDuration(app, "--oauth-token-ttl", opts.oauth_token_ttl, "OAuth token lifetime (default 1h)");
  app.add_option("--exec-output-cap", opts.exec_output_cap_bytes,
                 "Max stdout+stderr bytes per exec-sync response")
      ->capture_default_str();
  app.add_option("--token", f.tokens, "Accepted PAT (repeatable; default dapi-emulator)");
  app.add_flag("--accept-any-token", opts.accept_any_token, "Accept any bearer token (demos)");
  app.add_option("--client-id", opts.oauth_client_id, "OAuth M2M client id")->capture_default_str();
  app.add_option("--client-secret", opts.oauth_client_secret, "OAuth M2M client secret");
  app.add_option("--workspace-id", opts.workspace_id, "Workspace id advertised by host metadata");
  app.add_option("--max-sandboxes", opts.max_sandboxes, "Workspace sandbox quota (0 = unlimited)")
      ->capture_default_str();
  app.add_option("--max-sandboxes-per-user", opts.max_sandboxes_per_user,
                 "Per-user sandbox quota (one PAT or OAuth client = one user; 0 = unlimited; "
                 "the reference's unconfirmed number is 40)")
      ->capture_default_str();
  AddDuration(app, "--update-duration", opts.update_duration,
              "How long a PATCH takes to apply; a concurrent PATCH of the same sandbox gets 409 "
              "ABORTED (default 0 = instant)");
  app.add_option("--rate-limit", opts.requests_per_second,
                 "Workspace API requests per second (0 = unlimited)");
  app.add_flag("--reset-create-time-on-start", opts.reset_create_time_on_start,
               "start sets a fresh create_time");
  app.add_flag("--update-time-on-transitions", opts.update_time_on_transitions,
               "every state transition sets update_time (reference question 10, unconfirmed); "
               "default: PATCH only");
  app.add_flag("--delete-via-stopping", opts.delete_via_stopping,
               "delete shows STOPPING for --stopping-delay before the sandbox is gone");
  app.add_flag("--accept-legacy-mask-paths", opts.accept_legacy_mask_paths,
               "Accept update_mask paths metadata.display_name and spec");
  app.add_flag("--reject-unknown-fields", opts.reject_unknown_fields,
               "400 on unknown fields in sandbox bodies");
  app.add_option("--exec-home", opts.exec_home_env, "$HOME for exec-sync commands (default unset)");
  app.add_option("--builtin-codex", f.builtin_codex,
                 "Make this binary the sandboxes' built-in codex instead of the stand-in (e.g. "
                 "the real codex from scripts/install-deps.sh; not under /tmp)")
      ->check(CLI::ExistingFile);
  app.add_flag("--no-mount-namespace", f.no_namespace,
               "Rewrite /home/sandbox-agent paths instead of using a mount namespace");
}

void AddOpenAiFlags(CLI::App& app, EmulatorFlags& f) {
  sbx::emulator::OpenAiEmulator::Options& openai_opts = f.openai_opts;
  app.add_option("--openai-port", f.openai_port,
                 "Also serve the OpenAI Agents API on this port (0 = any free port)");
  app.add_option("--openai-api-key", f.openai_keys,
                 "Accepted OpenAI application key (repeatable; default sk-emulator)");
  app.add_option("--openai-executor-key", f.executor_keys,
                 "Accepted environment (executor) key (repeatable; default sk-exec-emulator)");
  app.add_flag("--openai-accept-any-key", openai_opts.accept_any_api_key,
               "Accept any application and executor key (demos)");
  AddDuration(app, "--disconnected-after", openai_opts.disconnected_after,
              "Environment turns disconnected this long after its executor dropped (default 20s)");
  AddDuration(app, "--connection-wait", openai_opts.connection_wait,
              "How long input waits for an executor to connect (default 5m)");
  app.add_flag("--strict-session-delete,!--no-strict-session-delete",
               openai_opts.strict_session_delete,
               "Session DELETE answers 409 while a turn runs and for a session whose first turn "
               "never ran (\"no durably bound CCA root\"), as observed on the real service "
               "(default on)");
  app.add_option("--openai-rate-limit", openai_opts.requests_per_second,
                 "OpenAI API requests per second (0 = unlimited); above it 429 + Retry-After");
  app.add_option("--registration-failure", f.registration_failure,
                 "Executor registration fails: none|ip (401)|scope (403)")
      ->check(CLI::IsMember({"none", "ip", "scope"}));
  app.add_option("--webhook-url", openai_opts.webhook_url,
                 "POST signed agent.session.* webhooks to this URL (also settable by "
                 "POST /_emulator/openai/webhooks)");
  app.add_option("--webhook-secret", openai_opts.webhook_secret,
                 "Webhook signing secret, whsec_<base64 key> (env OPENAI_WEBHOOK_SECRET)")
      ->envname("OPENAI_WEBHOOK_SECRET");
  app.add_option("--webhook-max-attempts", openai_opts.webhook_max_attempts,
                 "Attempts per webhook delivery before giving up (default 10)")
      ->check(CLI::Range(1, 1000));
  AddDuration(app, "--webhook-retry-base", openai_opts.webhook_retry_base,
              "First webhook retry delay, doubling per attempt (default 1s)");
  AddDuration(app, "--webhook-retry-cap", openai_opts.webhook_retry_cap,
              "Longest webhook retry delay (default 5m)");
  app.add_option("--ip-allowlist", f.ip_allowlist,
                 "Turn on the OpenAI IP allowlist: comma-separated IPv4 addresses or CIDR blocks "
                 "(\"\" = allow none); a registration from an emulated sandbox whose egress "
                 "address is not listed gets 401 \"IP is not authorized\"");
}

// What the parsed flags leave to resolve: the allowlist, the keys, the registration failure.
void ResolveOpenAiFlags(const CLI::App& app, EmulatorFlags& f) {
  if (app.count("--ip-allowlist") > 0) {
    f.openai_opts.ip_allowlist_enabled = true;
    for (size_t start = 0; start < f.ip_allowlist.size();) {
      size_t comma = f.ip_allowlist.find(',', start);
      if (comma == std::string::npos) {
        comma = f.ip_allowlist.size();
      }
      if (comma > start) {
        f.openai_opts.ip_allowlist.push_back(f.ip_allowlist.substr(start, comma - start));
      }
      start = comma + 1;
    }
  }
  if (!f.openai_keys.empty()) {
    f.openai_opts.api_keys = f.openai_keys;
  }
  if (!f.executor_keys.empty()) {
    f.openai_opts.executor_keys = f.executor_keys;
  }
  f.openai_opts.accept_any_executor_key = f.openai_opts.accept_any_api_key;
  using RegistrationFailure = sbx::emulator::OpenAiEmulator::RegistrationFailure;
  f.openai_opts.registration_failure =
      f.registration_failure == "ip"      ? RegistrationFailure::kIpNotAuthorized
      : f.registration_failure == "scope" ? RegistrationFailure::kMissingScope
                                          : RegistrationFailure::kNone;
}

// Both halves until SIGTERM/SIGINT.
int Serve(EmulatorFlags& f) {
  sbx::emulator::DatabricksEmulator::Options& opts = f.opts;
  sbx::emulator::OpenAiEmulator::Options& openai_opts = f.openai_opts;
  // stdout carries only the URL lines a caller parses; logs go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("sbx-emulator"));
  if (!f.tokens.empty()) {
    opts.tokens = f.tokens;
  }
  opts.prefer_mount_namespace = !f.no_namespace;
  if (opts.root_dir.empty()) {
    char tmpl[] = "/tmp/sbx-emulator-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      std::cerr << "sbx-emulator: cannot create a temporary root directory\n";
      return 1;
    }
    opts.root_dir = tmpl;
  }

  // Block the shutdown signals before any thread starts, so that only sigwait() sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  InstallCodexWrapper(opts.bin_dir.empty() ? std::filesystem::path(opts.root_dir) / "bin"
                                           : std::filesystem::path(opts.bin_dir),
                      f.builtin_codex);
  sbx::emulator::DatabricksEmulator databricks(opts);
  auto port = databricks.Start(f.host, f.databricks_port);
  if (!port.ok()) {
    std::cerr << "sbx-emulator: " << port.status() << "\n";
    return 1;
  }
  std::cout << "databricks: " << databricks.base_url() << std::endl;
  std::cout << "root: " << opts.root_dir << std::endl;

  // One set of counters and faults for both APIs (/_emulator/counters on either port).
  openai_opts.faults = &databricks.faults();
  // A registration from inside an emulated sandbox comes from that sandbox's egress address.
  openai_opts.caller_address = [&databricks](const std::string& peer, int peer_port,
                                             int local_port) {
    return databricks.EgressAddressOf(peer, peer_port, local_port);
  };
  std::unique_ptr<sbx::emulator::OpenAiEmulator> openai;
  if (f.openai_port >= 0) {
    openai = std::make_unique<sbx::emulator::OpenAiEmulator>(openai_opts);
    auto bound = openai->Start(f.host, f.openai_port);
    if (!bound.ok()) {
      std::cerr << "sbx-emulator: " << bound.status() << "\n";
      databricks.Stop();
      return 1;
    }
    std::cout << "openai: " << openai->base_url() << std::endl;
  }

  int sig = 0;
  sigwait(&signals, &sig);
  if (openai) {
    openai->Stop();
  }
  databricks.Stop();
  return 0;
}

int Main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "executor") {
    return RunExecutor(argc - 1, argv + 1);
  }
  CLI::App app{"sbx-emulator: local emulator of the Databricks Sandbox API for tests and demos"};
  EmulatorFlags flags;
  AddDatabricksFlags(app, flags);
  AddOpenAiFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  ResolveOpenAiFlags(app, flags);
  return Serve(flags);
}

}  // namespace

int main(int argc, char** argv) {
  return sbx::cli::RunGuarded("sbx-emulator", [&] { return Main(argc, argv); });
}
