#include "controller/cloud/secret_resolver.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace sbx::controller {
namespace {

namespace fs = std::filesystem;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

// A temporary directory holding secrets/ (the policy's directory) and outside/ next to it.
class SecretResolverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sbx-secret-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "secrets");
    fs::create_directories(root_ / "outside");
    policy_.secrets_dir = (root_ / "secrets").string();
    policy_.scope = SecretScope::kGlobal;  // the namespace rules have tests of their own below
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const fs::path& path, const std::string& content) { std::ofstream(path) << content; }

  fs::path root_;
  SecretPolicy policy_;
};

TEST_F(SecretResolverTest, ReadsAllowedEnvironmentVariableAndTrims) {
  auto v = ResolveSecret({.env = "SBX_SECRET_TOKEN"}, Env({{"SBX_SECRET_TOKEN", " dapi-123\n"}}),
                         "spec.tokenFrom", policy_, "default");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "dapi-123");
}

TEST_F(SecretResolverTest, ReadsAFileOfTheSecretsDirectoryAndTrimsTrailingNewline) {
  Write(root_ / "secrets" / "api-key", "s3cr3t-value\n");
  auto v = ResolveSecret({.file = "api-key"}, Env({}), "spec.apiKeyFrom", policy_, "default");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "s3cr3t-value");
}

TEST_F(SecretResolverTest, RefusesTheControllersOwnVariables) {
  for (const char* name :
       {"DATABRICKS_TOKEN", "OPENAI_API_KEY", "OPENAI_EXECUTOR_API_KEY", "HOME", "SBX_SECRET_"}) {
    auto v = ResolveSecret({.env = name}, Env({{name, "controller-secret"}}), "spec.x", policy_,
                           "default");
    ASSERT_FALSE(v.ok()) << name;
    EXPECT_EQ(v.status().reason(), "SecretNotAllowed") << name;
    EXPECT_NE(v.status().message().find("SBX_SECRET_"), std::string::npos) << v.status();
    EXPECT_EQ(v.status().message().find("controller-secret"), std::string::npos);
  }
}

TEST_F(SecretResolverTest, TheEnvironmentPrefixIsTheOperators) {
  policy_.env_prefix = "TEAM_A_";
  EXPECT_TRUE(
      ResolveSecret({.env = "TEAM_A_KEY"}, Env({{"TEAM_A_KEY", "k"}}), "f", policy_, "default")
          .ok());
  EXPECT_EQ(ResolveSecret({.env = "SBX_SECRET_KEY"}, Env({{"SBX_SECRET_KEY", "k"}}), "f", policy_,
                          "default")
                .status()
                .reason(),
            "SecretNotAllowed");
}

TEST_F(SecretResolverTest, RefusesFilesOutsideTheSecretsDirectory) {
  Write(root_ / "outside" / "other", "not-yours");
  for (const char* name :
       {"/proc/self/environ", "/etc/hostname", "../outside/other", "..", ".", "sub/file"}) {
    auto v = ResolveSecret({.file = name}, Env({}), "spec.x", policy_, "default");
    ASSERT_FALSE(v.ok()) << name;
    EXPECT_EQ(v.status().reason(), "SecretNotAllowed") << name << ": " << v.status();
  }
}

TEST_F(SecretResolverTest, FollowsLinksOnlyWhileTheyStayInsideTheDirectory) {
  // A Kubernetes secret volume: key -> ..data/key, ..data -> ..2026_12_01.
  fs::create_directories(root_ / "secrets" / "..2026_12_01");
  Write(root_ / "secrets" / "..2026_12_01" / "token", "dapi-mounted\n");
  fs::create_directory_symlink("..2026_12_01", root_ / "secrets" / "..data");
  fs::create_symlink("..data/token", root_ / "secrets" / "token");
  auto mounted = ResolveSecret({.file = "token"}, Env({}), "spec.x", policy_, "default");
  ASSERT_TRUE(mounted.ok()) << mounted.status();
  EXPECT_EQ(*mounted, "dapi-mounted");

  Write(root_ / "outside" / "stolen", "not-yours");
  fs::create_symlink(root_ / "outside" / "stolen", root_ / "secrets" / "escape");
  fs::create_symlink("/etc/hostname", root_ / "secrets" / "hostname");
  for (const char* name : {"escape", "hostname"}) {
    auto v = ResolveSecret({.file = name}, Env({}), "spec.x", policy_, "default");
    ASSERT_FALSE(v.ok()) << name;
    EXPECT_EQ(v.status().reason(), "SecretNotAllowed") << v.status();
    EXPECT_EQ(v.status().message().find("not-yours"), std::string::npos);
  }
}

