#include "cli/commands/completion_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include "api/kinds.h"
#include "cli/commands/explain_command.h"
#include "controller/store/postgres_store.h"

namespace sbx::cli {
namespace {

constexpr char kCompleteVerb[] = "__complete";

// Each script hands the words of the line to `sbxctl __complete -- …` and offers what it prints.
constexpr char kBashScript[] =
    R"sh(# bash completion for sbxctl; load it with: source <(sbxctl completion bash)
_sbxctl() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local IFS=$'\n'
  local candidates
  candidates=$("${COMP_WORDS[0]}" __complete -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)
  COMPREPLY=($(compgen -W "${candidates}" -- "${cur}"))
}
complete -o default -F _sbxctl sbxctl
)sh";

constexpr char kZshScript[] = R"sh(#compdef sbxctl
# zsh completion for sbxctl; load it with: source <(sbxctl completion zsh) (after compinit)
_sbxctl() {
  local -a candidates
  candidates=("${(@f)$(${words[1]} __complete -- "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  compadd -- "${(@)candidates:#}"
}
compdef _sbxctl sbxctl
)sh";

constexpr char kFishScript[] =
    R"sh(# fish completion for sbxctl; load it with: sbxctl completion fish | source
function __sbxctl_complete
    set -l words (commandline -opc) (commandline -ct)
    $words[1] __complete -- $words[2..-1] 2>/dev/null
end
complete -c sbxctl -f -a '(__sbxctl_complete)'
)sh";

// Global flags that take a value (their value is the next word).
const std::set<std::string> kGlobalValueFlags = {"--db", "-n", "--namespace",
                                                 "--max-manifest-bytes"};

// Verbs whose positionals are KIND NAME… or KIND/NAME….
const std::set<std::string> kObjectVerbs = {"get",   "describe", "delete", "wait",
                                            "label", "annotate", "patch",  "edit"};

// Every word that names a kind (api/kinds.h): singular, plural and short name.
std::vector<std::string> KindWords(std::optional<api::Kind> only = std::nullopt) {
  std::vector<std::string> words;
  for (const api::KindInfo& info : api::Kinds()) {
    if (!only || *only == info.kind) {
      words.insert(words.end(), {std::string(info.singular), std::string(info.plural),
                                 std::string(info.short_name)});
    }
  }
  return words;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::vector<std::string> Flags(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional() && opt->get_lnames().empty() && opt->get_snames().empty()) {
      continue;
    }
    for (const std::string& name : opt->get_lnames()) {
      out.push_back("--" + name);
    }
    for (const std::string& name : opt->get_snames()) {
      out.push_back("-" + name);
    }
  }
  return out;
}

// Whether `flag` of `app` takes a value (as the next word).
bool TakesValue(const CLI::App& app, std::string_view flag) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->check_name(std::string(flag))) {
      return opt->get_expected_min() > 0;
    }
  }
  return false;
}

// What the store holds, read only when the database exists (a <TAB> creates nothing).
class StoreNames {
 public:
  explicit StoreNames(CommandContext& ctx) : ctx_(ctx) {}

  std::vector<std::string> Names(api::Kind kind) {
    std::vector<std::string> out;
    for (const api::Object& o : List(kind)) {
      out.push_back(o.metadata.name);
    }
    return out;
  }
  std::vector<std::string> Namespaces() {
    std::set<std::string> seen;
    for (const api::Kind kind : api::kAllKinds) {
      controller::Store* store = Open();
      if (store == nullptr) {
        break;
      }
      controller::ListOptions list;
      list.kind = kind;
      if (auto listed = store->List(list); listed.ok()) {
        for (const api::Object& o : *listed) {
          seen.insert(o.metadata.namespace_);
        }
      }
    }
    return {seen.begin(), seen.end()};
  }

 private:
  controller::Store* Open() {
    std::error_code ec;
    if (!controller::IsPostgresUrl(ctx_.DbPath()) && !std::filesystem::exists(ctx_.DbPath(), ec)) {
      return nullptr;
    }
    auto store = ctx_.store();
    return store.ok() ? *store : nullptr;
  }
  std::vector<api::Object> List(api::Kind kind) {
    controller::Store* store = Open();
    if (store == nullptr) {
      return {};
    }
    controller::ListOptions list;
    list.kind = kind;
    list.namespace_ = ctx_.ListNamespace();
    auto listed = store->List(list);
    return listed.ok() ? *listed : std::vector<api::Object>{};
  }

  CommandContext& ctx_;
};

