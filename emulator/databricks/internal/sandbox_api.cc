#include "emulator/databricks/internal/sandbox_api.h"

#include <set>

namespace sbx::emulator::internal::databricks {
namespace {

namespace fs = std::filesystem;

constexpr int kDefaultPageSize = 100;  // lakebox's default; the Sandbox API's is undocumented

// §1 quotas (40 per user, 100 per workspace; unconfirmed), refused like §8.2's TooManyRequests
// class with a google.rpc.QuotaFailure detail (§8.1): 429 RESOURCE_EXHAUSTED, no Retry-After —
// waiting does not free a slot, deleting a sandbox does. The real text is undocumented.
ApiError QuotaExceeded(const std::string& subject, std::string message) {
  ApiError e{429, "RESOURCE_EXHAUSTED", message, {}};
  e.detail = json{
      {"@type", "type.googleapis.com/google.rpc.QuotaFailure"},
      {"violations", json::array({{{"subject", subject}, {"description", std::move(message)}}})}};
  return e;
}

}  // namespace

SandboxApi::SandboxApi(State& state) : state_(state) {}

std::optional<ApiError> SandboxApi::ValidateId(const std::string& id) {
  if (id.empty()) {
    return BadParam("Missing required query parameter 'sandbox_id'");
  }
  if (id.size() > state_.options.max_sandbox_id_length) {
    return BadParam("sandbox_id must be at most " +
                    std::to_string(state_.options.max_sandbox_id_length) + " characters");
  }
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) {
      return BadParam("sandbox_id may contain only letters, digits, '-', '_' and '.'");
    }
  }
  if (id == "." || id == "..") {
    return BadParam("sandbox_id must not be '.' or '..'");
  }
  return std::nullopt;
}

std::optional<ApiError> SandboxApi::ParseSandboxFields(const json& j, SandboxFields& out) {
  static const std::set<std::string> kKnown = {"name",   "display_name", "spec",       "metadata",
                                               "status", "create_time",  "update_time"};
  if (state_.options.reject_unknown_fields) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!kKnown.contains(it.key())) {
        return BadParam("Unknown field '" + it.key() + "'");
      }
    }
  }
  if (j.contains("display_name")) {
    const json& v = j["display_name"];
    if (!v.is_string()) {
      return BadParam("display_name must be a string");
    }
    if (v.get<std::string>().size() > 256) {
      return BadParam("display_name must be at most 256 bytes");
    }
    out.display_name = v.get<std::string>();
  }
  if (j.contains("spec")) {
    const json& spec = j["spec"];
    if (!spec.is_object()) {
      return BadParam("spec must be an object");
    }
    if (spec.contains("compute")) {
      const json& compute = spec["compute"];
      if (!compute.is_object()) {
        return BadParam("spec.compute must be an object");
      }
      if (compute.contains("inactivity_timeout")) {
        auto d = ParseProtoDuration(compute["inactivity_timeout"]);
        if (!d) {
          return BadParam(
              "spec.compute.inactivity_timeout must be a non-negative duration like \"900s\"");
        }
        if (*d < state_.options.min_inactivity_timeout ||
            *d > state_.options.max_inactivity_timeout) {
          return BadParam("spec.compute.inactivity_timeout must be between " +
                          FormatDuration(state_.options.min_inactivity_timeout) + " and " +
                          FormatDuration(state_.options.max_inactivity_timeout));
        }
        out.inactivity_timeout = *d;
      }
    }
    if (spec.contains("environment")) {
      const json& env = spec["environment"];
      if (!env.is_object()) {
        return BadParam("spec.environment must be an object");
      }
      if (env.contains("image_uri")) {
        if (!env["image_uri"].is_string()) {
          return BadParam("spec.environment.image_uri must be a string");
        }
        out.image_uri = env["image_uri"].get<std::string>();
      }
    }
  }
  if (j.contains("metadata")) {
    const json& md = j["metadata"];
    if (!md.is_object()) {
      return BadParam("metadata must be an object");
    }
    if (md.contains("custom_tags")) {
      const json& tags = md["custom_tags"];
      if (!tags.is_object()) {
        return BadParam("metadata.custom_tags must be an object");
      }
      if (tags.size() > 54) {
        return BadParam("metadata.custom_tags allows at most 54 tags");
      }
      std::map<std::string, std::string> m;
      for (auto it = tags.begin(); it != tags.end(); ++it) {
        if (!it.value().is_string()) {
          return BadParam("custom tag values must be strings");
        }
        if (it.key().empty() || it.key().size() > 512 ||
            it.value().get<std::string>().size() > 256) {
          return BadParam("custom tag keys must be 1-512 and values at most 256 characters");
        }
        m[it.key()] = it.value().get<std::string>();
      }
      out.custom_tags = std::move(m);
    }
  }
  return std::nullopt;
}

