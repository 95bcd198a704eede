// The Sandbox manifests the store benchmarks apply (store_apply_bench, store_backend_bench): a
// realistic spec each (image, idle timeout, one setup step, two labels), so both measure the
// same rows.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "api/resources.h"

namespace sbx::bench {

// `count` Sandboxes worker-0 … worker-<count-1> in namespace `ns`.
inline std::vector<api::Object> SandboxManifests(const std::string& ns, int count) {
  std::vector<api::Object> objects;
  objects.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    api::Object o = api::MakeObject(api::Kind::kSandbox, "worker-" + std::to_string(i), ns);
    api::SandboxSpec& spec = o.sandbox_spec();
    spec.sandbox_id = ns + "-" + o.metadata.name;
    spec.display_name = "bench worker " + std::to_string(i);
    spec.image = "ghcr.io/example/agent:1.2.3";
    spec.inactivity_timeout = std::chrono::minutes(15);
    spec.setup.push_back({"deps", "pip install -r requirements.txt", std::chrono::seconds(300)});
    o.metadata.labels = {{"app", "bench"}, {"shard", std::to_string(i % 10)}};
    objects.push_back(std::move(o));
  }
  return objects;
}

}  // namespace sbx::bench
