#include "cli/commands/edit_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "api/codec.h"
#include "api/defaults.h"
#include "cli/commands/object_update.h"

extern char** environ;

namespace sbx::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kHeader[] =
    "# Please edit the object below. Lines beginning with a '#' at the top will be ignored,\n"
    "# and an empty file will abort the edit. If an error occurs while saving this file will be\n"
    "# reopened with the relevant failures.\n"
    "#\n";

// The text without the comment (and blank) lines at its top.
std::string WithoutLeadingComments(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    const std::string_view line = std::string_view(text).substr(pos, end - pos);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && line[first] != '#') {
      break;
    }
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  return text.substr(pos);
}

std::string EditorCommand() {
  for (const char* name : {"SBX_EDITOR", "EDITOR"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') {
      return value;
    }
  }
  return "vi";
}

// Runs the editor on `path`, waiting for it, on the user's terminal.
api::Status RunEditor(const std::string& path) {
  const std::string editor = EditorCommand();
  const std::string script = editor + " \"$1\"";
  std::vector<std::string> args = {"/bin/sh", "-c", script, "sbxctl-edit", path};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) != 0) {
    return api::InternalError("cannot start the editor \"" + editor + "\"");
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return api::InternalError("cannot wait for the editor \"" + editor + "\"");
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return api::InvalidArgumentError(
        "the editor \"" + editor + "\" " +
        (WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                           : "was killed by signal " + std::to_string(WTERMSIG(status))) +
        "; nothing was changed");
  }
  return api::OkStatus();
}

api::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return api::InvalidArgumentError("cannot read \"" + path + "\"");
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

api::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return out ? api::OkStatus() : api::InternalError("cannot write \"" + path + "\"");
}

// The edited object, or every problem with it, one per line.
api::StatusOr<api::Object> Decode(const std::string& text, const std::string& path,
                                  const api::Object& original) {
  ASSIGN_OR_RETURN(std::vector<api::Manifest> manifests, api::DecodeManifests(text, path));
  if (manifests.size() != 1) {
    return api::InvalidArgumentError("expected one object, found " +
                                     std::to_string(manifests.size()));
  }
  api::Manifest& m = manifests.front();
  if (api::KeyOf(m.object) != api::KeyOf(original)) {
    return api::InvalidArgumentError(
        "kind, metadata.name and metadata.namespace cannot be changed (this is " +
        QualifiedName(api::KeyOf(original)) + ")");
  }
  api::ApplyDefaults(m.object);
  const api::Status valid = api::Validate(m.object, CommandValidationOptions());
  if (!valid.ok()) {
    std::string lines;
    std::istringstream problems(valid.message());
    std::string line;
    while (std::getline(problems, line)) {
      if (!line.empty()) {
        lines += (lines.empty() ? "" : "\n") +
                 api::LocateError(m, api::Status(valid.code(), line)).message();
      }
    }
    return api::InvalidArgumentError(lines);
  }
  return WithUserFields(original, std::move(m.object));
}

std::string ErrorComment(const api::ObjectKey& key, const api::Status& status) {
  std::string out = "# " + ResourceName(key.kind) + " \"" + key.name + "\" was not valid:\n";
  std::istringstream lines(status.message());
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty()) {
      out += "# * " + line + "\n";
    }
  }
  return out + "#\n";
}

}  // namespace

int RunEdit(CommandContext& ctx, const EditCommandOptions& options) {
  auto keys = ResolveTargets(options.args, ctx.options().namespace_);
  if (!keys.ok()) {
    return ctx.Fail(keys.status());
  }
  if (keys->size() != 1) {
    return ctx.Fail(api::InvalidArgumentError("edit takes one object (KIND NAME or KIND/NAME)"));
  }
  const api::ObjectKey key = keys->front();
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  auto original = (*store)->Get(key);
  if (!original.ok()) {
    return FailUpdate(ctx, original.status().code() == api::StatusCode::kNotFound
                               ? api::NotFoundError(NotFoundMessage(key))
                               : original.status());
  }
  const std::string original_yaml = api::EncodeObjectYaml(*original);

  // Private to the user (mkstemps: 0600), kept only when it holds an edit that was not saved.
  std::string path = (fs::temp_directory_path() / "sbxctl-edit-XXXXXX.yaml").string();
  const int fd = mkstemps(path.data(), 5);
  if (fd < 0) {
    return ctx.Fail(api::InternalError("cannot create a temporary file in " +
                                       fs::temp_directory_path().string()));
  }
  close(fd);
  const auto fail_keeping_copy = [&](const api::Status& status) {
    const int code = ctx.Fail(status);
    ctx.err() << "A copy of your changes has been stored to \"" << path << "\"\n";
    return code;
  };
  const auto finish = [&](int code) {
    std::error_code ignored;
    fs::remove(path, ignored);
    return code;
  };

  std::string errors;  // comment lines on top of the next round
  std::string body = original_yaml;
  std::optional<std::string> last_invalid;
  for (;;) {
    std::string text = kHeader;
    text.append(errors).append(body);
    if (const api::Status written = WriteFile(path, text); !written.ok()) {
      return finish(ctx.Fail(written));
    }
    if (const api::Status edited = RunEditor(path); !edited.ok()) {
      return finish(ctx.Fail(edited));
    }
    auto saved = ReadFile(path);
    if (!saved.ok()) {
      return finish(ctx.Fail(saved.status()));
    }
    const std::string edited = WithoutLeadingComments(*saved);
    if (edited.find_first_not_of(" \t\r\n") == std::string::npos || edited == original_yaml) {
      ctx.out() << "Edit cancelled, no changes made.\n";
      return finish(kExitOk);
    }
    if (last_invalid && edited == *last_invalid) {
      return fail_keeping_copy(
          api::InvalidArgumentError("Edit cancelled, no valid changes were saved."));
    }
    // The saved text itself, so that a line number in an error is a line of that file.
    auto desired = Decode(*saved, path, *original);
    if (!desired.ok()) {
      errors = ErrorComment(key, desired.status());
      body = edited;
      last_invalid = edited;
      continue;
    }
    auto written = WriteObject(ctx, **store, std::move(desired).value());
    if (!written.ok()) {
      return fail_keeping_copy(written.status());
    }
    if (written->action == controller::ApplyAction::kUnchanged) {
      ctx.out() << "Edit cancelled, no changes made.\n";
    } else {
      ctx.out() << QualifiedName(key) << " edited\n";
    }
    return finish(kExitOk);
  }
}

void AddEditCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<EditCommandOptions>();
  CLI::App* sub = app.add_subcommand("edit", "Edit an object in $EDITOR and apply it when saved");
  sub->add_option("args", options->args, "KIND NAME or KIND/NAME");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunEdit(ctx, *options); }; });
}

}  // namespace sbx::cli
