// sbx-emulator: runs the local cloud emulators on loopback ports until SIGTERM/SIGINT.
// Prints one "<api>: <url>" line per API on stdout (flushed) once it is serving, then waits;
// on a signal it kills every sandbox process and exits 0. Flags: see emulator/README.md.
#include <signal.h>
#include <stdlib.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "emulator/databricks/databricks_emulator.h"

namespace {

using Millis = std::chrono::milliseconds;

// "250ms", "1.5s", "10m", "1h", or a bare number of seconds.
bool ParseFlagDuration(const std::string& text, Millis& out) {
  try {
    std::size_t used = 0;
    double v = std::stod(text, &used);
    std::string unit = text.substr(used);
    double scale = 0;
    if (unit == "ms")
      scale = 1;
    else if (unit == "s" || unit.empty())
      scale = 1000;
    else if (unit == "m")
      scale = 60'000;
    else if (unit == "h")
      scale = 3'600'000;
    if (scale == 0 || v < 0) return false;
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sbx-emulator: local emulator of the Databricks Sandbox API for tests and demos"};
  sbx::emulator::DatabricksEmulator::Options opts;
  std::string host = "127.0.0.1";
  int databricks_port = 0;
  std::vector<std::string> tokens;

  app.add_option("--host", host, "Address to listen on")->capture_default_str();
  app.add_option("--databricks-port", databricks_port, "Databricks API port (0 = any free port)")
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
              "Idle auto-stop when the sandbox sets none (default 10m; 0 = never)");
  AddDuration(app, "--default-exec-timeout", opts.default_execution_timeout,
              "exec-sync timeout when none is given (default 5m)");
  AddDuration(app, "--max-exec-timeout", opts.max_execution_timeout,
              "exec-sync timeout clamp (default 1h)");
  AddDuration(app, "--oauth-token-ttl", opts.oauth_token_ttl, "OAuth token lifetime (default 1h)");
  app.add_option("--exec-output-cap", opts.exec_output_cap_bytes,
                 "Max stdout+stderr bytes per exec-sync response")
      ->capture_default_str();
  app.add_option("--token", tokens, "Accepted PAT (repeatable; default dapi-emulator)");
  app.add_flag("--accept-any-token", opts.accept_any_token, "Accept any bearer token (demos)");
  app.add_option("--client-id", opts.oauth_client_id, "OAuth M2M client id")->capture_default_str();
  app.add_option("--client-secret", opts.oauth_client_secret, "OAuth M2M client secret");
  app.add_option("--workspace-id", opts.workspace_id, "Workspace id advertised by host metadata");
  app.add_option("--max-sandboxes", opts.max_sandboxes, "Workspace sandbox quota (0 = unlimited)")
      ->capture_default_str();
  app.add_option("--rate-limit", opts.requests_per_second,
                 "Workspace API requests per second (0 = unlimited)");
  app.add_flag("--reset-create-time-on-start", opts.reset_create_time_on_start,
               "start sets a fresh create_time");
  app.add_flag("--delete-via-stopping", opts.delete_via_stopping,
               "delete shows STOPPING for --stopping-delay before the sandbox is gone");
  app.add_flag("--accept-legacy-mask-paths", opts.accept_legacy_mask_paths,
               "Accept update_mask paths metadata.display_name and spec");
  app.add_flag("--reject-unknown-fields", opts.reject_unknown_fields,
               "400 on unknown fields in sandbox bodies");
  app.add_option("--exec-home", opts.exec_home_env, "$HOME for exec-sync commands (default unset)");
  bool no_namespace = false;
  app.add_flag("--no-mount-namespace", no_namespace,
               "Rewrite /home/sandbox-agent paths instead of using a mount namespace");
  // Room for --openai-port and the `executor` subcommand (stand-in codex), added later.
  CLI11_PARSE(app, argc, argv);

  // stdout carries only the URL lines a caller parses; logs go to stderr.
  spdlog::set_default_logger(spdlog::stderr_color_mt("sbx-emulator"));
  if (!tokens.empty()) opts.tokens = tokens;
  opts.prefer_mount_namespace = !no_namespace;
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

  sbx::emulator::DatabricksEmulator databricks(opts);
  auto port = databricks.Start(host, databricks_port);
  if (!port.ok()) {
    std::cerr << "sbx-emulator: " << port.status() << "\n";
    return 1;
  }
  std::cout << "databricks: " << databricks.base_url() << std::endl;
  std::cout << "root: " << opts.root_dir << std::endl;

  int sig = 0;
  sigwait(&signals, &sig);
  databricks.Stop();
  return 0;
}
