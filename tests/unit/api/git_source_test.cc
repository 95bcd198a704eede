// GitSource (DESIGN §7.3) in the api layer: decoding (prune as a bool or a mapping, defaults),
// and the validation errors a user sees at file:line:col.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "api/codec.h"
#include "api/defaults.h"
#include "api/validation.h"

namespace sbx::api {
namespace {

const std::string kCommit(40, 'a');

// Decodes, defaults and validates one manifest; "OK" or the located error.
std::string Apply(const std::string& spec_yaml) {
  const std::string yaml =
      "apiVersion: sbx.dev/v1alpha1\nkind: GitSource\nmetadata:\n  name: apps\nspec:\n" + spec_yaml;
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "sources/apps.yaml");
  if (!ms.ok()) {
    return ms.status().message();
  }
  Manifest& m = (*ms)[0];
  ApplyDefaults(m.object);
  Status s = LocateError(m, Validate(m.object));
  return s.ok() ? "OK" : s.message();
}

GitSourceSpec Decoded(const std::string& spec_yaml) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: GitSource\nmetadata: {name: apps, namespace: team}\n"
      "spec:\n" +
          spec_yaml,
      "a.yaml");
  EXPECT_TRUE(ms.ok()) << ms.status();
  if (!ms.ok()) {
    return {};
  }
  ApplyDefaults((*ms)[0].object);
  return (*ms)[0].object.git_source_spec();
}

TEST(GitSourceTest, ShortNameAndPluralParse) {
  EXPECT_EQ(*ParseKind("gs"), Kind::kGitSource);
  EXPECT_EQ(*ParseKind("gitsources"), Kind::kGitSource);
  EXPECT_EQ(*ParseKind("GitSource"), Kind::kGitSource);
  EXPECT_EQ(KindName(Kind::kGitSource), "GitSource");
}

TEST(GitSourceTest, DefaultsPathIntervalAndApplyset) {
  const GitSourceSpec s = Decoded("  url: https://git.example.com/a.git\n  ref: {branch: main}\n");
  EXPECT_EQ(s.path, ".");
  EXPECT_EQ(s.interval, std::chrono::minutes(1));
  EXPECT_EQ(s.applyset, "gitsource-team-apps");
  EXPECT_FALSE(s.prune.enabled);
}

TEST(GitSourceTest, PruneIsABoolOrAMapping) {
  const std::string base = "  url: https://h/a.git\n  ref: {tag: v1}\n";
  EXPECT_EQ(Decoded(base + "  prune: true\n").prune, (GitPrune{true, false}));
  EXPECT_EQ(Decoded(base + "  prune: false\n").prune, (GitPrune{false, false}));
  EXPECT_EQ(Decoded(base + "  prune: {enabled: true, allowEmpty: true}\n").prune,
            (GitPrune{true, true}));
  EXPECT_EQ(Apply(base + "  prune: [true]\n"),
            "sources/apps.yaml:8:3: spec.prune: expected true, false or a mapping {enabled, "
            "allowEmpty}, got a list");
  EXPECT_EQ(Apply(base + "  prune: {enabled: true, allowEmpy: true}\n"),
            "sources/apps.yaml:8:26: spec.prune.allowEmpy: unknown field \"allowEmpy\" (did you "
            "mean \"allowEmpty\"?)");
  EXPECT_EQ(Apply(base + "  prune: {allowEmpty: true}\n"),
            "sources/apps.yaml:8:11: spec.prune.allowEmpty: needs prune.enabled: true");
}

TEST(GitSourceTest, ValidSources) {
  EXPECT_EQ(Apply("  url: https://github.com/org/repo.git\n  ref: {branch: main}\n"), "OK");
  EXPECT_EQ(Apply("  url: git@github.com:org/repo.git\n  ref: {tag: v1.2.3}\n  path: deploy/prod\n"
                  "  interval: 1s\n  credentials: {sshKeyFrom: {file: deploy-key}}\n"),
            "OK");
  EXPECT_EQ(Apply("  url: ssh://git@h:2222/r.git\n  ref: {commit: " + kCommit + "}\n"), "OK");
  EXPECT_EQ(Apply("  url: file:///srv/git/r.git\n  ref: {branch: release/1}\n  interval: 24h\n"),
            "OK");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main}\n"
                  "  credentials: {tokenFrom: {env: SBX_SECRET_GIT_TOKEN}}\n  prune: true\n"),
            "OK");
}

