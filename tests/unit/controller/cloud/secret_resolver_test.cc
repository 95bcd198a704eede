#include "controller/cloud/secret_resolver.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace sbx::controller {
namespace {

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(SecretResolverTest, ReadsEnvironmentAndTrims) {
  auto v = ResolveSecret({.env = "TOKEN"}, Env({{"TOKEN", " dapi-123\n"}}), "spec.tokenFrom");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "dapi-123");
}

TEST(SecretResolverTest, ReadsFileAndTrimsTrailingNewline) {
  const auto path = std::filesystem::temp_directory_path() / "sbx-secret-test";
  std::ofstream(path) << "s3cr3t-value\n";
  auto v = ResolveSecret({.file = path.string()}, Env({}), "spec.apiKeyFrom");
  std::filesystem::remove(path);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "s3cr3t-value");
}

TEST(SecretResolverTest, ErrorsNameTheReferenceNeverAValue) {
  auto missing = ResolveSecret({.env = "NOPE"}, Env({{"OTHER", "visible-secret"}}), "spec.x");
  EXPECT_EQ(missing.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("spec.x: environment variable NOPE"),
            std::string::npos);
  EXPECT_EQ(missing.status().message().find("visible-secret"), std::string::npos);

  auto empty = ResolveSecret({.env = "EMPTY"}, Env({{"EMPTY", "  "}}), "spec.x");
  EXPECT_EQ(empty.status().code(), api::StatusCode::kFailedPrecondition);

  auto nofile = ResolveSecret({.file = "/nonexistent/sbx/secret"}, Env({}), "spec.y");
  EXPECT_EQ(nofile.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_NE(nofile.status().message().find("/nonexistent/sbx/secret"), std::string::npos);

  EXPECT_EQ(ResolveSecret({}, Env({}), "spec.z").status().code(),
            api::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sbx::controller
