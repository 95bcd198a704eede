// The shipped example manifests decode, default and validate, and each names the schema of
// its kind for yaml-language-server.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "api/codec.h"
#include "api/defaults.h"
#include "api/text.h"
#include "api/validation.h"

namespace sbx::api {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ExamplesTest, EveryExampleDecodesDefaultsAndValidates) {
  const fs::path dir = fs::path(SBX_SOURCE_DIR) / "manifests" / "examples";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::map<Kind, int> kinds;
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") {
      continue;
    }
    ++files;
    const std::string text = ReadFile(entry.path());
    const std::string name = fs::relative(entry.path(), dir).string();
    // Files in subfolders point one level further up at the schemas.
    const std::string schema_dir =
        entry.path().parent_path() == dir ? "../schema/" : "../../schema/";
    StatusOr<std::vector<Manifest>> manifests = DecodeManifests(text, name);
    ASSERT_TRUE(manifests.ok()) << manifests.status();
    ASSERT_FALSE(manifests->empty()) << name;
    for (Manifest& m : *manifests) {
      ApplyDefaults(m.object);
      Status valid = LocateError(m, Validate(m.object));
      EXPECT_TRUE(valid.ok()) << valid;
      ++kinds[m.object.kind];
      // The first line points editors at the schema of this kind.
      const std::string first_line = text.substr(0, text.find('\n'));
      EXPECT_EQ(first_line, "# yaml-language-server: $schema=" + schema_dir +
                                Lower(KindName(m.object.kind)) + ".schema.json")
          << name;
    }
  }
  EXPECT_GE(files, 5);
  EXPECT_GE(kinds[Kind::kWorkspace], 1);
  EXPECT_GE(kinds[Kind::kSandbox], 2);
  EXPECT_GE(kinds[Kind::kAgentWorker], 1);
}

}  // namespace
}  // namespace sbx::api
