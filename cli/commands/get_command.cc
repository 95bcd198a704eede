#include "cli/commands/get_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "api/codec.h"
#include "cli/commands/object_printer.h"
#include "cli/commands/table_printer.h"

namespace sbx::cli {
namespace {

constexpr std::chrono::milliseconds kMaxBlock{200};

struct Query {
  std::vector<api::Kind> kinds;
  std::vector<std::string> names;  // empty = all
  // Explicit KIND/NAME pairs (when given in that form).
  std::vector<api::ObjectKey> keys;
  std::map<std::string, std::string> selector;
};

api::StatusOr<Query> ParseQuery(const std::vector<std::string>& args, const std::string& ns) {
  Query q;
  if (args.empty()) {
    return api::InvalidArgumentError(
        "you must specify the type of resource to get (sandbox|sb, agentworker|aw, "
        "workspace|ws, inventory, abandoned)");
  }
  if (args[0].find('/') != std::string::npos) {
    ASSIGN_OR_RETURN(q.keys, ResolveTargets(args, ns));
    for (const api::ObjectKey& k : q.keys) {
      if (std::find(q.kinds.begin(), q.kinds.end(), k.kind) == q.kinds.end()) {
        q.kinds.push_back(k.kind);
      }
    }
    return q;
  }
  std::string_view kinds = args[0];
  while (!kinds.empty()) {
    const size_t comma = kinds.find(',');
    const std::string_view one = kinds.substr(0, comma);
    kinds = comma == std::string_view::npos ? std::string_view() : kinds.substr(comma + 1);
    if (one == "all") {
      q.kinds.assign(std::begin(api::kAllKinds), std::end(api::kAllKinds));
      continue;
    }
    ASSIGN_OR_RETURN(api::Kind kind, api::ParseKind(one));
    if (std::find(q.kinds.begin(), q.kinds.end(), kind) == q.kinds.end()) {
      q.kinds.push_back(kind);
    }
  }
  q.names.assign(args.begin() + 1, args.end());
  for (api::Kind kind : q.kinds) {
    for (const std::string& name : q.names) {
      q.keys.push_back(api::ObjectKey{kind, ns, name});
    }
  }
  return q;
}

bool Matches(const Query& q, const std::optional<std::string>& ns, const api::ObjectKey& key,
             const api::Object* object) {
  if (std::find(q.kinds.begin(), q.kinds.end(), key.kind) == q.kinds.end()) {
    return false;
  }
  if (!q.keys.empty() && std::find(q.keys.begin(), q.keys.end(), key) == q.keys.end()) {
    return false;
  }
  if (ns && key.namespace_ != *ns) {
    return false;
  }
  if (object != nullptr) {
    for (const auto& [k, v] : q.selector) {
      auto it = object->metadata.labels.find(k);
      if (it == object->metadata.labels.end() || it->second != v) {
        return false;
      }
    }
  }
  return true;
}

std::string NoResourcesMessage(const std::optional<std::string>& ns) {
  return ns ? "No resources found in " + *ns + " namespace." : "No resources found";
}

int Watch(CommandContext& ctx, controller::Store& store, const Query& q,
          const std::optional<std::string>& ns, const OutputSpec& spec, int64_t since,
          std::vector<api::Object> initial, std::chrono::seconds timeout) {
  const bool with_namespace = !ns.has_value();
  const bool table = IsTable(spec);
  // Custom columns are one table whatever the kind; the built-in columns one per kind.
  const auto table_of = [&spec](api::Kind kind) {
    return spec.format == OutputFormat::kCustomColumns ? api::Kind::kSandbox : kind;
  };
  // Widths of the tables already printed, so that later rows line up.
  std::map<api::Kind, std::vector<size_t>> widths;
  std::map<api::ObjectKey, api::Object> last_seen;
  std::vector<api::Object> shown = initial;
  for (api::Object& o : initial) {
    last_seen[api::KeyOf(o)] = std::move(o);
  }
  if (table) {
    std::map<api::Kind, TablePrinter> tables;
    for (const api::Object& o : shown) {
      auto it =
          tables.try_emplace(table_of(o.kind), TableHeaders(spec, o.kind, with_namespace)).first;
      it->second.AddRow(TableRow(spec, o, with_namespace, ctx.clock().Now()));
    }
    for (auto& [kind, t] : tables) {
      t.Print(ctx.out(), !spec.no_headers);
      widths[kind] = t.Widths();
    }
  } else if (spec.format == OutputFormat::kJsonPath) {
    // As kubectl -w: the template sees each object, the first listing included.
    for (const api::Object& o : shown) {
      if (const api::Status printed = PrintObjects(ctx.out(), {o}, spec, /*single=*/true,
                                                   with_namespace, ctx.clock().Now());
          !printed.ok()) {
        return ctx.Fail(printed);
      }
    }
  } else if (const api::Status printed = PrintObjects(ctx.out(), shown, spec, /*single=*/false,
                                                      with_namespace, ctx.clock().Now());
             !printed.ok()) {
    return ctx.Fail(printed);
  }
  ctx.out().flush();

  const auto deadline = timeout.count() > 0 ? std::optional(ctx.clock().Steady() + timeout)
                                            : std::optional<controller::Clock::SteadyTime>();
  while (!ctx.interrupted()) {
    auto block = kMaxBlock;
    if (deadline) {
      const auto now = ctx.clock().Steady();
      if (now >= *deadline) {
        break;
      }
      block =
          std::min(block, std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now));
    }
    if (!store.WaitForChange(block)) {
      continue;
    }
    auto changes = store.WatchSince(since);
    if (!changes.ok()) {
      return ctx.Fail(changes.status());
    }
    for (const controller::Store::Change& change : *changes) {
      since = std::max(since, change.revision);
      const api::Object* object = nullptr;
      if (change.object) {
        object = &*change.object;
        last_seen[change.key] = *change.object;
      } else if (auto it = last_seen.find(change.key); it != last_seen.end()) {
        object = &it->second;
      }
      if (object == nullptr || !Matches(q, ns, change.key, object)) {
        continue;
      }
      if (table) {
        std::vector<std::string> row = TableRow(spec, *object, with_namespace, ctx.clock().Now());
        auto [it, fresh] = widths.try_emplace(table_of(change.key.kind));
        if (fresh) {
          TablePrinter header(TableHeaders(spec, change.key.kind, with_namespace));
          header.AddRow(row);
          it->second = header.Widths();
          header.Print(ctx.out(), !spec.no_headers);
        } else {
          TablePrinter::PrintRow(ctx.out(), row, it->second);
        }
      } else {
        const api::Status printed = PrintObjects(ctx.out(), {*object}, spec, /*single=*/true,
                                                 with_namespace, ctx.clock().Now());
        if (!printed.ok()) {
          return ctx.Fail(printed);
        }
        if (spec.format == OutputFormat::kYaml) {
          ctx.out() << "---\n";
        }
      }
      if (change.type == controller::Store::ChangeType::kDeleted) {
        last_seen.erase(change.key);
      }
    }
    ctx.out().flush();
  }
  return kExitOk;
}

// ---- inventory: `get inventory` / `get abandoned` ---------------------------------------------

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string_view InventoryStateName(controller::Store::InventoryState state) {
  switch (state) {
    case controller::Store::InventoryState::kIntent:
      return "Intent";
    case controller::Store::InventoryState::kLive:
      return "Live";
    case controller::Store::InventoryState::kDeleting:
      return "Deleting";
    case controller::Store::InventoryState::kAbandoned:
      return "Abandoned";
  }
  return "Unknown";
}

std::string InventoryJson(const controller::Store::InventoryRecord& r) {
  return "{\n    \"workspace\": " + JsonString(r.workspace) +
         ",\n    \"resourceType\": " + JsonString(r.resource_type) +
         ",\n    \"externalId\": " + JsonString(r.external_id) +
         ",\n    \"state\": " + JsonString(InventoryStateName(r.state)) +
         ",\n    \"owner\": {\n        \"kind\": " + JsonString(api::KindName(r.owner.kind)) +
         ",\n        \"namespace\": " + JsonString(r.owner.namespace_) +
         ",\n        \"name\": " + JsonString(r.owner.name) +
         ",\n        \"uid\": " + JsonString(r.owner_uid) + "\n    }" +
         ",\n    \"createdAt\": " + JsonString(r.created_at) +
         ",\n    \"updatedAt\": " + JsonString(r.updated_at) + "\n}";
}

// What sbx recorded about the external resources it created (the store's inventory), filtered
// by the owner's namespace (-A: all) and, when names are given, by external id. With
// `only_abandoned`, just the resources sbx gave up deleting.
int RunGetInventory(CommandContext& ctx, const GetCommandOptions& options, bool only_abandoned) {
  auto spec = ParseOutputSpec(options.output);
  if (!spec.ok()) {
    return ctx.Fail(spec.status());
  }
  const auto format = &spec->format;
  if ((*format != OutputFormat::kTable && *format != OutputFormat::kWide &&
       *format != OutputFormat::kJson && *format != OutputFormat::kName) ||
      options.watch || !options.selector.empty() || !options.sort_by.empty()) {
    return ctx.Fail(api::InvalidArgumentError(
        "get " + options.args[0] +
        " supports -o wide|json|name, not -o yaml|jsonpath|custom-columns, -w, -l or --sort-by"));
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  auto records = (*store)->ListInventory(std::nullopt);
  if (!records.ok()) {
    return ctx.Fail(records.status());
  }
  const std::optional<std::string> ns = ctx.ListNamespace();
  const std::set<std::string> ids(options.args.begin() + 1, options.args.end());
  std::vector<controller::Store::InventoryRecord> shown;
  for (controller::Store::InventoryRecord& r : *records) {
    if ((only_abandoned && r.state != controller::Store::InventoryState::kAbandoned) ||
        (ns && r.owner.namespace_ != *ns) || (!ids.empty() && ids.count(r.external_id) == 0)) {
      continue;
    }
    shown.push_back(std::move(r));
  }
  if (*format == OutputFormat::kJson) {
    std::vector<std::string> encoded;
    encoded.reserve(shown.size());
    for (const auto& r : shown) {
      encoded.push_back(InventoryJson(r));
    }
    ctx.out() << JsonList(encoded);
    return kExitOk;
  }
  if (shown.empty()) {
    ctx.err() << NoResourcesMessage(ns) << "\n";
    return kExitOk;
  }
  if (*format == OutputFormat::kName) {
    for (const auto& r : shown) {
      ctx.out() << r.resource_type << "/" << r.external_id << "\n";
    }
    return kExitOk;
  }
  const bool wide = *format == OutputFormat::kWide;
  std::vector<std::string> headers = {"WORKSPACE", "TYPE", "ID", "STATE", "OWNER", "AGE"};
  if (wide) {
    headers.push_back("OWNER-UID");
    headers.push_back("CREATED");
  }
  TablePrinter table(headers);
  const auto now = ctx.clock().Now();
  for (const auto& r : shown) {
    // AGE: since the last change of state (for an abandoned row: since it was abandoned).
    std::vector<std::string> row = {
        r.workspace,
        r.resource_type,
        r.external_id,
        std::string(InventoryStateName(r.state)),
        std::string(api::KindName(r.owner.kind)) + "/" +
            (ns ? r.owner.name : r.owner.namespace_ + "/" + r.owner.name),
        AgeSince(r.updated_at, now)};
    if (wide) {
      row.push_back(r.owner_uid);
      row.push_back(r.created_at);
    }
    table.AddRow(std::move(row));
  }
  table.Print(ctx.out());
  return kExitOk;
}

}  // namespace

int RunGet(CommandContext& ctx, const GetCommandOptions& options) {
  if (!options.args.empty() && (options.args[0] == "inventory" || options.args[0] == "abandoned")) {
    return RunGetInventory(ctx, options, options.args[0] == "abandoned");
  }
  auto spec = ParseOutputSpec(options.output);
  if (!spec.ok()) {
    return ctx.Fail(spec.status());
  }
  spec->allow_missing_keys = options.allow_missing_template_keys;
  spec->no_headers = options.no_headers;
  std::optional<JsonPath> sort_by;
  if (!options.sort_by.empty()) {
    auto parsed = JsonPath::ParseRelaxed(options.sort_by);
    if (!parsed.ok()) {
      return ctx.Fail(parsed.status());
    }
    sort_by = std::move(parsed).value();
  }
  auto query = ParseQuery(options.args, ctx.options().namespace_);
  if (!query.ok()) {
    return ctx.Fail(query.status());
  }
  auto selector = ParseLabelSelector(options.selector);
  if (!selector.ok()) {
    return ctx.Fail(selector.status());
  }
  query->selector = *selector;
  auto timeout = ParseTimeout(options.timeout);
  if (!timeout.ok()) {
    return ctx.Fail(timeout.status());
  }
  auto store = ctx.store();
  if (!store.ok()) {
    return ctx.Fail(store.status());
  }
  const std::optional<std::string> ns =
      query->keys.empty() ? ctx.ListNamespace() : ctx.options().namespace_;
  const bool with_namespace = !ns.has_value();

  // The revision before reading, so a watch misses nothing written after the read.
  int64_t since = 0;
  if (options.watch) {
    auto rev = (*store)->CurrentRevision();
    if (!rev.ok()) {
      return ctx.Fail(rev.status());
    }
    since = *rev;
  }

  std::vector<api::Object> objects;
  bool not_found = false;
  if (!query->keys.empty()) {
    for (const api::ObjectKey& key : query->keys) {
      auto got = (*store)->Get(key);
      if (got.ok()) {
        if (Matches(*query, ns, key, &*got)) {
          objects.push_back(std::move(got).value());
        }
      } else if (got.status().code() == api::StatusCode::kNotFound) {
        ctx.err() << NotFoundMessage(key) << "\n";
        not_found = true;
      } else {
        return ctx.Fail(got.status());
      }
    }
  } else {
    for (api::Kind kind : query->kinds) {
      controller::ListOptions list;
      list.kind = kind;
      list.namespace_ = ns;
      list.label_selector = query->selector;
      auto listed = (*store)->List(list);
      if (!listed.ok()) {
        return ctx.Fail(listed.status());
      }
      for (api::Object& o : *listed) {
        objects.push_back(std::move(o));
      }
    }
  }

  if (sort_by && objects.size() > 1) {
    if (const api::Status sorted = SortObjects(objects, *sort_by); !sorted.ok()) {
      return ctx.Fail(sorted);
    }
  }
  if (options.watch) {
    return Watch(ctx, **store, *query, ns, *spec, since, std::move(objects), *timeout);
  }
  const bool single = !query->keys.empty() && query->keys.size() == 1;
  if (objects.empty()) {
    if (not_found) {
      return ctx.exit_code = kExitError;
    }
    if (spec->format == OutputFormat::kJson) {
      ctx.out() << JsonList({});
    } else if (spec->format == OutputFormat::kJsonPath) {
      // kubectl renders the template against the empty List (`{.items[*]...}` prints nothing).
      const api::Status printed =
          PrintObjects(ctx.out(), {}, *spec, /*single=*/false, with_namespace, ctx.clock().Now());
      return printed.ok() ? kExitOk : ctx.Fail(printed);
    } else {
      ctx.err() << NoResourcesMessage(ns) << "\n";
    }
    return kExitOk;
  }
  if (const api::Status printed =
          PrintObjects(ctx.out(), objects, *spec, single, with_namespace, ctx.clock().Now());
      !printed.ok()) {
    return ctx.Fail(printed);
  }
  return ctx.exit_code = not_found ? kExitError : kExitOk;
}

void AddGetCommand(CLI::App& app, CommandContext& ctx) {
  auto options = std::make_shared<GetCommandOptions>();
  CLI::App* sub = app.add_subcommand("get", "Display one or many objects");
  sub->add_option("args", options->args,
                  "KIND[,KIND…] [NAME…] or KIND/NAME…; also `inventory` or `abandoned` [ID…]");
  sub->add_option("-l,--selector", options->selector, "label selector, e.g. app=x,tier=y");
  sub->add_option("-o,--output", options->output,
                  "output format: wide|yaml|json|name|jsonpath=TEMPLATE|"
                  "custom-columns=NAME:PATH,…");
  sub->add_option("--sort-by", options->sort_by,
                  "sort the list by the value of this JSONPath, e.g. .metadata.creationTimestamp");
  sub->add_option("--allow-missing-template-keys", options->allow_missing_template_keys,
                  "-o jsonpath: print nothing for a missing key (false: fail)")
      ->capture_default_str();
  sub->add_flag("--no-headers", options->no_headers, "tables: print no header line");
  sub->add_flag("-w,--watch", options->watch, "after listing, watch for changes");
  sub->add_option("--timeout", options->timeout, "stop watching after this long (0 = never)")
      ->capture_default_str();
  sub->callback(
      [&ctx, options] { ctx.action = [&ctx, options] { return RunGet(ctx, *options); }; });
}

}  // namespace sbx::cli
