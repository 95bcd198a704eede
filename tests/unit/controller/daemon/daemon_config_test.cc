// DaemonConfig: sbxd's flags checked and resolved before anything starts. Every refusal names
// its flag (sbxd prints "sbxd: error: <message>" and exits 2).
#include "controller/daemon/daemon_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace sbx::controller::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

DaemonFlags Flags() {
  DaemonFlags f;
  f.db = "/var/lib/sbx/state/sbx.db";
  return f;
}

std::string ErrorOf(const DaemonFlags& flags) {
  api::StatusOr<DaemonConfig> c = ResolveConfig(flags, {});
  return c.ok() ? "" : c.status().message();
}

TEST(DaemonConfigTest, DefaultsResolveToTypedValues) {
  DaemonFlags f = Flags();
  f.resync = "30s";
  f.identity = "";
  api::StatusOr<DaemonConfig> c = ResolveConfig(f, {"PATH=/bin"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->resync, std::chrono::seconds(30));
  EXPECT_EQ(c->sweep_interval, std::chrono::seconds(60));
  EXPECT_EQ(c->lease_duration, std::chrono::seconds(15));
  EXPECT_EQ(c->event_ttl, std::chrono::hours(1));
  EXPECT_FALSE(c->identity.empty());    // <host>-<pid>
  EXPECT_FALSE(c->split_by_workspace);  // auto on SQLite: one leader
  EXPECT_EQ(c->git_cache_dir, "/var/lib/sbx/state/git-cache");
  EXPECT_EQ(c->environment, std::vector<std::string>{"PATH=/bin"});
  EXPECT_FALSE(c->webhook_secret.has_value());
}

TEST(DaemonConfigTest, WorkSplitAutoIsByWorkspaceOnPostgres) {
  DaemonFlags f = Flags();
  f.db = "postgres://sbx@127.0.0.1:5432/sbx";
  api::StatusOr<DaemonConfig> c = ResolveConfig(f, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->split_by_workspace);
  // A URL is no directory: the git cache goes to the state directory.
  EXPECT_THAT(c->git_cache_dir, Not(HasSubstr("postgres:")));
  f.work_split = "leader";
  EXPECT_FALSE(ResolveConfig(f, {})->split_by_workspace);
}

TEST(DaemonConfigTest, ThePacingGiveBackIsOnUnlessTurnedOff) {
  EXPECT_TRUE(ResolveConfig(Flags(), {})->pacing_give_back);
  DaemonFlags f = Flags();
  f.pacing_give_back = false;  // sbxd --no-pacing-give-back
  EXPECT_FALSE(ResolveConfig(f, {})->pacing_give_back);
}

TEST(DaemonConfigTest, ABadDurationNamesItsFlag) {
  DaemonFlags f = Flags();
  f.sweep_interval = "soon";
  EXPECT_THAT(ErrorOf(f), StartsWith("--sweep-interval: "));
  f = Flags();
  f.event_ttl = "0s";
  EXPECT_EQ(ErrorOf(f), "--event-ttl: must be positive");
  f = Flags();
  f.log_level = "loud";
  EXPECT_THAT(ErrorOf(f), StartsWith("--log-level: "));
}

TEST(DaemonConfigTest, AuditRetentionCountsInDaysAndZeroKeepsForever) {
  api::StatusOr<DaemonConfig> c = ResolveConfig(Flags(), {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->audit_retention, std::chrono::hours(24 * 90));  // the default, DESIGN §8.3
  EXPECT_EQ(c->audit_log, "");
  DaemonFlags f = Flags();
  f.audit_retention = "365d";
  f.audit_log = "/var/log/sbx/audit.jsonl";
  c = ResolveConfig(f, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->audit_retention, std::chrono::hours(24 * 365));
  EXPECT_EQ(c->audit_log, "/var/log/sbx/audit.jsonl");
  f.audit_retention = "0";
  EXPECT_EQ(ResolveConfig(f, {})->audit_retention.count(), 0);
  f.audit_retention = "9x";
  EXPECT_THAT(ErrorOf(f), StartsWith("--audit-retention: "));
}

TEST(DaemonConfigTest, TheApiIsServedInClearTextOnlyOnLoopbackAndNeverWithoutTokens) {
  DaemonFlags f = Flags();
  f.tokens_file = "/etc/sbx/tokens";
  EXPECT_THAT(ErrorOf(f), HasSubstr("need --listen"));
  f.listen = "0.0.0.0:8443";
  EXPECT_THAT(ErrorOf(f), HasSubstr("not a loopback address"));
  f.tls_cert = "/etc/sbx/cert.pem";
  EXPECT_THAT(ErrorOf(f), HasSubstr("--tls-cert and --tls-key go together"));
  f.tls_key = "/etc/sbx/key.pem";
  EXPECT_EQ(ErrorOf(f), "");
  f = Flags();
  f.listen = "127.0.0.1:8443";
  EXPECT_THAT(ErrorOf(f), HasSubstr("needs --tokens-file"));
}

TEST(DaemonConfigTest, SecretPolicyFlagsAreChecked) {
  DaemonFlags f = Flags();
  f.secret_env_prefix = "";
  EXPECT_THAT(ErrorOf(f), StartsWith("--secret-env-prefix: must not be empty"));
  f = Flags();
  f.secret_scope = "global";
  f.secret_grants = "/nonexistent";
  EXPECT_THAT(ErrorOf(f), HasSubstr("needs --secret-scope=namespace"));
  f.secret_scope = "namespace";
  EXPECT_THAT(ErrorOf(f), HasSubstr("cannot be read"));
  const std::filesystem::path grants =
      std::filesystem::temp_directory_path() / ("sbx-grants-" + std::to_string(getpid()));
  std::ofstream(grants) << "team-a env:SBX_SECRET_SHARED\nteam-b nonsense:x y\n";
  f.secret_grants = grants.string();
  // The grants file's own "PATH:LINE: problem", under the flag's name.
  EXPECT_THAT(ErrorOf(f), StartsWith("--secret-grants: " + grants.string() + ":2:"));
  std::filesystem::remove(grants);
}

TEST(DaemonConfigTest, TheWebhookEndpointNeedsItsSecretWhichNoMessageShows) {
  DaemonFlags f = Flags();
  f.webhook_addr = "127.0.0.1:0";
  unsetenv("OPENAI_WEBHOOK_SECRET");
  EXPECT_THAT(ErrorOf(f), HasSubstr("OPENAI_WEBHOOK_SECRET"));
  setenv("OPENAI_WEBHOOK_SECRET", "whsec_not!base64", 1);
  const std::string bad = ErrorOf(f);
  EXPECT_NE(bad, "");
  EXPECT_THAT(bad, Not(HasSubstr("not!base64")));
  setenv("OPENAI_WEBHOOK_SECRET", "a-plain-secret", 1);
  api::StatusOr<DaemonConfig> c = ResolveConfig(f, {});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->webhook_secret.has_value());
  EXPECT_EQ(c->webhook_secret->key(), "a-plain-secret");
  f.once = true;  // a pass receives no webhooks
  unsetenv("OPENAI_WEBHOOK_SECRET");
  EXPECT_EQ(ErrorOf(f), "");
}

}  // namespace
}  // namespace sbx::controller::daemon
