// sbxctl: the user's CLI (DESIGN §4). Wires the verbs of cli/commands/ into one CLI11 app and
// runs the chosen one against the store named by --db / $SBX_DB.
//
// To add a verb (exec, logs, …): write cli/commands/<verb>_command.{h,cc} with a
// Run<Verb>(CommandContext&, const <Verb>CommandOptions&) and an Add<Verb>Command(app, ctx)
// that sets ctx.action, list the .cc in cli/CMakeLists.txt, and add one line below.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <exception>
#include <iostream>
#include <string_view>

#include "cli/commands/apply_command.h"
#include "cli/commands/artifacts_command.h"
#include "cli/commands/audit_command.h"
#include "cli/commands/cancel_command.h"
#include "cli/commands/command_context.h"
#include "cli/commands/completion_command.h"
#include "cli/commands/config_command.h"
#include "cli/commands/delete_command.h"
#include "cli/commands/describe_command.h"
#include "cli/commands/diff_command.h"
#include "cli/commands/edit_command.h"
#include "cli/commands/events_command.h"
#include "cli/commands/exec_command.h"
#include "cli/commands/explain_command.h"
#include "cli/commands/get_command.h"
#include "cli/commands/label_command.h"
#include "cli/commands/logs_command.h"
#include "cli/commands/migrate_command.h"
#include "cli/commands/patch_command.h"
#include "cli/commands/run_command.h"
#include "cli/commands/scale_command.h"
#include "cli/commands/top_command.h"
#include "cli/commands/version_command.h"
#include "cli/commands/wait_command.h"
#include "cli/main_guard.h"

namespace {

// Set by SIGINT/SIGTERM; long-running verbs (get -w, wait) poll it and exit cleanly.
volatile std::sig_atomic_t g_interrupted = 0;

void OnSignal(int) { g_interrupted = 1; }

// The program itself; main (at the end) runs it behind a catch-all.
int Main(int argc, char** argv) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  sbx::controller::SystemClock clock;
  sbx::cli::CommandContext ctx(std::cout, std::cerr, clock, [] { return g_interrupted != 0; });
  ctx.set_terminals(isatty(STDOUT_FILENO) == 1, isatty(STDERR_FILENO) == 1);

  CLI::App app("sbxctl controls sbx objects: Sandboxes, AgentWorkers, AgentTasks and Workspaces.",
               "sbxctl");
  app.fallthrough();
  app.require_subcommand(1);
  auto& global = ctx.options();
  app.add_option("--db", global.db_path,
                 "SQLite database file, or postgres://user@host:port/db (env SBX_DB; default "
                 "$XDG_STATE_HOME/sbx/sbx.db)");
  app.add_option("-n,--namespace", global.namespace_, "namespace (default \"default\")");
  app.add_flag("-A,--all-namespaces", global.all_namespaces, "list across all namespaces");
  app.add_option("--max-manifest-bytes", global.max_manifest_bytes,
                 "refuse a manifest file (or stdin) larger than this (default 8 MiB)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  app.add_option("--server", global.server,
                 "sbxd's API (https://host:port) instead of a database file (env SBX_SERVER)");
  app.add_option("--token", global.token,
                 "bearer token for --server (env SBX_TOKEN; prefer it or a context: argv is "
                 "visible to other users)");
  app.add_option("--context", global.context, "the context of the config file to use");
  app.add_option("--certificate-authority", global.certificate_authority,
                 "PEM file of the CA that signed the server's certificate");
  app.add_option("--config", global.config_path,
                 "client config (env SBX_CONFIG; default $XDG_CONFIG_HOME/sbx/config.yaml)");

  sbx::cli::AddApplyCommand(app, ctx);
  sbx::cli::AddDiffCommand(app, ctx);
  sbx::cli::AddGetCommand(app, ctx);
  sbx::cli::AddDescribeCommand(app, ctx);
  sbx::cli::AddDeleteCommand(app, ctx);
  sbx::cli::AddLabelCommand(app, ctx);
  sbx::cli::AddAnnotateCommand(app, ctx);
  sbx::cli::AddPatchCommand(app, ctx);
  sbx::cli::AddEditCommand(app, ctx);
  sbx::cli::AddExplainCommand(app, ctx);
  sbx::cli::AddWaitCommand(app, ctx);
  sbx::cli::AddEventsCommand(app, ctx);
  sbx::cli::AddAuditCommand(app, ctx);
  sbx::cli::AddTopCommand(app, ctx);
  sbx::cli::AddExecCommand(app, ctx);
  sbx::cli::AddLogsCommand(app, ctx);
  sbx::cli::AddRunCommand(app, ctx);
  sbx::cli::AddScaleCommand(app, ctx);
  sbx::cli::AddCancelCommand(app, ctx);
  sbx::cli::AddArtifactsCommand(app, ctx);
  sbx::cli::AddMigrateCommand(app, ctx);
  sbx::cli::AddVersionCommand(app, ctx);
  sbx::cli::AddCompletionCommand(app, ctx);
  sbx::cli::AddConfigCommand(app, ctx);

  if (argc <= 1) {
    std::cout << app.help();
    return sbx::cli::kExitOk;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      return app.exit(e);
    }
    if (app.get_subcommands().empty()) {
      // No verb recognised: name the word the user typed, as kubectl does.
      for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--db" || arg == "-n" || arg == "--namespace" || arg == "--server" ||
            arg == "--token" || arg == "--context" || arg == "--certificate-authority" ||
            arg == "--config") {
          ++i;
          continue;
        }
        if (!arg.empty() && arg.front() != '-') {
          std::cerr << "error: unknown command \"" << arg
                    << "\" for \"sbxctl\" (see sbxctl --help)\n";
          return sbx::cli::kExitError;
        }
      }
    }
    std::cerr << "error: " << e.what() << "\n";
    return app.got_subcommand("diff") ? sbx::cli::kExitDiffError : sbx::cli::kExitError;
  }
  global.namespace_given = app.count("--namespace") > 0;
  if (!app.get_subcommands().empty()) {
    ctx.set_verb(app.get_subcommands().front()->get_name());
  }
  if (!ctx.action) {
    std::cerr << "error: no command given (see sbxctl --help)\n";
    return sbx::cli::kExitError;
  }
  const int code = ctx.action();
  std::cout.flush();
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  return sbx::cli::RunGuarded("sbxctl", [&] { return Main(argc, argv); });
}