HttpResponse SandboxApi::Create(const HttpRequest& req) {
  auto q = req.query.find("sandbox_id");
  std::string id = q == req.query.end() ? std::string() : q->second;
  if (auto e = ValidateId(id)) {
    return state_.ErrorResponse(*e);
  }
  auto parsed = ParseObject(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    return state_.ErrorResponse(*e);
  }
  SandboxFields f;
  if (auto e = ParseSandboxFields(std::get<json>(parsed), f)) {
    return state_.ErrorResponse(*e);
  }

  std::lock_guard lock(state_.mu);
  if (state_.stopped) {
    return state_.ErrorResponse({503, "TEMPORARILY_UNAVAILABLE", "Emulator is shutting down", {}});
  }
  if (state_.FindLocked(id) != nullptr) {
    return state_.ErrorResponse(
        {409, "RESOURCE_ALREADY_EXISTS", "Sandbox 'sandboxes/" + id + "' already exists", {}});
  }
  if (state_.options.max_sandboxes > 0 && state_.sandboxes.size() >= state_.options.max_sandboxes) {
    return state_.ErrorResponse(QuotaExceeded(
        "workspace",
        "Workspace sandbox quota of " + std::to_string(state_.options.max_sandboxes) + " reached"));
  }
  const std::string owner = state_.PrincipalLocked(req);
  if (const std::size_t limit = state_.options.max_sandboxes_per_user; limit > 0) {
    std::size_t owned = 0;
    for (const auto& [other_id, other] : state_.sandboxes) {
      owned += other.owner == owner ? 1 : 0;
    }
    if (owned >= limit) {
      return state_.ErrorResponse(
          QuotaExceeded("user", "Per-user sandbox quota of " + std::to_string(limit) +
                                    " reached; delete a sandbox to create another"));
    }
  }
  std::error_code ec;
  fs::path dir = state_.SandboxDir(id);
  fs::remove_all(dir, ec);
  fs::create_directories(dir / "home", ec);
  if (ec) {
    return state_.ErrorResponse(
        {500, "INTERNAL_ERROR", "cannot create sandbox storage: " + ec.message(), {}});
  }
  fs::permissions(dir / "home",
                  fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                      fs::perms::others_read | fs::perms::others_exec,
                  ec);
  SandboxRec sb;
  sb.id = id;
  sb.display_name = f.display_name.value_or("");
  sb.inactivity_timeout = f.inactivity_timeout;
  sb.image_uri = f.image_uri.value_or("");
  sb.custom_tags = f.custom_tags.value_or(std::map<std::string, std::string>{});
  auto now = SteadyClock::now();
  sb.owner = owner;
  state_.BeginPendingLocked(sb, now);
  sb.create_time = sb.update_time = SystemClock::now();
  sb.last_activity = now;
  state_.WipeScratchLocked(sb);
  json out = state_.SandboxJson(sb);
  state_.sandboxes.emplace(id, std::move(sb));
  state_.cv.notify_all();
  return Ok(out);
}

HttpResponse SandboxApi::Get(const std::string& id) {
  std::lock_guard lock(state_.mu);
  SandboxRec* sb = state_.FindLocked(id);
  if (sb == nullptr) {
    return state_.ErrorResponse(SandboxNotFound(id));
  }
  return Ok(state_.SandboxJson(*sb));
}

HttpResponse SandboxApi::List(const HttpRequest& req) {
  auto size = ParsePageSize(req, kDefaultPageSize);
  if (auto* e = std::get_if<ApiError>(&size)) {
    return state_.ErrorResponse(*e);
  }
  int page_size = std::get<int>(size);
  std::string start;
  if (auto t = req.query.find("page_token"); t != req.query.end() && !t->second.empty()) {
    auto decoded = Unhex(t->second);
    if (!decoded) {
      return state_.ErrorResponse(BadParam("Invalid page_token"));
    }
    start = *decoded;
  }
  std::lock_guard lock(state_.mu);
  state_.AdvanceLocked(SteadyClock::now());
  json list = json::array();
  // Pages are ordered by id and the token is the next id, so deletes between pages never
  // make a client skip a sandbox that still exists.
  auto it = state_.sandboxes.lower_bound(start);
  for (; it != state_.sandboxes.end() && static_cast<int>(list.size()) < page_size; ++it) {
    list.push_back(state_.SandboxJson(it->second));
  }
  json out = json::object();
  if (!list.empty()) {
    out["sandboxes"] = list;
  }
  if (it != state_.sandboxes.end()) {
    out["next_page_token"] = Hex(it->first);
  }
  return Ok(out);
}

