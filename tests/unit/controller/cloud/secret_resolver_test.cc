#include "controller/cloud/secret_resolver.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const fs::path& path, const std::string& content) { std::ofstream(path) << content; }

  fs::path root_;
  SecretPolicy policy_;
};

TEST_F(SecretResolverTest, ReadsAllowedEnvironmentVariableAndTrims) {
  auto v = ResolveSecret({.env = "SBX_SECRET_TOKEN"}, Env({{"SBX_SECRET_TOKEN", " dapi-123\n"}}),
                         "spec.tokenFrom", policy_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "dapi-123");
}

TEST_F(SecretResolverTest, ReadsAFileOfTheSecretsDirectoryAndTrimsTrailingNewline) {
  Write(root_ / "secrets" / "api-key", "s3cr3t-value\n");
  auto v = ResolveSecret({.file = "api-key"}, Env({}), "spec.apiKeyFrom", policy_);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "s3cr3t-value");
}

TEST_F(SecretResolverTest, RefusesTheControllersOwnVariables) {
  for (const char* name :
       {"DATABRICKS_TOKEN", "OPENAI_API_KEY", "OPENAI_EXECUTOR_API_KEY", "HOME", "SBX_SECRET_"}) {
    auto v = ResolveSecret({.env = name}, Env({{name, "controller-secret"}}), "spec.x", policy_);
    ASSERT_FALSE(v.ok()) << name;
    EXPECT_EQ(v.status().reason(), "SecretNotAllowed") << name;
    EXPECT_NE(v.status().message().find("SBX_SECRET_"), std::string::npos) << v.status();
    EXPECT_EQ(v.status().message().find("controller-secret"), std::string::npos);
  }
}

TEST_F(SecretResolverTest, TheEnvironmentPrefixIsTheOperators) {
  policy_.env_prefix = "TEAM_A_";
  EXPECT_TRUE(ResolveSecret({.env = "TEAM_A_KEY"}, Env({{"TEAM_A_KEY", "k"}}), "f", policy_).ok());
  EXPECT_EQ(ResolveSecret({.env = "SBX_SECRET_KEY"}, Env({{"SBX_SECRET_KEY", "k"}}), "f", policy_)
                .status()
                .reason(),
            "SecretNotAllowed");
}

TEST_F(SecretResolverTest, RefusesFilesOutsideTheSecretsDirectory) {
  Write(root_ / "outside" / "other", "not-yours");
  for (const char* name :
       {"/proc/self/environ", "/etc/hostname", "../outside/other", "..", ".", "sub/file"}) {
    auto v = ResolveSecret({.file = name}, Env({}), "spec.x", policy_);
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
  auto mounted = ResolveSecret({.file = "token"}, Env({}), "spec.x", policy_);
  ASSERT_TRUE(mounted.ok()) << mounted.status();
  EXPECT_EQ(*mounted, "dapi-mounted");

  Write(root_ / "outside" / "stolen", "not-yours");
  fs::create_symlink(root_ / "outside" / "stolen", root_ / "secrets" / "escape");
  fs::create_symlink("/etc/hostname", root_ / "secrets" / "hostname");
  for (const char* name : {"escape", "hostname"}) {
    auto v = ResolveSecret({.file = name}, Env({}), "spec.x", policy_);
    ASSERT_FALSE(v.ok()) << name;
    EXPECT_EQ(v.status().reason(), "SecretNotAllowed") << v.status();
    EXPECT_EQ(v.status().message().find("not-yours"), std::string::npos);
  }
}

TEST_F(SecretResolverTest, RefusesOversizedAndSpecialFiles) {
  Write(root_ / "secrets" / "big", std::string(kMaxSecretFileBytes + 1, 'x'));
  EXPECT_EQ(ResolveSecret({.file = "big"}, Env({}), "spec.x", policy_).status().code(),
            api::StatusCode::kFailedPrecondition);
  fs::create_directories(root_ / "secrets" / "dir");
  EXPECT_EQ(ResolveSecret({.file = "dir"}, Env({}), "spec.x", policy_).status().code(),
            api::StatusCode::kFailedPrecondition);
}

TEST_F(SecretResolverTest, ErrorsNameTheReferenceNeverAValue) {
  auto missing = ResolveSecret({.env = "SBX_SECRET_NOPE"}, Env({{"OTHER", "visible-secret"}}),
                               "spec.x", policy_);
  EXPECT_EQ(missing.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("spec.x: environment variable SBX_SECRET_NOPE"),
            std::string::npos);
  EXPECT_EQ(missing.status().message().find("visible-secret"), std::string::npos);

  auto empty = ResolveSecret({.env = "SBX_SECRET_EMPTY"}, Env({{"SBX_SECRET_EMPTY", "  "}}),
                             "spec.x", policy_);
  EXPECT_EQ(empty.status().code(), api::StatusCode::kFailedPrecondition);

  auto nofile = ResolveSecret({.file = "absent"}, Env({}), "spec.y", policy_);
  EXPECT_EQ(nofile.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(nofile.status().message().find("\"absent\""), std::string::npos);

  EXPECT_EQ(ResolveSecret({}, Env({}), "spec.z", policy_).status().code(),
            api::StatusCode::kInvalidArgument);
}

TEST_F(SecretResolverTest, WithoutASecretsDirectoryFileReferencesCannotBeResolved) {
  policy_.secrets_dir.clear();
  auto v = ResolveSecret({.file = "token"}, Env({}), "spec.x", policy_);
  EXPECT_EQ(v.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(v.status().message().find("--secrets-dir"), std::string::npos);
}

TEST(DefaultSecretsDirTest, FollowsXdgConfigHomeElseEtc) {
  EXPECT_EQ(DefaultSecretsDir(Env({{"XDG_CONFIG_HOME", "/home/u/.config"}})),
            "/home/u/.config/sbx/secrets");
  EXPECT_EQ(DefaultSecretsDir(Env({})), "/etc/sbx/secrets");
}

}  // namespace
}  // namespace sbx::controller
