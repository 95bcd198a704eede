#include "cli/commands/top_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "api/conditions.h"
#include "api/usage.h"
#include "cli/commands/table_printer.h"
#include "controller/cloud/cloud_clients.h"
#include "controller/reconcilers/workspace_of.h"

namespace sbx::cli {
namespace {

using nlohmann::json;

// One row of any of the three tables.
struct Row {
  std::string namespace_;
  std::string name;
  std::string phase;   // tasks
  std::string period;  // workspaces
  int64_t tasks = 0;   // workspaces, pools
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t compute_millis = 0;
  std::optional<api::Micros> cost;  // unset: no pricing
  std::string budget;               // the share of its Workspace's budget: "80% tokens", "-"
  int64_t tokens() const { return input_tokens + output_tokens; }
};

// A status cost string ("0.001250") as micro-units; nullopt when empty (no pricing).
std::optional<api::Micros> ParsedCost(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  api::StatusOr<api::Micros> cost = api::ParseDecimal(text);
  return cost.ok() ? std::optional(*cost) : std::nullopt;
}

void AddCost(std::optional<api::Micros>& sum, const std::optional<api::Micros>& cost) {
  if (cost) {
    sum = sum.value_or(0) + *cost;
  }
}

// "80% tokens": the largest share of the budget's limits that `r`'s usage makes; "-" without
// a budget (or one whose limits count nothing `r` has).
std::string BudgetShare(const api::WorkspaceSpec& spec, const Row& r) {
  if (!spec.budget) {
    return "-";
  }
  double share = -1;
  std::string of;
  auto consider = [&](double value, std::string_view name) {
    if (value > share) {
      share = value;
      of = name;
    }
  };
  if (spec.budget->tokens && *spec.budget->tokens > 0) {
    consider(100.0 * static_cast<double>(r.tokens()) / static_cast<double>(*spec.budget->tokens),
             "tokens");
  }
  if (spec.budget->compute_hours && *spec.budget->compute_hours > 0) {
    // µh → ms: 1 h = 1,000,000 µh = 3,600,000 ms.
    consider(100.0 * static_cast<double>(r.compute_millis) /
                 (static_cast<double>(*spec.budget->compute_hours) * 3.6),
             "compute");
  }
  if (spec.budget->cost && *spec.budget->cost > 0 && r.cost) {
    consider(100.0 * static_cast<double>(*r.cost) / static_cast<double>(*spec.budget->cost),
             "cost");
  }
  if (share < 0) {
    return "-";
  }
  return std::to_string(static_cast<int64_t>(share)) + "% " + of;
}

// The Workspaces by WorkspaceId, and the one an object belongs to (controller::WorkspaceOf,
// remembered per worker or pool: their tasks share it).
class WorkspaceFinder {
 public:
  WorkspaceFinder(controller::Store& store, const std::vector<api::Object>& workspaces)
      : store_(store) {
    for (const api::Object& ws : workspaces) {
      by_id_[controller::WorkspaceId(ws.metadata.namespace_, ws.metadata.name)] = &ws;
    }
  }
  // The Workspace of a task (by its worker, else its pool) or of a pool; null when none.
  const api::Object* Of(const api::Object& o) {
    api::ObjectKey key = api::KeyOf(o);
    if (o.kind == api::Kind::kAgentTask) {
      const std::string worker = !o.agent_task_status().worker.empty()
                                     ? o.agent_task_status().worker
                                     : o.agent_task_spec().worker_ref;
      key = !worker.empty() ? api::ObjectKey{api::Kind::kAgentWorker, o.metadata.namespace_, worker}
                            : api::ObjectKey{api::Kind::kAgentPool, o.metadata.namespace_,
                                             o.agent_task_spec().pool_ref};
    }
    auto known = of_.find(key);
    if (known == of_.end()) {
      api::StatusOr<std::optional<std::string>> id = controller::WorkspaceOf(store_, key);
      known = of_.emplace(key, id.ok() ? id->value_or("") : "").first;
    }
    auto ws = by_id_.find(known->second);
    return ws == by_id_.end() ? nullptr : ws->second;
  }

