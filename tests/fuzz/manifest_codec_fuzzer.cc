// libFuzzer target for the manifest codec (api::DecodeManifests): arbitrary bytes as a
// multi-document YAML/JSON manifest file. The codec must never crash, leak or hang; it either
// decodes objects or returns an error Status. For every decoded manifest, LocateError (walks the
// recorded field positions) and the JSON encode/decode round trip are exercised too.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "api/codec.h"
#include "api/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  sbx::api::StatusOr<std::vector<sbx::api::Manifest>> decoded =
      sbx::api::DecodeManifests(content, "fuzz.yaml");
  if (!decoded.ok()) {
    return 0;
  }
  for (const sbx::api::Manifest& m : *decoded) {
    (void)sbx::api::LocateError(
        m, sbx::api::Status(sbx::api::StatusCode::kInvalidArgument, "metadata.name: bad"));
    (void)sbx::api::DecodeObjectJson(sbx::api::EncodeObjectJson(m.object, /*pretty=*/false));
    (void)sbx::api::EncodeObjectYaml(m.object);
  }
  return 0;
}
