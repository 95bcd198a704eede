#include "cli/commands/version_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <system_error>

#include "controller/store/postgres_store.h"
#include "controller/store/sqlite_store.h"

#ifndef SBX_VERSION
#error "SBX_VERSION must be defined by the build (the CMake project version)"
#endif

namespace sbx::cli {

std::string_view SbxVersion() { return SBX_VERSION; }

int RunVersion(CommandContext& ctx) {
  ctx.out() << "sbxctl v" << SbxVersion() << "\n";
  ctx.out() << "store schema: " << controller::SqliteStore::LatestSchemaVersion() << "\n";
  const std::string path = ctx.DbPath();
  std::error_code ec;
  if (controller::IsPostgresUrl(path)) {
    ctx.out() << "database: " << controller::RedactDatabaseUrl(path) << " (PostgreSQL, schema "
              << controller::PostgresStore::LatestSchemaVersion() << ")\n";
  } else if (std::filesystem::exists(path, ec)) {
    ctx.out() << "database: " << path << "\n";
  } else {
    ctx.out() << "database: " << path << " (not created yet)\n";
  }
  return kExitOk;
}

void AddVersionCommand(CLI::App& app, CommandContext& ctx) {
  CLI::App* sub = app.add_subcommand("version", "Print the version");
  sub->callback([&ctx] { ctx.action = [&ctx] { return RunVersion(ctx); }; });
}

}  // namespace sbx::cli