TEST_F(SecretResolverTest, RefusesOversizedAndSpecialFiles) {
  Write(root_ / "secrets" / "big", std::string(kMaxSecretFileBytes + 1, 'x'));
  EXPECT_EQ(ResolveSecret({.file = "big"}, Env({}), "spec.x", policy_, "default").status().code(),
            api::StatusCode::kFailedPrecondition);
  fs::create_directories(root_ / "secrets" / "dir");
  EXPECT_EQ(ResolveSecret({.file = "dir"}, Env({}), "spec.x", policy_, "default").status().code(),
            api::StatusCode::kFailedPrecondition);
}

TEST_F(SecretResolverTest, ErrorsNameTheReferenceNeverAValue) {
  auto missing = ResolveSecret({.env = "SBX_SECRET_NOPE"}, Env({{"OTHER", "visible-secret"}}),
                               "spec.x", policy_, "default");
  EXPECT_EQ(missing.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("spec.x: environment variable SBX_SECRET_NOPE"),
            std::string::npos);
  EXPECT_EQ(missing.status().message().find("visible-secret"), std::string::npos);

  auto empty = ResolveSecret({.env = "SBX_SECRET_EMPTY"}, Env({{"SBX_SECRET_EMPTY", "  "}}),
                             "spec.x", policy_, "default");
  EXPECT_EQ(empty.status().code(), api::StatusCode::kFailedPrecondition);

  auto nofile = ResolveSecret({.file = "absent"}, Env({}), "spec.y", policy_, "default");
  EXPECT_EQ(nofile.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(nofile.status().message().find("\"absent\""), std::string::npos);

  EXPECT_EQ(ResolveSecret({}, Env({}), "spec.z", policy_, "default").status().code(),
            api::StatusCode::kInvalidArgument);
}

TEST_F(SecretResolverTest, WithoutASecretsDirectoryFileReferencesCannotBeResolved) {
  policy_.secrets_dir.clear();
  auto v = ResolveSecret({.file = "token"}, Env({}), "spec.x", policy_, "default");
  EXPECT_EQ(v.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(v.status().message().find("--secrets-dir"), std::string::npos);
}

// #24 item 8, DESIGN §8.4: namespaces are a boundary. An object of team-a names only
// SBX_SECRET_TEAM_A_… and files of secrets/team-a/, unless the operator granted it more; the
// same names are refused to team-b, and a namespace from the store that is no DNS label names no
// directory.
TEST_F(SecretResolverTest, ANamespaceReadsOnlyItsOwnSourcesAndWhatIsGrantedToIt) {
  policy_.scope = SecretScope::kNamespace;
  fs::create_directories(root_ / "secrets" / "team-a");
  fs::create_directories(root_ / "secrets" / "team-b");
  Write(root_ / "secrets" / "team-a" / "token", "a-file\n");
  Write(root_ / "secrets" / "team-b" / "token", "b-file\n");
  Write(root_ / "secrets" / "shared", "shared-file\n");
  const EnvLookup env = Env({{"SBX_SECRET_TEAM_A_KEY", "a-env"},
                             {"SBX_SECRET_TEAM_B_KEY", "b-env"},
                             {"SBX_SECRET_SHARED", "shared-env"}});
  const auto resolve = [&](const api::SecretRef& ref, std::string_view ns) {
    return ResolveSecret(ref, env, "spec.x", policy_, ns);
  };
  EXPECT_EQ(*resolve({.env = "SBX_SECRET_TEAM_A_KEY"}, "team-a"), "a-env");
  EXPECT_EQ(*resolve({.file = "token"}, "team-a"), "a-file");
  EXPECT_EQ(*resolve({.file = "token"}, "team-b"), "b-file");
  for (const auto& [ref, ns] : std::vector<std::pair<api::SecretRef, std::string>>{
           {{.env = "SBX_SECRET_TEAM_B_KEY"}, "team-a"},
           {{.env = "SBX_SECRET_SHARED"}, "team-a"},
           {{.env = "SBX_SECRET_TEAM_A_"}, "team-a"},
           {{.env = "SBX_SECRET_TEAM_A_KEY"}, "team-b"},
           {{.env = "SBX_SECRET_TEAM_A_KEY"}, "../team-a"},
           {{.file = "token"}, ".."}}) {
    auto v = resolve(ref, ns);
    EXPECT_EQ(v.status().code(), api::StatusCode::kInvalidArgument) << ref.env << " in " << ns;
    EXPECT_EQ(v.status().reason(), "SecretNotAllowed");
    EXPECT_EQ(std::string(v.status().message()).find("-env"), std::string::npos);
  }
  // A top-level file is no namespace's own.
  EXPECT_EQ(resolve({.file = "shared"}, "team-a").status().code(),
            api::StatusCode::kFailedPrecondition);

  auto grants = ParseSecretGrants("grants",
                                  "# shared with team-a\nteam-a env:SBX_SECRET_SHARED\n"
                                  "team-a file:shared\n\nteam-c SBX_SECRET_SHARED\n",
                                  policy_.env_prefix);
  ASSERT_TRUE(grants.ok()) << grants.status();
  policy_.grants = *grants;
  EXPECT_EQ(*resolve({.env = "SBX_SECRET_SHARED"}, "team-a"), "shared-env");
  EXPECT_EQ(*resolve({.file = "shared"}, "team-a"), "shared-file");
  EXPECT_EQ(*resolve({.env = "SBX_SECRET_SHARED"}, "team-c"), "shared-env");
  EXPECT_FALSE(resolve({.env = "SBX_SECRET_SHARED"}, "team-b").ok());
  EXPECT_FALSE(resolve({.file = "shared"}, "team-c").ok());
}

TEST(SecretGrantsTest, ABadLineIsNamedByFileAndLine) {
  auto bad_ns = ParseSecretGrants(
      "/etc/sbx/grants", "team-a env:SBX_SECRET_X\nTeam_B env:SBX_SECRET_X\n", "SBX_SECRET_");
  EXPECT_EQ(bad_ns.status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_TRUE(std::string(bad_ns.status().message()).starts_with("/etc/sbx/grants:2: "))
      << bad_ns.status();
  // A grant cannot open what no manifest may name: the controller's own variables, a path.
  EXPECT_FALSE(ParseSecretGrants("g", "team-a OPENAI_API_KEY\n", "SBX_SECRET_").ok());
  EXPECT_FALSE(ParseSecretGrants("g", "team-a file:../x\n", "SBX_SECRET_").ok());
  EXPECT_FALSE(ParseSecretGrants("g", "team-a\n", "SBX_SECRET_").ok());
  EXPECT_EQ(NamespaceEnvPrefix("SBX_SECRET_", "team-a"), "SBX_SECRET_TEAM_A_");
  EXPECT_EQ(ParseSecretScope("global"), SecretScope::kGlobal);
  EXPECT_EQ(ParseSecretScope("namespace"), SecretScope::kNamespace);
  EXPECT_EQ(ParseSecretScope("Global"), std::nullopt);
}

// The namespaces' files are known secrets too: scrubbed from the first line sbxd writes.
TEST_F(SecretResolverTest, KnownSecretValuesIncludeTheNamespacesFiles) {
  fs::create_directories(root_ / "secrets" / "team-a");
  Write(root_ / "secrets" / "team-a" / "token", "a-file\n");
  Write(root_ / "secrets" / "top", "top-file\n");
  const std::vector<std::string> known = KnownSecretValues(policy_, {});
  EXPECT_NE(std::find(known.begin(), known.end(), "a-file"), known.end());
  EXPECT_NE(std::find(known.begin(), known.end(), "top-file"), known.end());
}

TEST(DefaultSecretsDirTest, FollowsXdgConfigHomeElseEtc) {
  EXPECT_EQ(DefaultSecretsDir(Env({{"XDG_CONFIG_HOME", "/home/u/.config"}})),
            "/home/u/.config/sbx/secrets");
  EXPECT_EQ(DefaultSecretsDir(Env({})), "/etc/sbx/secrets");
}

}  // namespace
}  // namespace sbx::controller
