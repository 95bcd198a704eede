// Codec: YAML and JSON (de)serialisation of sbx objects.
//
// Decoding manifests is strict: unknown fields (with a "did you mean" hint), wrong types,
// unknown kind or apiVersion, malformed YAML all return kInvalidArgument with one line of the
// form "<file>:<line>:<column>: <field.path>: <problem>". Decoding does not default or validate
// (see api/defaults.h, api/validation.h). Encoding is canonical: the same object always gives
// the same bytes (keys sorted), so the store can compare specs by their encoding.
//
// Canonical form: a field whose C++ default is empty/zero/false/unset is omitted while it has
// that value (and so is a sub-object left empty); a field with a non-empty default
// (metadata.namespace, workspaceRef, power, deletionPolicy, workspaceDirectory,
// executor.command, restartPolicy, setup[].timeout, ownerReferences[].controller) is always
// written. Durations are written in canonical form ("15m", "1h30m"; api/duration.h).
// decode(encode(x)) == x for every object.
//
// Field positions: the <line>:<column> of an error is that of the field's key (of the list
// item for list items, of the document for a missing top-level field).
//
// Hostile input: manifests are read from files a user may not have written, so decoding
// refuses, with a one-line kInvalidArgument error at the offending place, and stops there:
//   - YAML aliases (`*name`): "<file>:<line>:<col>: <field.path>: aliases (*name) are not
//     allowed in sbx manifests". sbx manifests have no use for them, and expanding them is
//     what makes "billion laughs" documents cost gigabytes. (Anchors alone are harmless and
//     accepted.)
//   - nesting deeper than kMaxManifestDepth collections: "...: yaml: nesting deeper than 64
//     levels" (sbx objects need fewer than 10);
//   - more than kMaxManifestNodes keys and values in one text;
//   - a flow collection ("[…]", "{…}") of more than 262,144 entries: "...: yaml: a flow
//     collection ([…] or {…}) with more than 262144 entries; write it in block style" (yaml-cpp
//     would hold all its tokens in memory at once, at up to 250 bytes per byte);
//   - keys or string values that are not UTF-8: "...: <field.path>: not valid UTF-8" (the
//     path of the mapping for a key).
// The size of a manifest file is bounded by its reader (cli/commands/manifest_reader.h).
// Stateless functions; thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "api/resources.h"
#include "api/status.h"

namespace sbx::api {

// Limits of DecodeManifests (see "Hostile input" above). sbx objects nest fewer than 10 levels
// and take 20–50 nodes each, so only input built to hurt reaches them; 250,000 nodes (thousands
// of objects in one text) keep the decoded tree to some tens of MB.
inline constexpr int kMaxManifestDepth = 64;
inline constexpr size_t kMaxManifestNodes = 250'000;

// One object read from a manifest, with where it came from.
struct Manifest {
  Object object;
  std::string file;  // as given to DecodeManifests ("-" for stdin)
  int line = 0;      // 1-based line of the document's first key
  int column = 0;    // 1-based column of the document's first key
  // 1-based line/column of the key of every field decoded, by field path
  // ("metadata.name", "spec.setup[0].run"), so that errors found later (validation) can be
  // reported at their place: see LocateError.
  struct Position {
    int line = 0;
    int column = 0;
  };
  std::map<std::string, Position, std::less<>> positions;
};

// Decodes every document of a (multi-document) YAML or JSON text. Empty documents are skipped.
// Server-set metadata and `status` in a manifest are accepted and ignored.
StatusOr<std::vector<Manifest>> DecodeManifests(std::string_view content, std::string_view file);

// Turns an error "<field.path>: <problem>" (as api::Validate returns) into
// "<file>:<line>:<column>: <field.path>: <problem>" using the position of the deepest field of
// that path present in the manifest (the document's position if none). Keeps the code; OK
// stays OK.
Status LocateError(const Manifest& manifest, const Status& status);

// Full object (apiVersion, kind, metadata, spec, status) as JSON / YAML, for `get -o json|yaml`.
std::string EncodeObjectJson(const Object& object, bool pretty = true);
std::string EncodeObjectYaml(const Object& object);
// Decodes what EncodeObjectJson produced (lenient about unknown fields: newer writers).
StatusOr<Object> DecodeObjectJson(std::string_view json);

// The spec / status alone as canonical compact JSON, for the store.
std::string EncodeSpecJson(const Object& object);
std::string EncodeStatusJson(const Object& object);
StatusOr<Spec> DecodeSpecJson(Kind kind, std::string_view json);
StatusOr<ResourceStatus> DecodeStatusJson(Kind kind, std::string_view json);

}  // namespace sbx::api
