// EmbeddedSchemas: the JSON Schemas of manifests/schema/, compiled into sbxctl at build time
// (cmake/EmbedSchemas.cmake generates the definition), for `sbxctl explain` and completion of
// field paths. The files are the one source; api's schema test keeps them true to the codec.
// Constant data; thread-safe.
#pragma once

#include <string_view>

#include "api/resources.h"

namespace sbx::cli {

// The schema text of `kind` (manifests/schema/<kind>.schema.json), byte for byte.
std::string_view EmbeddedSchema(api::Kind kind);

}  // namespace sbx::cli
