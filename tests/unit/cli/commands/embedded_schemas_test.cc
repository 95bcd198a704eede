// sbxctl explain reads the schemas compiled in; they are the files of manifests/schema/, byte
// for byte (one source: the build regenerates them when a file changes).
#include "cli/commands/embedded_schemas.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace sbx::cli {
namespace {

TEST(EmbeddedSchemasTest, AreTheFilesOfManifestsSchema) {
  for (const auto& [kind, file] :
       {std::pair{api::Kind::kWorkspace, "workspace"}, std::pair{api::Kind::kSandbox, "sandbox"},
        std::pair{api::Kind::kAgentWorker, "agentworker"}}) {
    const std::filesystem::path path = std::filesystem::path(SBX_SOURCE_DIR) / "manifests" /
                                       "schema" / (std::string(file) + ".schema.json");
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in.good()) << path;
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(EmbeddedSchema(kind), text.str()) << path;
  }
}

}  // namespace
}  // namespace sbx::cli
