#include "cli/commands/artifacts_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "cli/commands/object_update.h"
#include "cli/commands/terminal_text.h"

namespace sbx::cli {
namespace {

namespace fs = std::filesystem;

std::string Shown(std::string_view text) {
  return EscapeTerminalText(text, TerminalLayout::kSingleLine);
}

std::string Errno(std::string_view what, const fs::path& path) {
  return std::string(what) + " " + path.string() + ": " + std::strerror(errno);
}

// `relative` (a collect path) as a path below `root`, or why it would leave root.
api::StatusOr<fs::path> PathBelow(const fs::path& root, std::string_view relative) {
  if (relative.empty()) {
    return api::InvalidArgumentError("empty path");
  }
  if (relative.find('\0') != std::string_view::npos) {
    return api::InvalidArgumentError("the path contains NUL");
  }
  const fs::path rel(relative);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) {
    return api::InvalidArgumentError("refusing an absolute path: it would be written outside " +
                                     root.string());
  }
  for (const fs::path& part : rel) {
    if (part == "..") {
      return api::InvalidArgumentError("refusing a path with \"..\": it would leave " +
                                       root.string());
    }
  }
  fs::path normal = rel.lexically_normal();
  if (normal.empty() || normal == "." || !normal.has_filename() || normal.filename() == ".") {
    return api::InvalidArgumentError("the path names a directory, not a file");
  }
  return normal;
}

// Creates the directories of `relative`'s parent below `root`, one by one, refusing any that is
// a symlink (it could point out of root) or not a directory.
api::Status MakeParents(const fs::path& root, const fs::path& relative) {
  fs::path at = root;
  for (const fs::path& part : relative.parent_path()) {
    at /= part;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(at, ec);
    if (st.type() == fs::file_type::not_found) {
      if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) {
        return api::UnavailableError(Errno("cannot create directory", at));
      }
      continue;
    }
    if (ec) {
      return api::UnavailableError("cannot inspect " + at.string() + ": " + ec.message());
    }
    if (st.type() == fs::file_type::symlink) {
      return api::InvalidArgumentError("refusing to write through the symlink " + at.string() +
                                       " (it may point out of " + root.string() + ")");
    }
    if (st.type() != fs::file_type::directory) {
      return api::FailedPreconditionError(at.string() + " exists and is not a directory");
    }
  }
  return api::OkStatus();
}

// Writes `bytes` to `target` through a temporary file beside it, renamed into place (a symlink
// at `target` is replaced, never followed).
api::Status WriteFileAtomically(const fs::path& target, std::string_view bytes) {
  std::string temp =
      (target.parent_path() / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    return api::UnavailableError(Errno("cannot create a file in", target.parent_path()));
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  std::string failure;
  if (::fchmod(fd, 0666 & ~mask) != 0) {
    failure = Errno("cannot write", target);
  }
  for (size_t done = 0; failure.empty() && done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      failure = Errno("cannot write", target);
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && failure.empty()) {
    failure = Errno("cannot write", target);
  }
  if (failure.empty() && ::rename(temp.c_str(), target.c_str()) != 0) {
    failure = Errno("cannot write", target);
  }
  if (!failure.empty()) {
    ::unlink(temp.c_str());
    return api::UnavailableError(failure);
  }
  return api::OkStatus();
}

}  // namespace

bool WriteArtifacts(CommandContext& ctx, controller::Store& store, const api::Object& task,
                    const std::string& dir) {
  const api::ObjectKey key = api::KeyOf(task);
  const auto& status = task.agent_task_status();
  // What the store holds is written; what the status lists with an error is reported; a file
  // the status lists but the store lacks (or the reverse) is not trusted silently.
  auto stored = store.ListArtifacts(task.metadata.uid);
  if (!stored.ok()) {
    ctx.PrintError(stored.status().message());
    return false;
  }
  std::map<std::string, std::string> errors;  // path → why it could not be collected
  for (const api::ArtifactStatus& a : status.artifacts) {
    if (!a.error.empty()) {
      errors[a.path] = a.error;
    }
  }
  if (stored->empty() && errors.empty()) {
    ctx.err() << QualifiedName(key) << " has no artifacts"
              << (api::IsFinished(status.phase)
                      ? ""
                      : " yet (" + std::string(api::TaskPhaseName(status.phase)) +
                            "; files are collected after the turn)")
              << "\n";
    return true;
  }
  const fs::path root = dir.empty() ? fs::path(".") : fs::path(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    ctx.PrintError("cannot create directory " + root.string() + ": " + ec.message());
    return false;
  }
  bool all_written = true;
  const auto fail = [&](std::string_view path, std::string_view why) {
    ctx.PrintError("artifact " + std::string(path) + ": " + std::string(why));
    all_written = false;
  };
  for (const controller::Store::Artifact& listed : *stored) {
    auto relative = PathBelow(root, listed.path);
    if (!relative.ok()) {
      fail(listed.path, relative.status().message());
      continue;
    }
    if (const api::Status made = MakeParents(root, *relative); !made.ok()) {
      fail(listed.path, made.message());
      continue;
    }
    auto artifact = store.GetArtifact(task.metadata.uid, listed.path);
    if (!artifact.ok()) {
      fail(listed.path, artifact.status().message());
      continue;
    }
    const fs::path target = root / *relative;
    if (const api::Status written = WriteFileAtomically(target, artifact->content); !written.ok()) {
      fail(listed.path, written.message());
      continue;
    }
    ctx.out() << "wrote " << Shown(target.string()) << " (" << artifact->content.size()
              << " bytes, sha256 " << Shown(artifact->sha256) << ")\n";
  }
  for (const auto& [path, why] : errors) {
    fail(path, why);
  }
  for (const api::ArtifactStatus& a : status.artifacts) {
    const bool in_store = std::any_of(stored->begin(), stored->end(),
                                      [&](const auto& s) { return s.path == a.path; });
    if (a.error.empty() && !in_store) {
      fail(a.path, "listed in the status but not in the store");
    }
  }
  return all_written;
}

int RunArtifacts(CommandContext& ctx, const ArtifactsCommandOptions& options) {
  auto key = ResolveOneTarget(options.target, api::Kind::kAgentTask, ctx.options().namespace_);
  if (!key.ok()) {
    return ctx.Fail(key.status());
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  auto task = (*store)->Get(*key);
  if (!task.ok()) {
    return FailUpdate(ctx, task.status().code() == api::StatusCode::kNotFound
                               ? api::NotFoundError(NotFoundMessage(*key))
                               : task.status());
  }
  return ctx.exit_code =
             WriteArtifacts(ctx, **store, *task, options.output_dir) ? kExitOk : kExitError;
}

void AddArtifactsCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<ArtifactsCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "artifacts", "Write the files an agent task collected: artifacts agenttask/NAME [-o DIR]");
  sub->add_option("target", options->target, "agenttask/NAME (or NAME)")->required();
  sub->add_option("-o,--output-dir", options->output_dir,
                  "directory to write DIR/<collect path> into")
      ->capture_default_str();
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunArtifacts(ctx, *options); }; });
}

}  // namespace sbx::cli
