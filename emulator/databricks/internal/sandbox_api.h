// SandboxApi: the handlers of the Sandbox API's lifecycle endpoints (§3): create, get, list,
// update (FieldMask), delete, start and stop. Each validates its request, then reads or writes
// the State; authentication, faults and routing are the Router's.
//
// Thread-safety: thread-safe (handlers take State::mu). Borrows the State, which must outlive
// it.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "emulator/databricks/internal/state.h"

namespace sbx::emulator::internal::databricks {

class SandboxApi {
 public:
  explicit SandboxApi(State& state);

  HttpResponse Create(const HttpRequest& req);
  HttpResponse Get(const std::string& id);
  HttpResponse List(const HttpRequest& req);
  HttpResponse Update(const std::string& id, const HttpRequest& req);
  HttpResponse Delete(const std::string& id);
  HttpResponse StartSandbox(const std::string& id, const HttpRequest& req);
  HttpResponse StopSandbox(const std::string& id, const HttpRequest& req);

 private:
  // Fields of a Sandbox body (create or update), validated; absent fields stay nullopt.
  struct SandboxFields {
    std::optional<std::string> display_name;
    std::optional<Duration> inactivity_timeout;
    std::optional<std::string> image_uri;
    std::optional<std::map<std::string, std::string>> custom_tags;
  };

  std::optional<ApiError> ValidateId(const std::string& id);
  std::optional<ApiError> ParseSandboxFields(const json& j, SandboxFields& out);

  State& state_;
};

}  // namespace sbx::emulator::internal::databricks