 private:
  controller::Store& store_;
  std::map<std::string, const api::Object*> by_id_;
  std::map<api::ObjectKey, std::string> of_;
};

json RowJson(const Row& r, std::string_view what) {
  json j = {{"namespace", r.namespace_},
            {"name", r.name},
            {"inputTokens", r.input_tokens},
            {"outputTokens", r.output_tokens},
            {"tokens", r.tokens()},
            {"computeSeconds", static_cast<double>(r.compute_millis) / 1000},
            {"cost", r.cost ? api::FormatCost(*r.cost) : ""}};
  if (what == "tasks") {
    j["phase"] = r.phase;
  } else {
    j["tasks"] = r.tasks;
  }
  if (what == "workspaces") {
    j["period"] = r.period;
  }
  j["budget"] = r.budget;
  return j;
}

}  // namespace

int RunTop(CommandContext& ctx, const TopCommandOptions& options) {
  static const std::map<std::string, std::string, std::less<>> kWhat = {
      {"workspaces", "workspaces"}, {"workspace", "workspaces"}, {"ws", "workspaces"},
      {"pools", "pools"},           {"agentpools", "pools"},     {"ap", "pools"},
      {"tasks", "tasks"},           {"agenttasks", "tasks"},     {"at", "tasks"}};
  auto what_it = kWhat.find(options.what);
  if (what_it == kWhat.end()) {
    return ctx.Fail(api::InvalidArgumentError("top: unknown resource \"" + options.what +
                                              "\" (expected workspaces, pools or tasks)"));
  }
  const std::string& what = what_it->second;
  if (options.sort_by != "tokens" && options.sort_by != "cost" && options.sort_by != "compute" &&
      options.sort_by != "name") {
    return ctx.Fail(api::InvalidArgumentError("--sort-by " + options.sort_by +
                                              ": expected tokens, compute, cost or name"));
  }
  if (!options.output.empty() && options.output != "json") {
    return ctx.Fail(api::InvalidArgumentError("-o " + options.output + ": expected json"));
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  controller::ListOptions list;
  list.namespace_ = ctx.ListNamespace();
  list.kind = api::Kind::kWorkspace;
  auto workspaces = (*store)->List(list);
  if (!workspaces.ok()) {
    return ctx.Fail(workspaces.status());
  }
  std::vector<Row> rows;
  if (what == "workspaces") {
    for (const api::Object& ws : *workspaces) {
      const api::WorkspaceUsage& u = ws.workspace_status().usage;
      rows.push_back({ws.metadata.namespace_, ws.metadata.name, "", u.period, u.tasks,
                      u.input_tokens, u.output_tokens, u.compute_millis, ParsedCost(u.cost), ""});
      rows.back().budget = BudgetShare(ws.workspace_spec(), rows.back());
    }
  } else {
    // Tasks and pools: their usage, and the share of their Workspace's budget it makes.
    WorkspaceFinder workspace_of(**store, *workspaces);
    auto share = [&](const api::Object& o, const Row& r) {
      const api::Object* ws = workspace_of.Of(o);
      return ws == nullptr ? std::string("-") : BudgetShare(ws->workspace_spec(), r);
    };
    list.kind = api::Kind::kAgentTask;
    auto tasks = (*store)->List(list);
    if (!tasks.ok()) {
      return ctx.Fail(tasks.status());
    }
    if (what == "tasks") {
      for (const api::Object& t : *tasks) {
        const api::AgentTaskStatus& s = t.agent_task_status();
        rows.push_back({t.metadata.namespace_, t.metadata.name,
                        std::string(api::TaskPhaseName(s.phase)), "", 0, s.usage.input_tokens,
                        s.usage.output_tokens, s.usage.compute_millis, ParsedCost(s.usage.cost),
                        ""});
        rows.back().budget = share(t, rows.back());
      }
    } else {
      list.kind = api::Kind::kAgentPool;
      auto pools = (*store)->List(list);
      if (!pools.ok()) {
        return ctx.Fail(pools.status());
      }
      std::map<std::pair<std::string, std::string>, std::pair<const api::Object*, Row>> by_pool;
      for (const api::Object& p : *pools) {
        auto& [pool, row] = by_pool[{p.metadata.namespace_, p.metadata.name}];
        pool = &p;
        row.namespace_ = p.metadata.namespace_;
        row.name = p.metadata.name;
      }
      for (const api::Object& t : *tasks) {
        auto it = by_pool.find({t.metadata.namespace_, t.agent_task_spec().pool_ref});
        if (it == by_pool.end()) {
          continue;
        }
        const api::TaskUsageTotals& u = t.agent_task_status().usage;
        Row& row = it->second.second;
        ++row.tasks;
        row.input_tokens += u.input_tokens;
        row.output_tokens += u.output_tokens;
        row.compute_millis += u.compute_millis;
        AddCost(row.cost, ParsedCost(u.cost));
      }
      for (auto& [key, entry] : by_pool) {
        entry.second.budget = share(*entry.first, entry.second);
        rows.push_back(std::move(entry.second));
      }
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    if (options.sort_by == "cost") {
      return a.cost.value_or(-1) > b.cost.value_or(-1);
    }
    if (options.sort_by == "tokens") {
      return a.tokens() > b.tokens();
    }
    if (options.sort_by == "compute") {
      return a.compute_millis > b.compute_millis;
    }
    return std::tie(a.namespace_, a.name) < std::tie(b.namespace_, b.name);
  });

  if (options.output == "json") {
    json out = json::array();
    for (const Row& r : rows) {
      out.push_back(RowJson(r, what));
    }
    ctx.out() << out.dump(2) << "\n";
    return kExitOk;
  }
  const bool with_namespace = !list.namespace_.has_value();
  std::vector<std::string> headers = {"NAME"};
  if (what == "workspaces") {
    headers.insert(headers.end(), {"PERIOD", "TASKS", "TOKENS", "COMPUTE", "COST", "BUDGET"});
  } else if (what == "pools") {
    headers.insert(headers.end(), {"TASKS", "TOKENS", "COMPUTE", "COST", "BUDGET"});
  } else {
    headers.insert(headers.end(), {"PHASE", "TOKENS", "COMPUTE", "COST", "BUDGET"});
  }
  if (with_namespace) {
    headers.insert(headers.begin(), "NAMESPACE");
  }
  TablePrinter table(headers);
  for (const Row& r : rows) {
    const std::string cost = r.cost ? api::FormatCost(*r.cost) : "-";
    const std::string compute = api::FormatSeconds(r.compute_millis) + "s";
    std::vector<std::string> cells = {r.name};
    if (what == "workspaces") {
      cells.insert(cells.end(), {r.period.empty() ? "-" : r.period, std::to_string(r.tasks),
                                 std::to_string(r.tokens()), compute, cost, r.budget});
    } else if (what == "pools") {
      cells.insert(cells.end(),
                   {std::to_string(r.tasks), std::to_string(r.tokens()), compute, cost, r.budget});
    } else {
      cells.insert(cells.end(), {r.phase, std::to_string(r.tokens()), compute, cost, r.budget});
    }
    if (with_namespace) {
      cells.insert(cells.begin(), r.namespace_);
    }
    table.AddRow(std::move(cells));
  }
  if (table.empty()) {
    ctx.err() << "No resources found.\n";
    return kExitOk;
  }
  table.Print(ctx.out());
  return kExitOk;
}

void AddTopCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<TopCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "top",
      "Show what workspaces, pools or tasks consumed: tokens, compute, cost, share of the budget");
  sub->add_option("what", options->what, "workspaces|pools|tasks (ws, ap, at)")->required();
  sub->add_option("--sort-by", options->sort_by, "tokens (default), compute, cost or name");
  sub->add_option("-o,--output", options->output, "output format: json");
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunTop(ctx, *options); }; });
}

}  // namespace sbx::cli