TEST(GitSourceTest, BadInputIsRefusedAtItsPlace) {
  EXPECT_EQ(Apply("  ref: {branch: main}\n"),
            "sources/apps.yaml:5:1: spec.url: required field is missing");
  EXPECT_EQ(Apply("  url: \"\"\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: required field is missing");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main, tag: v1}\n"),
            "sources/apps.yaml:7:3: spec.ref: must set only one of branch, tag or commit");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {}\n"),
            "sources/apps.yaml:7:3: spec.ref: must set one of branch, tag or commit");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main}\n  interval: 0s\n"),
            "sources/apps.yaml:8:3: spec.interval: must be between 1s and 24h, got 0s");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main}\n  interval: 25h\n"),
            "sources/apps.yaml:8:3: spec.interval: must be between 1s and 24h, got 25h");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {commit: abc}\n"),
            "sources/apps.yaml:7:9: spec.ref.commit: must be a full commit id (40 or 64 "
            "lowercase hex digits), got \"abc\"");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: \"-x\"}\n"),
            "sources/apps.yaml:7:9: spec.ref.branch: is not a valid git ref name: \"-x\"");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main}\n  path: ../up\n"),
            "sources/apps.yaml:8:3: spec.path: must not contain \"..\", got \"../up\"");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main}\n  path: /etc\n"),
            "sources/apps.yaml:8:3: spec.path: must be a relative path inside the repository, "
            "got \"/etc\"");
}

TEST(GitSourceTest, UrlsCarryNoCredentialsAndNoOptions) {
  EXPECT_EQ(Apply("  url: https://user:pw@h/r.git\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: must not contain user info (put a token in "
            "spec.credentials.tokenFrom), got \"https://user:pw@h/r.git\"");
  EXPECT_EQ(Apply("  url: http://git.example.com/r.git\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: must use https:// (plain http:// only for a "
            "loopback host), got \"http://git.example.com/r.git\"");
  EXPECT_EQ(Apply("  url: \"--upload-pack=touch /tmp/x\"\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: must not contain spaces or control characters");
  EXPECT_EQ(Apply("  url: -uhost:x\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: must not start with '-'");
  EXPECT_EQ(Apply("  url: ext::sh -c x\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: must not contain spaces or control characters");
  EXPECT_EQ(Apply("  url: ext::x\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: must not name a git remote helper (\"::\"), got "
            "\"ext::x\"");
  EXPECT_EQ(Apply("  url: ftp://h/r.git\n  ref: {branch: main}\n"),
            "sources/apps.yaml:6:3: spec.url: must start with https://, ssh://, file:// or be "
            "user@host:path, got \"ftp://h/r.git\"");
}

TEST(GitSourceTest, CredentialsFollowTheSecretRulesAndTheUrl) {
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main}\n"
                  "  credentials: {tokenFrom: {env: HOME}}\n"),
            "sources/apps.yaml:8:29: spec.credentials.tokenFrom.env: environment variable \"HOME\" "
            "is not an allowed secret source: names must start with \"SBX_SECRET_\" (the "
            "controller's own credentials cannot be named; see SECURITY.md)");
  EXPECT_EQ(Apply("  url: git@h:r.git\n  ref: {branch: main}\n"
                  "  credentials: {tokenFrom: {env: SBX_SECRET_T}}\n"),
            "sources/apps.yaml:8:17: spec.credentials.tokenFrom: needs an https:// url");
  EXPECT_EQ(Apply("  url: https://h/r.git\n  ref: {branch: main}\n"
                  "  credentials: {sshKeyFrom: {file: k}, tokenFrom: {file: t}}\n"),
            "sources/apps.yaml:8:3: spec.credentials: must set only one of sshKeyFrom or "
            "tokenFrom");
}

TEST(GitSourceTest, TheDeployExampleIsValid) {
  const std::filesystem::path path =
      std::filesystem::path(SBX_SOURCE_DIR) / "deploy" / "gitops" / "gitsource.yaml";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(text.str(), "gitsource.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_EQ(ms->size(), 1u);
  Manifest& m = (*ms)[0];
  ApplyDefaults(m.object);
  EXPECT_TRUE(Validate(m.object).ok()) << Validate(m.object);
  EXPECT_EQ(m.object.git_source_spec().applyset, "gitsource-team-a-workers");
}

}  // namespace
}  // namespace sbx::api
