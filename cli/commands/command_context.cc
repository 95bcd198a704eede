#include "cli/commands/command_context.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "api/duration.h"
#include "cli/commands/terminal_text.h"
#include "controller/store/sqlite_store.h"

namespace sbx::cli {

namespace fs = std::filesystem;

std::string DefaultDbPath() {
  const char* xdg = std::getenv("XDG_STATE_HOME");
  if (xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "sbx" / "sbx.db").string();
  }
  const char* home = std::getenv("HOME");
  const std::string base = (home != nullptr && *home != '\0') ? home : ".";
  return (fs::path(base) / ".local" / "state" / "sbx" / "sbx.db").string();
}

CommandContext::CommandContext(std::ostream& out, std::ostream& err, controller::Clock& clock,
                               std::function<bool()> interrupted)
    : out_(out), err_(err), in_(&std::cin), clock_(clock), interrupted_(std::move(interrupted)) {}

CommandContext::~CommandContext() = default;

std::string CommandContext::DbPath() const {
  if (!options_.db_path.empty()) {
    return options_.db_path;
  }
  const char* env = std::getenv("SBX_DB");
  if (env != nullptr && *env != '\0') {
    return env;
  }
  return DefaultDbPath();
}

api::StatusOr<controller::Store*> CommandContext::store() {
  if (store_ != nullptr) {
    return store_.get();
  }
  const std::string path = DbPath();
  const auto annotate = [&path](const api::Status& s) {
    if (s.message().find(path) != std::string::npos) {
      return s;
    }
    return s.Annotate("database \"" + path + "\"");
  };
  // The store creates missing directories itself, 0700 (and the file 0600).
  auto opened = controller::SqliteStore::Open(path);
  if (!opened.ok()) {
    return annotate(opened.status());
  }
  store_ = std::move(opened).value();
  return store_.get();
}

void CommandContext::SetStoreForTesting(std::unique_ptr<controller::Store> store) {
  store_ = std::move(store);
}

std::optional<std::string> CommandContext::ListNamespace() const {
  if (options_.all_namespaces) {
    return std::nullopt;
  }
  return options_.namespace_;
}

void CommandContext::PrintError(std::string_view line) {
  err_ << "error: " << EscapeTerminalText(line, TerminalLayout::kSingleLine) << "\n";
}

int CommandContext::Fail(const api::Status& status) {
  std::istringstream lines(status.message());
  std::string line;
  bool any = false;
  while (std::getline(lines, line)) {
    if (!line.empty()) {
      PrintError(line);
      any = true;
    }
  }
  if (!any) {
    PrintError(status.ToString());
  }
  exit_code = kExitError;
  return kExitError;
}

std::string TypeName(api::Kind kind) {
  switch (kind) {
    case api::Kind::kWorkspace:
      return "workspace";
    case api::Kind::kSandbox:
      return "sandbox";
    case api::Kind::kAgentWorker:
      return "agentworker";
    case api::Kind::kAgentTask:
      return "agenttask";
  }
  return "unknown";
}

std::string ResourceName(api::Kind kind) {
  switch (kind) {
    case api::Kind::kWorkspace:
      return "workspaces";
    case api::Kind::kSandbox:
      return "sandboxes";
    case api::Kind::kAgentWorker:
      return "agentworkers";
    case api::Kind::kAgentTask:
      return "agenttasks";
  }
  return "unknown";
}

std::string QualifiedName(const api::ObjectKey& key) { return TypeName(key.kind) + "/" + key.name; }

std::string NotFoundMessage(const api::ObjectKey& key) {
  return "Error from server (NotFound): " + ResourceName(key.kind) + " \"" + key.name +
         "\" not found";
}

api::StatusOr<KindAndName> ParseKindAndName(std::string_view text) {
  KindAndName out;
  std::string_view kind_text = text;
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    kind_text = text.substr(0, slash);
    out.name = std::string(text.substr(slash + 1));
    if (out.name.empty()) {
      return api::InvalidArgumentError("missing name after \"/\" in \"" + std::string(text) + "\"");
    }
  }
  ASSIGN_OR_RETURN(out.kind, api::ParseKind(kind_text));
  return out;
}

api::StatusOr<std::vector<api::ObjectKey>> ResolveTargets(const std::vector<std::string>& args,
                                                          const std::string& namespace_) {
  std::vector<api::ObjectKey> keys;
  if (args.empty()) {
    return api::InvalidArgumentError("you must specify the type of resource and its name");
  }
  if (args[0].find('/') != std::string::npos) {
    for (const std::string& arg : args) {
      ASSIGN_OR_RETURN(KindAndName kn, ParseKindAndName(arg));
      if (kn.name.empty()) {
        return api::InvalidArgumentError(
            "there is no need to specify a resource type as a "
            "separate argument when passing arguments in "
            "resource/name form");
      }
      keys.push_back(api::ObjectKey{kn.kind, namespace_, kn.name});
    }
    return keys;
  }
  ASSIGN_OR_RETURN(api::Kind kind, api::ParseKind(args[0]));
  for (size_t i = 1; i < args.size(); ++i) {
    keys.push_back(api::ObjectKey{kind, namespace_, args[i]});
  }
  if (keys.empty()) {
    return api::InvalidArgumentError("you must specify the name of the " + TypeName(kind));
  }
  return keys;
}

api::StatusOr<api::ObjectKey> ResolveOneTarget(std::string_view text, api::Kind kind,
                                               const std::string& namespace_) {
  if (text.find('/') == std::string_view::npos) {
    if (text.empty()) {
      return api::InvalidArgumentError("you must specify the name of the " + TypeName(kind));
    }
    return api::ObjectKey{kind, namespace_, std::string(text)};
  }
  ASSIGN_OR_RETURN(KindAndName kn, ParseKindAndName(text));
  if (kn.kind != kind) {
    const std::string type = TypeName(kind);
    const bool vowel = type.find_first_of("aeiou") == 0;
    return api::InvalidArgumentError("\"" + std::string(text) + "\" is not " +
                                     (vowel ? "an " : "a ") + type);
  }
  if (kn.name.empty()) {
    return api::InvalidArgumentError("you must specify the name of the " + TypeName(kind));
  }
  return api::ObjectKey{kind, namespace_, kn.name};
}

api::StatusOr<std::map<std::string, std::string>> ParseLabelSelector(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view term = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? text.size() + 1 : comma + 1;
    if (term.empty()) {
      continue;
    }
    if (term.find("!=") != std::string_view::npos) {
      return api::InvalidArgumentError("unsupported label selector \"" + std::string(term) +
                                       "\": only equality (key=value) is supported");
    }
    const size_t eq = term.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return api::InvalidArgumentError("invalid label selector \"" + std::string(term) +
                                       "\" (expected key=value[,key2=value2])");
    }
    std::string_view value = term.substr(eq + 1);
    if (!value.empty() && value.front() == '=') {
      value.remove_prefix(1);  // k==v
    }
    out[std::string(term.substr(0, eq))] = std::string(value);
  }
  return out;
}

api::StatusOr<std::chrono::seconds> ParseTimeout(std::string_view text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos &&
      text.size() < 10) {
    return std::chrono::seconds(std::stoll(std::string(text)));
  }
  auto parsed = api::ParseDuration(text);
  if (!parsed.ok()) {
    return api::InvalidArgumentError("invalid --timeout: " + parsed.status().message());
  }
  return *parsed;
}

}  // namespace sbx::cli
