#include "cli/commands/migrate_command.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <string_view>
#include <system_error>

#include "controller/store/open_store.h"
#include "controller/store/postgres_store.h"
#include "controller/store/sqlite_store.h"
#include "controller/store/store_copy.h"

namespace sbx::cli {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSqlitePrefix = "sqlite:";

// What OpenStore takes: a postgres:// URL as is, `sqlite:PATH` as PATH.
std::string StoreArgument(const std::string& text) {
  if (text.starts_with(kSqlitePrefix)) {
    return text.substr(kSqlitePrefix.size());
  }
  return text;
}

bool IsFile(const std::string& db) { return !controller::IsPostgresUrl(db) && db != ":memory:"; }

// Whether two --db values name one store: the same file (also through another path to it), or
// the same URL.
bool SameStore(const std::string& a, const std::string& b) {
  if (IsFile(a) && IsFile(b)) {
    std::error_code ec;
    if (fs::exists(a, ec) && fs::exists(b, ec)) {
      return fs::equivalent(a, b, ec);
    }
    return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
  }
  return a == b;
}

}  // namespace

int RunMigrate(CommandContext& ctx, const MigrateCommandOptions& options) {
  const std::string from = StoreArgument(options.from);
  const std::string to = StoreArgument(options.to);
  const std::string from_shown = controller::DisplayDatabase(from);
  const std::string to_shown = controller::DisplayDatabase(to);
  if (from.empty() || to.empty()) {
    return ctx.Fail(api::InvalidArgumentError("migrate needs --from and --to"));
  }
  std::error_code ec;
  if (IsFile(from) && !fs::is_regular_file(from, ec)) {
    // SqliteStore::Open would create it: a typo must not copy an empty store.
    return ctx.Fail(
        api::NotFoundError("source database " + from_shown + " does not exist (or is no file)"));
  }
  if (IsFile(from)) {
    // Read-only first: Open would turn an empty file or another program's database into an sbx
    // store (#24).
    if (api::Status sbx = controller::SqliteStore::CheckIsSbxFile(from); !sbx.ok()) {
      return ctx.Fail(sbx);
    }
  }
  if (SameStore(from, to)) {
    return ctx.Fail(
        api::InvalidArgumentError("--from and --to name the same store (" + from_shown + ")"));
  }

  auto source = controller::OpenStore(from);
  if (!source.ok()) {
    return ctx.Fail(source.status());
  }
  controller::CopyOptions copy;
  copy.dry_run = options.dry_run;
  copy.ignore_lease = options.ignore_lease;

  // Before the destination is opened (and, for a file, created); CopyStore checks it again.
  if (auto lease = controller::CheckSourceLease(**source, copy, ctx.clock()); !lease.ok()) {
    return ctx.Fail(lease);
  }
  api::StatusOr<controller::CopyCounts> counts = api::InternalError("unset");
  const bool creates_file = IsFile(to) && !fs::exists(to, ec);
  if (options.dry_run && creates_file) {
    // Nothing to rehearse against, and a dry run must not create the file.
    counts = controller::CountStore(**source);
  } else {
    {
      auto destination = controller::OpenStore(to);
      counts = destination.ok() ? controller::CopyStore(**source, **destination, copy, ctx.clock())
                                : api::StatusOr<controller::CopyCounts>(destination.status());
    }  // closed before a removal below
    if (!counts.ok() && creates_file) {
      // The copy rolled back (a source refused for a name that is not a DNS label, #24, or any
      // other error): the file this migrate created goes too, so a failed migrate leaves nothing.
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        fs::remove(to + suffix, ec);
      }
    }
  }
  if (!counts.ok()) {
    return ctx.Fail(counts.status());
  }
  ctx.out() << (options.dry_run ? "would copy " : "copied ")
            << controller::FormatCopyCounts(*counts) << " from " << from_shown << " to " << to_shown
            << "\n";
  return kExitOk;
}

void AddMigrateCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<MigrateCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "migrate",
      "Copy a whole store (objects, inventory, events, task logs, artifacts) into an empty one: "
      "migrate --from sqlite:PATH --to postgres://…");
  sub->add_option("--from", options->from, "the store to copy: sqlite:PATH, PATH or postgres://…")
      ->required();
  sub->add_option("--to", options->to,
                  "the empty store to copy into: sqlite:PATH, PATH or "
                  "postgres://… (PATH is created if absent)")
      ->required();
  sub->add_flag("--dry-run", options->dry_run,
                "rehearse the copy and print what it would copy; write nothing");
  sub->add_flag("--ignore-lease", options->ignore_lease,
                "copy although an sbxd holds the source's lease (what it writes afterwards is "
                "lost)");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunMigrate(ctx, *options); }; });
}

}  // namespace sbx::cli
