// Validation of single sbx objects, after defaulting (api/defaults.h).
//
// Returns the first problem as kInvalidArgument "<field.path>: <problem>" (e.g.
// "spec.setup[1].name: duplicate step name \"deps\""); sbxctl places it in the manifest with
// LocateError (api/codec.h). Checks each object on its own: cross-object rules (references
// that resolve, immutable image) are the controller's, reported as conditions (DESIGN §3).
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::api {

Status Validate(const Object& object);

// Building blocks, exposed for sbxctl flags and reconcilers. Each returns the problem text
// (without a field path) or "" when valid.
// DNS-1123 label: 1–63 of [a-z0-9-], starting and ending with [a-z0-9].
std::string ValidateDnsLabel(std::string_view value);

}  // namespace sbx::api
