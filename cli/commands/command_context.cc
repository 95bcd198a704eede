#include "cli/commands/command_context.h"

#include <pwd.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "api/duration.h"
#include "api/kinds.h"
#include "api/validation.h"
#include "cli/commands/client_config.h"
#include "cli/commands/terminal_text.h"
#include "controller/apiclient/http_store.h"
#include "controller/cloud/http/cpprest_tls.h"
#include "controller/cloud/http/http_transport.h"
#include "controller/store/open_store.h"

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

controller::WriteAudit CommandContext::WriteBy() const {
  std::string user;
  if (const passwd* pw = getpwuid(geteuid()); pw != nullptr && pw->pw_name != nullptr) {
    user = pw->pw_name;
  } else {
    user = "uid" + std::to_string(geteuid());
  }
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) {
    host[0] = '\0';
  }
  return {user + "@" + (host[0] != '\0' ? std::string(host.data()) : std::string("localhost")),
          "local", verb_, "cli"};
}

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

std::string CommandContext::ConfigPath() const {
  return options_.config_path.empty() ? DefaultClientConfigPath() : options_.config_path;
}

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

struct Connection {
  std::string server;
  std::string token;
  std::string ca_file;
};

// Where the verbs go: --db; else a server named by --server, $SBX_SERVER or --context; else
// $SBX_DB; else the config's current-context; else the default file. A token is used only with the
// server it came with: a context's token never goes to a
// --server or $SBX_SERVER that is not the context's own.
api::StatusOr<std::optional<Connection>> ResolveConnection(const GlobalOptions& options,
                                                           const std::string& config_path) {
  if (!options.db_path.empty()) {
    return std::optional<Connection>();  // --db: the local file, whatever else is set
  }
  Connection c;
  c.server = !options.server.empty() ? options.server : Env("SBX_SERVER");
  c.token = !options.token.empty() ? options.token : Env("SBX_TOKEN");
  c.ca_file = options.certificate_authority;
  const bool want_context = !options.context.empty();
  if (c.server.empty() && !want_context && !Env("SBX_DB").empty()) {
    return std::optional<Connection>();  // $SBX_DB names a file: stronger than a config default
  }
  if (c.server.empty() || c.token.empty() || want_context) {
    ASSIGN_OR_RETURN(ClientConfig config, LoadClientConfig(config_path));
    const std::string name = want_context ? options.context : config.current_context;
    const ClientContext* ctx = name.empty() ? nullptr : config.Find(name);
    if (want_context && ctx == nullptr) {
      return api::NotFoundError("context \"" + name + "\" not found in " + config_path);
    }
    if (ctx != nullptr && (c.server.empty() || c.server == ctx->server || want_context)) {
      if (c.server.empty() || want_context) {
        c.server = ctx->server;
      }
      if (c.token.empty() && c.server == ctx->server) {
        c.token = ctx->token;
      }
      if (c.ca_file.empty() && c.server == ctx->server) {
        c.ca_file = ctx->certificate_authority;
      }
    }
  }
  if (c.server.empty()) {
    return std::optional<Connection>();
  }
  if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0) {
    return api::InvalidArgumentError("server \"" + c.server +
                                     "\": must start with https:// (or http:// on loopback)");
  }
  if (c.server.rfind("http://", 0) == 0 && !api::IsLoopbackUrl(c.server)) {
    return api::InvalidArgumentError("server \"" + c.server +
                                     "\": refusing to send a token over plain http to a host "
                                     "that is not loopback; use https://");
  }
  if (c.token.empty()) {
    return api::InvalidArgumentError("server " + c.server +
                                     ": no token (--token, $SBX_TOKEN or the context's token)");
  }
  return std::optional<Connection>(std::move(c));
}

}  // namespace

api::StatusOr<controller::Store*> CommandContext::store() {
  if (store_ != nullptr) {
    return store_.get();
  }
  ASSIGN_OR_RETURN(std::optional<Connection> connection, ResolveConnection(options_, ConfigPath()));
  if (connection) {
    controller::http::CppRestTlsOptions tls{connection->ca_file};
    transport_ = controller::http::MakeCppRestTransport(tls);
    streaming_ = controller::http::MakeCppRestStreamingTransport(tls);
    auto remote = std::make_unique<controller::apiclient::HttpStore>(
        *transport_, *streaming_,
        controller::apiclient::HttpStoreOptions{connection->server, connection->token});
    remote_ = remote.get();
    store_ = std::move(remote);
    return store_.get();
  }
  const std::string path = DbPath();
  // A postgres:// URL is shown with its password redacted (and PostgresStore's errors already
  // name it so); a file path as it is.
  const std::string shown = controller::DisplayDatabase(path);
  const auto annotate = [&shown](const api::Status& s) {
    if (s.message().find(shown) != std::string::npos) {
      return s;
    }
    return s.Annotate("database \"" + shown + "\"");
  };
  // SQLite: the store creates missing directories itself, 0700 (and the file 0600).
  auto opened = controller::OpenStore(path);
  if (!opened.ok()) {
    return annotate(opened.status());
  }
  store_ = std::move(opened).value();
  return store_.get();
}

void CommandContext::SetStoreForTesting(std::unique_ptr<controller::Store> store) {
  remote_ = nullptr;
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

std::string TypeName(api::Kind kind) { return std::string(api::KindInfoOf(kind).singular); }

std::string ResourceName(api::Kind kind) { return std::string(api::KindInfoOf(kind).plural); }

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