std::vector<std::string> WithPrefix(std::vector<std::string> candidates, std::string_view prefix) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::string& c : candidates) {
    if (StartsWith(c, prefix) && seen.insert(c).second) {
      out.push_back(std::move(c));
    }
  }
  return out;
}

// What the words before the cursor say: the verb, its positionals, and the flag whose value is
// being typed (if any). The global flags' values land in `global` (the store to list from).
// nullopt for an unknown verb: nothing sensible to offer.
struct TypedLine {
  CLI::App* verb = nullptr;
  std::vector<std::string> positionals;
  std::string value_of;  // the flag whose value the current word is
};

std::optional<TypedLine> ParseTypedLine(CLI::App& app, GlobalOptions& global,
                                        const std::vector<std::string>& before) {
  TypedLine line;
  CLI::App*& verb = line.verb;
  std::vector<std::string>& positionals = line.positionals;
  std::string& value_of = line.value_of;
  for (size_t i = 0; i < before.size(); ++i) {
    const std::string& w = before[i];
    const bool last = i + 1 == before.size();
    const auto value = [&](std::string& into) {
      if (last) {
        value_of = w;
      } else {
        into = before[++i];
      }
    };
    std::string ignored;
    if (w == "--db") {
      value(global.db_path);
    } else if (StartsWith(w, "--db=")) {
      global.db_path = w.substr(5);
    } else if (w == "-n" || w == "--namespace") {
      value(global.namespace_);
    } else if (StartsWith(w, "--namespace=")) {
      global.namespace_ = w.substr(12);
    } else if (w == "-A" || w == "--all-namespaces") {
      global.all_namespaces = true;
    } else if (kGlobalValueFlags.count(w) > 0) {
      value(ignored);
    } else if (verb == nullptr && !StartsWith(w, "-")) {
      for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
        if (sub->get_name() == w) {
          verb = sub;
        }
      }
      if (verb == nullptr) {
        return std::nullopt;
      }
    } else if (verb != nullptr && StartsWith(w, "-")) {
      if (w.find('=') == std::string::npos && TakesValue(*verb, w)) {
        value(ignored);
      }
    } else if (verb != nullptr) {
      positionals.push_back(w);
    }
  }

  return line;
}

// KIND/NAME forms: "sandbox/<TAB>".
std::vector<std::string> SlashNames(StoreNames& store, const std::string& current) {
  const size_t slash = current.find('/');
  auto kind = api::ParseKind(current.substr(0, slash));
  if (!kind.ok()) {
    return {};
  }
  std::vector<std::string> out;
  for (const std::string& n : store.Names(*kind)) {
    out.push_back(current.substr(0, slash + 1) + n);
  }
  return WithPrefix(std::move(out), current);
}

// The words for the verb's own arguments: kinds, names, shells, explain paths.
std::vector<std::string> ArgumentCandidates(const CLI::App& verb,
                                            const std::vector<std::string>& positionals,
                                            const std::string& current, StoreNames& store) {
  const std::string& name = verb.get_name();
  if (name == "completion") {
    return positionals.empty() ? WithPrefix({"bash", "zsh", "fish"}, current)
                               : std::vector<std::string>{};
  }
  if (name == "explain") {
    if (!positionals.empty()) {
      return {};
    }
    const size_t dot = current.rfind('.');
    if (dot == std::string::npos) {
      return WithPrefix(KindWords(), current);
    }
    std::vector<std::string> paths;
    for (const std::string& field : ExplainFieldNames(current.substr(0, dot))) {
      paths.push_back(current.substr(0, dot + 1) + field);
    }
    return WithPrefix(std::move(paths), current);
  }
  if (name == "exec" || name == "logs") {
    if (!positionals.empty()) {
      return {};
    }
    if (current.find('/') != std::string::npos) {
      return SlashNames(store, current);
    }
    return WithPrefix(store.Names(name == "exec" ? api::Kind::kSandbox : api::Kind::kAgentWorker),
                      current);
  }
  // The AgentTask verbs: `cancel agenttask/NAME…` or `cancel at NAME…`; `artifacts
  // agenttask/NAME` or `artifacts NAME`.
  if (name == "cancel" || name == "artifacts") {
    if (current.find('/') != std::string::npos) {
      auto kind = api::ParseKind(current.substr(0, current.find('/')));
      return kind.ok() && *kind == api::Kind::kAgentTask ? SlashNames(store, current)
                                                         : std::vector<std::string>{};
    }
    if (name == "artifacts") {
      return positionals.empty() ? WithPrefix(store.Names(api::Kind::kAgentTask), current)
                                 : std::vector<std::string>{};
    }
    if (positionals.empty()) {
      return WithPrefix(KindWords(api::Kind::kAgentTask), current);
    }
    auto kind = api::ParseKind(positionals[0]);
    if (!kind.ok() || *kind != api::Kind::kAgentTask) {
      return {};  // agenttask/NAME forms, or not a task
    }
    return WithPrefix(store.Names(api::Kind::kAgentTask), current);
  }
  if (name == "scale") {
    if (current.find('/') != std::string::npos) {
      return SlashNames(store, current);
    }
    if (positionals.empty()) {
      return WithPrefix(KindWords(api::Kind::kAgentPool), current);
    }
    return positionals.size() == 1 ? WithPrefix(store.Names(api::Kind::kAgentPool), current)
                                   : std::vector<std::string>{};
  }
  if (kObjectVerbs.count(name) == 0) {
    return {};
  }
  if (current.find('/') != std::string::npos) {
    return SlashNames(store, current);
  }
  if (positionals.empty()) {
    std::vector<std::string> kinds = KindWords();
    if (name == "get") {
      kinds.insert(kinds.end(), {"all", "inventory", "abandoned"});
    }
    return WithPrefix(std::move(kinds), current);
  }
  if (positionals[0].find('/') != std::string::npos) {
    return {};
  }
  const std::string first_kind = positionals[0].substr(0, positionals[0].find(','));
  auto kind = api::ParseKind(first_kind);
  if (!kind.ok()) {
    return {};
  }
  return WithPrefix(store.Names(*kind), current);
}

}  // namespace

