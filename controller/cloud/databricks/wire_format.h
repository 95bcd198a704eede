// Wire format of the Databricks Sandbox API (reference/databricks-sandbox-api.md §2, §3):
// JSON bodies to and from the structs of sandbox_api.h and protobuf-JSON durations (URL escaping
// and body excerpts are http/wire_text.h). Pure functions, no I/O; thread-safe.
//
// Decoding is lenient the way the SDKs are: unknown fields are ignored, unknown enum values map
// to k*Unknown (the raw value is kept where the struct has room for it), int64 fields accept a
// JSON string or number, durations accept fractional seconds. A body that is not JSON, or a
// field of the wrong JSON type, is kInternal ("the server sent something we cannot read") with
// a short excerpt of the body.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/status.h"
#include "controller/cloud/databricks/sandbox_api.h"

namespace sbx::controller::databricks {

// "900s"; the form the CLI writes and the emulator expects.
std::string FormatDuration(std::chrono::seconds d);
// "<seconds>[.frac]s", optionally negative. Fractions round to the nearest second.
// kInvalidArgument for anything else.
StatusOr<std::chrono::seconds> ParseDuration(std::string_view text);

// "SANDBOX_STATE_RUNNING" → kRunning; unknown → kUnknown; "" → kUnspecified.
SandboxState ParseSandboxState(std::string_view raw);
// "EXECUTE_COMMAND_STATUS_COMPLETED" → kCompleted; unknown → kUnknown.
ExecStatus ParseExecStatus(std::string_view raw);

// Body of POST /sandboxes: display_name, spec.compute.inactivity_timeout,
// spec.environment.image_uri, metadata.custom_tags (each only when set).
std::string EncodeSandboxForCreate(const Sandbox& desired);
// Body of PATCH: only the fields named by `mask`. kInvalidArgument for an empty mask or a path
// this client cannot encode (allowed: display_name, spec.compute.inactivity_timeout,
// spec.environment.image_uri, metadata.custom_tags; the server decides which it accepts).
StatusOr<std::string> EncodeSandboxUpdate(const Sandbox& desired,
                                          const std::vector<std::string>& mask);
std::string EncodeExecRequest(const ExecRequest& request);

StatusOr<Sandbox> DecodeSandbox(std::string_view body);
StatusOr<SandboxPage> DecodeSandboxPage(std::string_view body);
StatusOr<ExecResult> DecodeExecResult(std::string_view body);
// Returns the commands and the next page token ("" on the last page).
StatusOr<std::pair<std::vector<Command>, std::string>> DecodeCommandPage(std::string_view body);

}  // namespace sbx::controller::databricks
