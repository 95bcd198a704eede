// CommandContext: what every sbxctl verb shares — the global flags (--db, -n, -A), the output
// streams, the clock, an interruption check (SIGINT/SIGTERM), and the store opened lazily from
// --db. Also the kubectl-like naming helpers ("sandbox/foo", `sandboxes "foo"`) and error lines.
//
// One CommandContext lives for one sbxctl invocation, built by the main; not thread-safe. It
// owns the store it opens; the streams and the clock are borrowed and must outlive it.
#pragma once

#include <chrono>
#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"
#include "controller/base/clock.h"
#include "controller/store/store.h"

namespace sbx::controller::apiclient {
class HttpStore;
}  // namespace sbx::controller::apiclient
namespace sbx::controller::http {
class HttpTransport;
class StreamingTransport;
}  // namespace sbx::controller::http

namespace sbx::cli {

// Exit codes, as kubectl: 0 success, 1 any error. `diff` uses 1 for "differences found" and
// kExitDiffError for errors, like diff(1).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitDiffFound = 1;
inline constexpr int kExitDiffError = 2;

struct GlobalOptions {
  std::string db_path;  // --db; empty = $SBX_DB, else DefaultDbPath()
  std::string namespace_ = std::string(api::kDefaultNamespace);  // -n
  bool namespace_given = false;                                  // -n was on the command line
  bool all_namespaces = false;                                   // -A
  size_t max_manifest_bytes = size_t{8} << 20;                   // --max-manifest-bytes
  // A server instead of a file (DESIGN §7.3). Which one: --db; else --server, $SBX_SERVER or
  // --context; else $SBX_DB (a file); else the config's current-context; else the default file.
  std::string server;
  std::string token;
  std::string context;
  std::string certificate_authority;  // --certificate-authority: PEM CA for the server
  std::string config_path;            // --config; empty = DefaultClientConfigPath()
};

// $XDG_STATE_HOME/sbx/sbx.db, else $HOME/.local/state/sbx/sbx.db.
std::string DefaultDbPath();

class CommandContext {
 public:
  CommandContext(std::ostream& out, std::ostream& err, controller::Clock& clock,
                 std::function<bool()> interrupted);
  ~CommandContext();

  GlobalOptions& options() { return options_; }
  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  // Standard input, for `-f -`. std::cin unless set.
  std::istream& in() { return *in_; }
  void set_in(std::istream& in) { in_ = &in; }
  controller::Clock& clock() { return clock_; }
  // Whether out() and err() are terminals (isatty), as the main found them; false unless set.
  // A program's own output (exec, logs) is escaped only on a terminal (terminal_text.h).
  bool out_is_terminal() const { return out_is_terminal_; }
  bool err_is_terminal() const { return err_is_terminal_; }
  void set_terminals(bool out_is_terminal, bool err_is_terminal) {
    out_is_terminal_ = out_is_terminal;
    err_is_terminal_ = err_is_terminal;
  }
  // True once the user asked to stop (SIGINT/SIGTERM); long-running verbs poll it.
  bool interrupted() const { return interrupted_ && interrupted_(); }

  // The database path in effect: --db, else $SBX_DB, else DefaultDbPath().
  std::string DbPath() const;
  // Opens the store once through OpenStore: a postgres:// URL is a PostgresStore; a path is an
  // SQLite file (created, with its missing parent directories, for the user only: see
  // SqliteStore::Open). Errors name the database (a URL with its password redacted):
  // `database "/x/sbx.db": file is not a database`.
  api::StatusOr<controller::Store*> store();
  // Lets tests (and future verbs) supply a store instead of opening --db.
  void SetStoreForTesting(std::unique_ptr<controller::Store> store);
  // The server's client when the verbs run against a server (after store() succeeded), else
  // nullptr: for what only the server does (exec and executor logs through sbxd).
  controller::apiclient::HttpStore* remote() { return remote_; }
  // The config file in effect: --config, else DefaultClientConfigPath().
  std::string ConfigPath() const;

  // The namespace to list in: unset with -A.
  std::optional<std::string> ListNamespace() const;

  // Prints `error: <message>` (each line of a multi-line message prefixed) and returns
  // kExitError. Store errors get a kubectl-like form (`Error from server (NotFound): …`).
  int Fail(const api::Status& status);
  // Prints `error: <line>` (control characters escaped: messages quote what sandboxes and
  // cloud APIs said) without deciding the exit code.
  void PrintError(std::string_view line);

  // The verb on the command line ("apply", "label", …), set by the main once it is parsed.
  void set_verb(std::string verb) { verb_ = std::move(verb); }
  // Who writes, for the audit log of a local store (DESIGN §8.3): the local user and host, role
  // "local", source "cli", the verb. A server ignores it and audits its token instead.
  controller::WriteAudit WriteBy() const;

  // The exit code the verb decided.
  int exit_code = kExitOk;
  // The verb chosen on the command line, set by its CLI11 callback and run by the main once
  // ALL flags (including global ones after the verb) are parsed. Returns the exit code.
  std::function<int()> action;

 private:
  std::ostream& out_;
  std::ostream& err_;
  std::istream* in_;
  controller::Clock& clock_;
  std::function<bool()> interrupted_;
  bool out_is_terminal_ = false;
  bool err_is_terminal_ = false;
  GlobalOptions options_;
  std::string verb_;
  std::unique_ptr<controller::http::HttpTransport> transport_;
  std::unique_ptr<controller::http::StreamingTransport> streaming_;
  std::unique_ptr<controller::Store> store_;
  controller::apiclient::HttpStore* remote_ = nullptr;  // store_ when it is an HttpStore
};

// "sandbox", "agentworker", "workspace": the lower-case kind, as in `sandbox/foo`.
std::string TypeName(api::Kind kind);
// "sandboxes", "agentworkers", "workspaces": the resource, as in `sandboxes "foo" not found`.
std::string ResourceName(api::Kind kind);
// "sandbox/foo".
std::string QualifiedName(const api::ObjectKey& key);
// `Error from server (NotFound): sandboxes "foo" not found`.
std::string NotFoundMessage(const api::ObjectKey& key);

// Parses "KIND", "KIND/NAME". Fills name only when given with a slash.
struct KindAndName {
  api::Kind kind = api::Kind::kSandbox;
  std::string name;
};
api::StatusOr<KindAndName> ParseKindAndName(std::string_view text);

// Resolves positional "KIND NAME…" or "KIND/NAME…" (several of them) into keys in `namespace_`.
// An empty result is kInvalidArgument ("you must specify the name of the resource").
api::StatusOr<std::vector<api::ObjectKey>> ResolveTargets(const std::vector<std::string>& args,
                                                          const std::string& namespace_);

// The one object a verb on one kind works on: "KIND/NAME" (any name of `kind`: agenttask/x,
// at/x) or a bare NAME, in `namespace_`. Another kind is kInvalidArgument naming it.
api::StatusOr<api::ObjectKey> ResolveOneTarget(std::string_view text, api::Kind kind,
                                               const std::string& namespace_);

// Parses "k=v,k2=v2" (also k==v). Only equality is supported.
api::StatusOr<std::map<std::string, std::string>> ParseLabelSelector(std::string_view text);

// Parses a --timeout like "5m", "30s", "1h30m" or a bare number of seconds.
api::StatusOr<std::chrono::seconds> ParseTimeout(std::string_view text);

}  // namespace sbx::cli
