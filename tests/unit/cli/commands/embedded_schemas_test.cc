// sbxctl explain reads the schemas compiled in; they are the files of manifests/schema/, byte
// for byte, every one of them (one source: the build regenerates them when a file changes or
// one is added), and each kind finds its own through the kind table.
#include "cli/commands/embedded_schemas.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "api/kinds.h"

namespace sbx::cli {
namespace {

namespace fs = std::filesystem;

TEST(EmbeddedSchemasTest, AreEveryFileOfManifestsSchemaByteForByte) {
  const fs::path dir = fs::path(SBX_SOURCE_DIR) / "manifests" / "schema";
  std::set<std::string> on_disk;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!name.ends_with(".schema.json")) {
      continue;
    }
    on_disk.insert(name);
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(EmbeddedSchemaFile(name), text.str()) << e.path();
  }
  const std::vector<std::string_view> embedded = EmbeddedSchemaFiles();
  EXPECT_EQ(std::set<std::string>(embedded.begin(), embedded.end()), on_disk);
}

TEST(EmbeddedSchemasTest, EveryKindHasItsOwn) {
  for (const api::KindInfo& info : api::Kinds()) {
    const std::string_view schema = EmbeddedSchema(info.kind);
    ASSERT_FALSE(schema.empty()) << info.name;
    EXPECT_NE(schema.find("\"const\": \"" + std::string(info.name) + "\""), std::string::npos)
        << info.name << " got another kind's schema";
  }
}

}  // namespace
}  // namespace sbx::cli
