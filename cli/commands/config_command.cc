#include "cli/commands/config_command.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands/client_config.h"
#include "cli/commands/table_printer.h"

namespace sbx::cli {
namespace {

struct SetContextOptions {
  std::string name;
  std::string server;
  std::string token;
  std::string certificate_authority;
  bool current = false;
};

int RunGetContexts(CommandContext& ctx) {
  auto config = LoadClientConfig(ctx.ConfigPath());
  if (!config.ok()) {
    return ctx.Fail(config.status());
  }
  TablePrinter table({"CURRENT", "NAME", "SERVER"});
  for (const ClientContext& c : config->contexts) {
    table.AddRow({c.name == config->current_context ? "*" : "", c.name, c.server});
  }
  table.Print(ctx.out());
  return kExitOk;
}

int RunCurrentContext(CommandContext& ctx) {
  auto config = LoadClientConfig(ctx.ConfigPath());
  if (!config.ok()) {
    return ctx.Fail(config.status());
  }
  if (config->current_context.empty()) {
    return ctx.Fail(api::NotFoundError("current-context is not set"));
  }
  ctx.out() << config->current_context << "\n";
  return kExitOk;
}

int RunUseContext(CommandContext& ctx, const std::string& name) {
  auto config = LoadClientConfig(ctx.ConfigPath());
  if (!config.ok()) {
    return ctx.Fail(config.status());
  }
  if (config->Find(name) == nullptr) {
    return ctx.Fail(api::NotFoundError("no context exists with the name: \"" + name + "\""));
  }
  config->current_context = name;
  if (api::Status saved = SaveClientConfig(ctx.ConfigPath(), *config); !saved.ok()) {
    return ctx.Fail(saved);
  }
  ctx.out() << "Switched to context \"" << name << "\".\n";
  return kExitOk;
}

int RunSetContext(CommandContext& ctx, const SetContextOptions& options) {
  auto config = LoadClientConfig(ctx.ConfigPath());
  if (!config.ok()) {
    return ctx.Fail(config.status());
  }
  ClientContext* c = config->Find(options.name);
  const bool created = c == nullptr;
  if (created) {
    config->contexts.push_back(ClientContext{options.name, "", "", ""});
    c = &config->contexts.back();
  }
  if (!options.server.empty()) {
    if (!c->server.empty() && c->server != options.server && options.token.empty()) {
      c->token.clear();  // a token is for its own server only
    }
    c->server = options.server;
  }
  if (!options.token.empty()) {
    c->token = options.token;
  }
  if (!options.certificate_authority.empty()) {
    c->certificate_authority = options.certificate_authority;
  }
  if (c->server.empty()) {
    return ctx.Fail(api::InvalidArgumentError("context \"" + options.name +
                                              "\" needs a server (--server URL)"));
  }
  if (options.current || config->current_context.empty()) {
    config->current_context = options.name;
  }
  if (api::Status saved = SaveClientConfig(ctx.ConfigPath(), *config); !saved.ok()) {
    return ctx.Fail(saved);
  }
  ctx.out() << "Context \"" << options.name << "\" " << (created ? "created" : "modified") << ".\n";
  return kExitOk;
}

int RunDeleteContext(CommandContext& ctx, const std::string& name) {
  auto config = LoadClientConfig(ctx.ConfigPath());
  if (!config.ok()) {
    return ctx.Fail(config.status());
  }
  if (std::erase_if(config->contexts, [&](const ClientContext& c) { return c.name == name; }) ==
      0) {
    return ctx.Fail(api::NotFoundError("no context exists with the name: \"" + name + "\""));
  }
  if (config->current_context == name) {
    config->current_context.clear();
  }
  if (api::Status saved = SaveClientConfig(ctx.ConfigPath(), *config); !saved.ok()) {
    return ctx.Fail(saved);
  }
  ctx.out() << "deleted context " << name << " from " << ctx.ConfigPath() << "\n";
  return kExitOk;
}

}  // namespace

void AddConfigCommand(CLI::App& app, CommandContext& ctx) {
  CLI::App* config = app.add_subcommand(
      "config", "Manage the contexts (servers and tokens) of ~/.config/sbx/config.yaml");
  config->require_subcommand(1);

  config->add_subcommand("get-contexts", "List the contexts")->callback([&ctx] {
    ctx.action = [&ctx] { return RunGetContexts(ctx); };
  });
  config->add_subcommand("current-context", "Print the current context")->callback([&ctx] {
    ctx.action = [&ctx] { return RunCurrentContext(ctx); };
  });

  auto use_name = std::make_shared<std::string>();
  CLI::App* use = config->add_subcommand("use-context", "Make a context the current one");
  use->add_option("name", *use_name, "the context")->required();
  use->callback([&ctx, use_name] {
    ctx.action = [&ctx, use_name] { return RunUseContext(ctx, *use_name); };
  });

  auto set = std::make_shared<SetContextOptions>();
  CLI::App* set_cmd =
      config->add_subcommand("set-context", "Create or change a context (server, token, CA)");
  set_cmd->add_option("name", set->name, "the context")->required();
  set_cmd->add_option("--server", set->server, "https://host:port of sbxd's API");
  set_cmd->add_option("--token", set->token, "the bearer token (stored 0600 in the config)");
  set_cmd->add_option("--certificate-authority", set->certificate_authority,
                      "PEM file of the CA that signed the server's certificate");
  set_cmd->add_flag("--current", set->current, "also make it the current context");
  set_cmd->callback([&ctx, set] { ctx.action = [&ctx, set] { return RunSetContext(ctx, *set); }; });

  auto delete_name = std::make_shared<std::string>();
  CLI::App* del = config->add_subcommand("delete-context", "Delete a context");
  del->add_option("name", *delete_name, "the context")->required();
  del->callback([&ctx, delete_name] {
    ctx.action = [&ctx, delete_name] { return RunDeleteContext(ctx, *delete_name); };
  });
}

}  // namespace sbx::cli