std::vector<std::string> CompletionCandidates(CLI::App& app, CommandContext& ctx,
                                              const std::vector<std::string>& words) {
  const std::string current = words.empty() ? "" : words.back();
  const std::vector<std::string> before(words.begin(),
                                        words.empty() ? words.begin() : words.end() - 1);
  GlobalOptions& global = ctx.options();
  std::optional<TypedLine> line = ParseTypedLine(app, global, before);
  if (!line) {
    return {};
  }
  CLI::App* verb = line->verb;
  const std::string& value_of = line->value_of;
  StoreNames store(ctx);
  if (value_of == "-n" || value_of == "--namespace") {
    return WithPrefix(store.Namespaces(), current);
  }
  if (!value_of.empty()) {
    if ((value_of == "-o" || value_of == "--output") && verb != nullptr &&
        verb->get_name() == "get") {
      return WithPrefix({"wide", "yaml", "json", "name", "jsonpath=", "custom-columns="}, current);
    }
    return {};  // a file, a duration, a template: the shell's default
  }
  if (StartsWith(current, "-")) {
    std::vector<std::string> flags = Flags(app);
    if (verb != nullptr) {
      for (std::string& f : Flags(*verb)) {
        flags.push_back(std::move(f));
      }
    }
    return WithPrefix(std::move(flags), current);
  }
  if (verb == nullptr) {
    std::vector<std::string> verbs;
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      if (sub->get_name() != kCompleteVerb) {
        verbs.push_back(sub->get_name());
      }
    }
    return WithPrefix(std::move(verbs), current);
  }

  return ArgumentCandidates(*verb, line->positionals, current, store);
}

void AddCompletionCommand(CLI::App& app, CommandContext& ctx) {
  auto shell = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("completion", "Print a shell completion script");
  sub->add_option("shell", *shell, "bash, zsh or fish")->required();
  sub->callback([&ctx, shell] {
    ctx.action = [&ctx, shell] {
      if (*shell == "bash") {
        ctx.out() << kBashScript;
      } else if (*shell == "zsh") {
        ctx.out() << kZshScript;
      } else if (*shell == "fish") {
        ctx.out() << kFishScript;
      } else {
        return ctx.Fail(api::InvalidArgumentError("unsupported shell type \"" + *shell +
                                                  "\" (bash, zsh or fish)"));
      }
      return kExitOk;
    };
  });

  auto words = std::make_shared<std::vector<std::string>>();
  CLI::App* complete = app.add_subcommand(kCompleteVerb, "");  // hidden: no description
  complete->group("");
  complete->add_option("words", *words, "the words after sbxctl, the last one being completed");
  complete->callback([&app, &ctx, words] {
    ctx.action = [&app, &ctx, words] {
      for (const std::string& c : CompletionCandidates(app, ctx, *words)) {
        ctx.out() << c << "\n";
      }
      return kExitOk;
    };
  });
}

}  // namespace sbx::cli