HttpResponse SandboxApi::Update(const std::string& id, const HttpRequest& req) {
  auto q = req.query.find("update_mask");
  std::string mask = q == req.query.end() ? std::string() : q->second;
  std::set<std::string> paths;
  for (std::size_t start = 0; start <= mask.size();) {
    std::size_t comma = mask.find(',', start);
    if (comma == std::string::npos) {
      comma = mask.size();
    }
    std::string p = Trim(std::string_view(mask).substr(start, comma - start));
    if (!p.empty()) {
      paths.insert(p);
    }
    start = comma + 1;
  }
  if (paths.empty()) {
    return state_.ErrorResponse(BadParam("update_mask must not be empty"));
  }
  bool want_name = false, want_timeout = false;
  for (const auto& p : paths) {
    if (p == "display_name" ||
        (state_.options.accept_legacy_mask_paths && p == "metadata.display_name")) {
      want_name = true;
    } else if (p == "spec.compute.inactivity_timeout" ||
               (state_.options.accept_legacy_mask_paths && p == "spec")) {
      want_timeout = true;
    } else {
      return state_.ErrorResponse(
          BadParam("Invalid update_mask path '" + p +
                   "': only display_name and spec.compute.inactivity_timeout "
                   "can be updated"));
    }
  }
  auto parsed = ParseObject(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    return state_.ErrorResponse(*e);
  }
  json body = std::get<json>(parsed);
  if (state_.options.accept_legacy_mask_paths && !body.contains("display_name") &&
      body.contains("metadata") && body["metadata"].is_object() &&
      body["metadata"].contains("display_name")) {
    body["display_name"] = body["metadata"]["display_name"];
    body["metadata"].erase("display_name");
  }
  SandboxFields f;
  if (auto e = ParseSandboxFields(body, f)) {
    return state_.ErrorResponse(*e);
  }

  std::unique_lock lock(state_.mu);
  SandboxRec* sb = state_.FindLocked(id);
  if (sb == nullptr) {
    return state_.ErrorResponse(SandboxNotFound(id));
  }
  // §3 row 4 (early docs): a concurrent update is refused with 409 ABORTED. An update takes
  // `update_duration`; another PATCH of the same sandbox meanwhile is concurrent.
  if (sb->updates_in_flight > 0) {
    return state_.ErrorResponse(
        {409,
         "ABORTED",
         "Sandbox 'sandboxes/" + id + "' is being updated by another request; retry the update",
         {}});
  }
  if (state_.options.update_duration.count() > 0) {
    ++sb->updates_in_flight;
    state_.cv.wait_for(lock, state_.options.update_duration, [&] { return state_.stopped; });
    sb = state_.FindLocked(id);
    if (sb == nullptr) {
      return state_.ErrorResponse(SandboxNotFound(id));  // deleted meanwhile
    }
    if (sb->updates_in_flight > 0) {  // (0 if it was deleted and created again meanwhile)
      --sb->updates_in_flight;
    }
  }
  // FieldMask semantics: a masked path absent from the body is cleared.
  if (want_name) {
    sb->display_name = f.display_name.value_or("");
  }
  if (want_timeout) {
    sb->inactivity_timeout = f.inactivity_timeout;
  }
  sb->update_time = SystemClock::now();
  state_.cv.notify_all();
  return Ok(state_.SandboxJson(*sb));
}

HttpResponse SandboxApi::Delete(const std::string& id) {
  std::lock_guard lock(state_.mu);
  SandboxRec* sb = state_.FindLocked(id);
  if (sb == nullptr || sb->deleting) {
    return state_.ErrorResponse(SandboxNotFound(id));
  }
  if (state_.options.delete_via_stopping) {
    sb->deleting = true;
    state_.BeginStopLocked(*sb, SteadyClock::now());
  } else {
    state_.KillSandboxLocked(*sb);
    std::error_code ec;
    fs::remove_all(state_.SandboxDir(id), ec);
    state_.sandboxes.erase(id);
  }
  return Ok(json::object());
}

HttpResponse SandboxApi::StartSandbox(const std::string& id, const HttpRequest& req) {
  auto parsed = ParseObject(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    return state_.ErrorResponse(*e);
  }
  std::lock_guard lock(state_.mu);
  SandboxRec* sb = state_.FindLocked(id);
  // Documented: NOT_FOUND unless a *stopped* sandbox of that name exists (§3 row 6).
  if (sb == nullptr || sb->state != SandboxState::kStopped || sb->deleting) {
    return state_.ErrorResponse(NotFound("No stopped sandbox 'sandboxes/" + id + "' to start"));
  }
  auto now = SteadyClock::now();
  ++sb->boot;
  state_.BeginPendingLocked(*sb, now);
  sb->last_activity = now;
  if (state_.options.reset_create_time_on_start) {
    sb->create_time = SystemClock::now();
  }
  state_.WipeScratchLocked(*sb);
  state_.cv.notify_all();
  return Ok(state_.SandboxJson(*sb));
}

HttpResponse SandboxApi::StopSandbox(const std::string& id, const HttpRequest& req) {
  auto parsed = ParseObject(req.body);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    return state_.ErrorResponse(*e);
  }
  std::lock_guard lock(state_.mu);
  SandboxRec* sb = state_.FindLocked(id);
  if (sb == nullptr) {
    return state_.ErrorResponse(SandboxNotFound(id));
  }
  // §13.6: stop on STOPPING/STOPPED is a no-op returning the current state (lakebox).
  if (sb->state == SandboxState::kRunning || sb->state == SandboxState::kPending) {
    state_.BeginStopLocked(*sb, SteadyClock::now());
  }
  return Ok(state_.SandboxJson(*sb));
}

}  // namespace sbx::emulator::internal::databricks
