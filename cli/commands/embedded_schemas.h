// EmbeddedSchemas: the JSON Schemas of manifests/schema/, compiled into sbxctl at build time
// (cmake/EmbedSchemas.cmake generates the definition), for `sbxctl explain` and completion of
// field paths. The files are the one source; api's schema test keeps them true to the codec.
// Constant data; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "api/resources.h"

namespace sbx::cli {

// The schema text of `kind` (its file in the kind table, api/kinds.h), byte for byte.
std::string_view EmbeddedSchema(api::Kind kind);
// Every embedded file by name ("sandbox.schema.json"), and one by name ("" if absent).
std::vector<std::string_view> EmbeddedSchemaFiles();
std::string_view EmbeddedSchemaFile(std::string_view name);

}  // namespace sbx::cli
