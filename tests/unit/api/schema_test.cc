// The JSON Schemas in manifests/schema/ describe exactly the fields the codec reads and
// writes, and their enum values decode: the schemas cannot drift from the code.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "api/codec.h"
#include "api/kinds.h"
#include "api/text.h"
#include "tests/unit/api/test_objects.h"

namespace sbx::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json LoadSchema(Kind kind) {
  const fs::path path =
      fs::path(SBX_SOURCE_DIR) / "manifests" / "schema" / std::string(KindInfoOf(kind).schema);
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

const json& Resolve(const json& root, const json& node) {
  if (node.contains("$ref")) {
    const std::string ref = node["$ref"];
    const std::string prefix = "#/definitions/";
    EXPECT_EQ(ref.rfind(prefix, 0), 0u) << ref;
    return root["definitions"][ref.substr(prefix.size())];
  }
  return node;
}

// Field paths a schema allows ("spec.setup[].name"); free-form maps end at the map itself.
void SchemaPaths(const json& root, const json& node, const std::string& prefix,
                 std::set<std::string>& out, std::map<std::string, json>* enums) {
  const json& n = Resolve(root, node);
  if (n.contains("allOf")) {
    for (const json& part : n["allOf"]) {
      SchemaPaths(root, part, prefix, out, enums);
    }
  }
  if (enums != nullptr && n.contains("enum")) {
    (*enums)[prefix] = n["enum"];
  }
  if (n.contains("properties")) {
    EXPECT_EQ(n.value("additionalProperties", true), false) << prefix << " must be closed";
    for (const auto& [key, child] : n["properties"].items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      out.insert(path);
      if (path != "status") {
        SchemaPaths(root, child, path, out, enums);
      }
    }
  }
  if (n.contains("items")) {
    SchemaPaths(root, n["items"], prefix + "[]", out, enums);
  }
}

// Field paths present in an encoded object; labels, annotations, an AgentTask's
// workerSelector.matchLabels and a Notifier's selector.matchLabels are free-form maps.
void EncodedPaths(const json& node, const std::string& prefix, std::set<std::string>& out) {
  if (node.is_object()) {
    if (prefix == "metadata.labels" || prefix == "metadata.annotations" ||
        prefix == "spec.workerSelector.matchLabels" || prefix == "status" ||
        prefix == "spec.template.metadata.labels" || prefix == "spec.selector.matchLabels") {
      return;
    }
    for (const auto& [key, child] : node.items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      out.insert(path);
      EncodedPaths(child, path, out);
    }
  } else if (node.is_array()) {
    for (const json& item : node) {
      EncodedPaths(item, prefix + "[]", out);
    }
  }
}

// Sets both halves of every secret reference so both field names get encoded.
void FillSecrets(Object& o) {
  const SecretRef both{"ENV_NAME", "/path/to/file"};
  if (o.kind == Kind::kWorkspace) {
    WorkspaceSpec& s = o.workspace_spec();
    s.databricks.token_from = s.databricks.client_id_from = s.databricks.client_secret_from =
        s.openai.api_key_from = both;
  } else if (o.kind == Kind::kAgentWorker) {
    o.agent_worker_spec().executor.api_key_from = both;
    for (EnvVar& var : o.agent_worker_spec().executor.env) {
      if (!var.value_from.empty()) {
        var.value_from = both;
      }
    }
    o.agent_worker_spec().sandbox_ref = "also-set";
  } else if (o.kind == Kind::kGitSource) {
    o.git_source_spec().credentials = {both, both};
  } else if (o.kind == Kind::kAgentPool) {
    AgentWorkerSpec& t = o.agent_pool_spec().template_.spec;
    t.executor.api_key_from = both;
    for (EnvVar& var : t.executor.env) {
      if (!var.value_from.empty()) {
        var.value_from = both;
      }
    }
  } else if (o.kind == Kind::kNotifier) {
    o.notifier_spec().url_from = o.notifier_spec().signing_secret_from = both;
  }
}

class SchemaTest : public ::testing::TestWithParam<Kind> {};

TEST_P(SchemaTest, PropertiesMatchTheCodec) {
  Object o = GetParam() == Kind::kWorkspace   ? test_objects::FullWorkspace()
             : GetParam() == Kind::kSandbox   ? test_objects::FullSandbox()
             : GetParam() == Kind::kAgentTask ? test_objects::FullTask()
             : GetParam() == Kind::kGitSource ? test_objects::FullGitSource()
             : GetParam() == Kind::kAgentPool ? test_objects::FullPool()
             : GetParam() == Kind::kNotifier  ? test_objects::FullNotifier()
                                              : test_objects::FullWorker();
  FillSecrets(o);
  o.metadata = test_objects::FullSandbox().metadata;  // every metadata field set
  const json schema = LoadSchema(GetParam());
  EXPECT_EQ(schema["properties"]["kind"]["const"], std::string(KindName(GetParam())));
  EXPECT_EQ(schema["properties"]["apiVersion"]["const"], std::string(kApiVersion));

  std::set<std::string> from_schema;
  SchemaPaths(schema, schema, "", from_schema, nullptr);
  std::set<std::string> from_codec;
  EncodedPaths(json::parse(EncodeObjectJson(o)), "", from_codec);
  from_codec.insert("status");  // accepted and ignored in manifests
  EXPECT_EQ(from_schema, from_codec);
}

TEST_P(SchemaTest, EnumValuesDecode) {
  const json schema = LoadSchema(GetParam());
  std::set<std::string> paths;
  std::map<std::string, json> enums;
  SchemaPaths(schema, schema, "", paths, &enums);
  int checked = 0;
  for (const auto& [path, values] : enums) {
    if (path.find("[]") != std::string::npos || path.rfind("spec.", 0) != 0) {
      continue;  // list items and metadata are covered by the codec tests
    }
    for (const json& value : values) {
      json doc = {{"apiVersion", kApiVersion},
                  {"kind", KindName(GetParam())},
                  {"metadata", {{"name", "x"}}}};
      json* at = &doc;
      std::stringstream parts(path);
      for (std::string part; std::getline(parts, part, '.');) {
        at = &(*at)[part];
      }
      *at = value;
      StatusOr<std::vector<Manifest>> ms = DecodeManifests(doc.dump(), "enum.json");
      EXPECT_TRUE(ms.ok()) << path << "=" << value << ": " << ms.status();
      ++checked;
    }
  }
  if (GetParam() == Kind::kSandbox || GetParam() == Kind::kAgentWorker ||
      GetParam() == Kind::kAgentPool || GetParam() == Kind::kNotifier) {
    EXPECT_GT(checked, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllKinds, SchemaTest, ::testing::ValuesIn(kAllKinds),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(KindName(info.param));
                         });

}  // namespace
}  // namespace sbx::api
