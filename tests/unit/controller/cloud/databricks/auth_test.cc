#include "controller/cloud/databricks/auth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "tests/support/fake_clock.h"
#include "tests/unit/controller/cloud/http/fake_transport.h"

namespace sbx::controller::databricks {
namespace {

using namespace std::chrono_literals;
using http::HttpRequest;
using http::HttpResult;
using http::testing::FakeTransport;
using http::testing::HeaderOf;
using http::testing::Reply;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sbx-dbcfg-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    home_ = tmpl;
    env_["HOME"] = home_;
  }
  void TearDown() override { std::filesystem::remove_all(home_); }

  void WriteConfig(const std::string& text, const std::string& name = ".databrickscfg") {
    std::ofstream(home_ + "/" + name) << text;
  }
  Env env() const {
    return [vars = env_](std::string_view name) -> std::optional<std::string> {
      auto it = vars.find(std::string(name));
      return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  }

  std::string home_;
  std::map<std::string, std::string> env_;
};

TEST_F(ConfigTest, ExplicitValuesBeatTheEnvironment) {
  env_["DATABRICKS_HOST"] = "env.example.com";
  env_["DATABRICKS_TOKEN"] = "env-token";
  DatabricksConfig explicit_values;
  explicit_values.host = "https://spec.example.com";
  explicit_values.token = "spec-token";
  auto cfg = ResolveConfig(explicit_values, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://spec.example.com");
  EXPECT_EQ(cfg->token, "spec-token");
}

TEST_F(ConfigTest, EnvironmentFillsWhatIsUnset) {
  env_["DATABRICKS_HOST"] = "env.example.com";
  env_["DATABRICKS_TOKEN"] = "env-token";
  env_["DATABRICKS_WORKSPACE_ID"] = "123";
  DatabricksConfig explicit_values;
  explicit_values.host = "https://spec.example.com";
  auto cfg = ResolveConfig(explicit_values, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://spec.example.com");
  EXPECT_EQ(cfg->token, "env-token");
  EXPECT_EQ(cfg->workspace_id, "123");
}

TEST_F(ConfigTest, FileIsNotReadWhenHostOrAuthCameFromArgumentsOrEnvironment) {
  WriteConfig("[DEFAULT]\nhost = file.example.com\ntoken = file-token\nworkspace_id = 9\n");
  env_["DATABRICKS_HOST"] = "env.example.com";
  auto cfg = ResolveConfig({}, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://env.example.com");
  EXPECT_EQ(cfg->token, "");
  EXPECT_EQ(cfg->workspace_id, "");
}

TEST_F(ConfigTest, FileIsReadWhenNothingIsSet) {
  WriteConfig("[DEFAULT]\nhost = file.example.com\ntoken = file-token\nworkspace_id = 9\n");
  auto cfg = ResolveConfig({}, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://file.example.com");
  EXPECT_EQ(cfg->token, "file-token");
  EXPECT_EQ(cfg->workspace_id, "9");
}

TEST_F(ConfigTest, NamedProfileIsReadEvenWhenHostIsSetAndNeverOverwrites) {
  WriteConfig("[dev]\nhost = file.example.com\ntoken = dev-token\n");
  env_["DATABRICKS_CONFIG_PROFILE"] = "dev";
  DatabricksConfig explicit_values;
  explicit_values.host = "spec.example.com";
  auto cfg = ResolveConfig(explicit_values, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://spec.example.com");  // file never overwrites
  EXPECT_EQ(cfg->token, "dev-token");
  EXPECT_EQ(cfg->profile, "dev");
}

TEST_F(ConfigTest, ExplicitProfileBeatsEnvironmentProfile) {
  WriteConfig("[a]\nhost = a.example.com\ntoken = ta\n[b]\nhost = b.example.com\ntoken = tb\n");
  env_["DATABRICKS_CONFIG_PROFILE"] = "a";
  DatabricksConfig explicit_values;
  explicit_values.profile = "b";
  auto cfg = ResolveConfig(explicit_values, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://b.example.com");
  EXPECT_EQ(cfg->token, "tb");
}

TEST_F(ConfigTest, SettingsDefaultProfileIsUsedWhenNoneIsNamed) {
  WriteConfig(
      "[__settings__]\ndefault_profile = dev\n\n[DEFAULT]\nhost = d.example.com\ntoken = td\n"
      "[dev]\nhost = dev.example.com\ntoken = tdev\n");
  auto cfg = ResolveConfig({}, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://dev.example.com");
  EXPECT_EQ(cfg->token, "tdev");
}

TEST_F(ConfigTest, MissingDefaultProfileIsIgnored) {
  WriteConfig("[other]\nhost = o.example.com\ntoken = t\n");
  env_["DATABRICKS_HOST"] = "";  // set but empty counts as unset
  auto cfg = ResolveConfig({}, env());
  // Nothing found anywhere: the error is about the missing host, not the missing DEFAULT.
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("no Databricks host"), std::string::npos) << cfg.status();
}

TEST_F(ConfigTest, MissingFileIsIgnoredUnlessAProfileWasNamed) {
  DatabricksConfig host_only;
  host_only.host = "h.example.com";
  host_only.token = "t";
  EXPECT_TRUE(ResolveConfig(host_only, env()).ok());
  DatabricksConfig named;
  named.profile = "dev";
  auto cfg = ResolveConfig(named, env());
  EXPECT_EQ(cfg.status().code(), api::StatusCode::kInvalidArgument);
}

TEST_F(ConfigTest, MissingNamedProfileIsAnError) {
  WriteConfig("[DEFAULT]\nhost = d.example.com\ntoken = td\n");
  env_["DATABRICKS_CONFIG_PROFILE"] = "prod";
  auto cfg = ResolveConfig({}, env());
  ASSERT_EQ(cfg.status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_NE(cfg.status().message().find("profile \"prod\" not found"), std::string::npos);
}

TEST_F(ConfigTest, ProfilesDoNotInheritFromDefault) {
  WriteConfig(
      "[DEFAULT]\ntoken = default-token\nworkspace_id = 1\n[dev]\nhost = dev.example.com\n");
  DatabricksConfig named;
  named.profile = "dev";
  auto cfg = ResolveConfig(named, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://dev.example.com");
  EXPECT_EQ(cfg->token, "");
  EXPECT_EQ(cfg->workspace_id, "");
}

TEST_F(ConfigTest, ConfigFileLocationComesFromTheEnvironment) {
  WriteConfig("[DEFAULT]\nhost = elsewhere.example.com\ntoken = t\n", "custom.cfg");
  env_["DATABRICKS_CONFIG_FILE"] = home_ + "/custom.cfg";
  auto cfg = ResolveConfig({}, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://elsewhere.example.com");
}

TEST_F(ConfigTest, IniDialectCommentsCaseAndM2MKeys) {
  WriteConfig(
      "; comment\n# another\n[sp]\nHost = sp.example.com/\nCLIENT_ID = abc ; inline comment\n"
      "client_secret = s#cret\nauth_type = oauth-m2m\n");
  DatabricksConfig named;
  named.profile = "sp";
  auto cfg = ResolveConfig(named, env());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://sp.example.com");
  EXPECT_EQ(cfg->client_id, "abc");
  EXPECT_EQ(cfg->client_secret, "s#cret");
  EXPECT_EQ(cfg->auth_type, "oauth-m2m");
}

TEST_F(ConfigTest, MoreThanOneAuthMethodNeedsAuthType) {
  env_["DATABRICKS_HOST"] = "h.example.com";
  env_["DATABRICKS_TOKEN"] = "secret-pat-value";
  env_["DATABRICKS_CLIENT_ID"] = "id";
  env_["DATABRICKS_CLIENT_SECRET"] = "secret-m2m-value";
  auto cfg = ResolveConfig({}, env());
  ASSERT_EQ(cfg.status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_NE(cfg.status().message().find("more than one authorization method configured"),
            std::string::npos);
  EXPECT_EQ(cfg.status().message().find("secret-pat-value"), std::string::npos);
  EXPECT_EQ(cfg.status().message().find("secret-m2m-value"), std::string::npos);
  env_["DATABRICKS_AUTH_TYPE"] = "oauth-m2m";
  auto pinned = ResolveConfig({}, env());
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->auth_type, "oauth-m2m");
}

TEST_F(ConfigTest, UnknownOrIncompleteAuthTypeIsRejected) {
  env_["DATABRICKS_HOST"] = "h.example.com";
  env_["DATABRICKS_AUTH_TYPE"] = "azure-cli";
  EXPECT_EQ(ResolveConfig({}, env()).status().code(), api::StatusCode::kInvalidArgument);
  env_["DATABRICKS_AUTH_TYPE"] = "pat";
  EXPECT_EQ(ResolveConfig({}, env()).status().code(), api::StatusCode::kInvalidArgument);
}

TEST(HostTest, Normalisation) {
  EXPECT_EQ(NormalizeHost("dbc-1.cloud.databricks.com"), "https://dbc-1.cloud.databricks.com");
  EXPECT_EQ(NormalizeHost("https://dbc-1.cloud.databricks.com/"),
            "https://dbc-1.cloud.databricks.com");
  EXPECT_EQ(NormalizeHost("https://dbc-1.cloud.databricks.com:443"),
            "https://dbc-1.cloud.databricks.com");
  EXPECT_EQ(NormalizeHost("dbc-1.cloud.databricks.com:443//"),
            "https://dbc-1.cloud.databricks.com");
  EXPECT_EQ(NormalizeHost("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
  EXPECT_EQ(NormalizeHost(""), "");
}

TEST(CredentialsTest, FactoryPicksPatOrM2M) {
  FakeTransport transport([](const HttpRequest&, std::stop_token) { return Reply(500, ""); });
  sbx::testing::FakeClock clock;
  DatabricksConfig pat;
  pat.host = "https://h";
  pat.token = "dapi-1";
  auto p = MakeCredentialsProvider(pat, transport, clock);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->name(), "pat");
  EXPECT_EQ((*p)->Authorization({}).value(), "Bearer dapi-1");
  DatabricksConfig m2m;
  m2m.host = "https://h";
  m2m.client_id = "id";
  m2m.client_secret = "sec";
  EXPECT_EQ((*MakeCredentialsProvider(m2m, transport, clock))->name(), "oauth-m2m");
  EXPECT_EQ(MakeCredentialsProvider(DatabricksConfig{.host = "https://h"}, transport, clock)
                .status()
                .code(),
            api::StatusCode::kUnauthenticated);
}

// An OAuth server on a fake transport: discovery + token endpoint; counts token requests.
class M2MTest : public ::testing::Test {
 protected:
  M2MTest() : transport_([this](const HttpRequest& r, std::stop_token) { return Handle(r); }) {
    config_.host = "https://ws.example.com";
    config_.client_id = "my-client";
    config_.client_secret = "my-very-secret";
  }

  HttpResult Handle(const HttpRequest& r) {
    if (r.url == "https://ws.example.com/oidc/.well-known/oauth-authorization-server") {
      return Reply(200, R"({"authorization_endpoint":"https://ws.example.com/oidc/v1/authorize",
                           "token_endpoint":"https://ws.example.com/oidc/v1/token"})");
    }
    if (r.url == "https://ws.example.com/oidc/v1/token" && r.method == "POST") {
      if (fail_tokens_) {
        return Reply(401, R"({"error":"invalid_client","error_description":"bad my-very-secret"})");
      }
      ++tokens_issued_;
      return Reply(200, R"({"access_token":"at-)" + std::to_string(tokens_issued_) +
                            R"(","token_type":"Bearer","expires_in":3600,"scope":"all-apis"})");
    }
    return Reply(404, "");
  }

  DatabricksConfig config_;
  FakeTransport transport_;
  sbx::testing::FakeClock clock_;
  int tokens_issued_ = 0;
  bool fail_tokens_ = false;
};

TEST_F(M2MTest, DiscoversAndSendsClientCredentials) {
  OAuthM2MCredentials creds(config_, transport_, clock_);
  auto header = creds.Authorization({});
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(*header, "Bearer at-1");
  const auto requests = transport_.requests();
  ASSERT_EQ(requests.size(), 2u);
  const HttpRequest& token = requests[1];
  // base64("my-client:my-very-secret")
  EXPECT_EQ(HeaderOf(token, "Authorization"), "Basic bXktY2xpZW50Om15LXZlcnktc2VjcmV0");
  EXPECT_EQ(HeaderOf(token, "Content-Type"), "application/x-www-form-urlencoded");
  EXPECT_EQ(token.body.value_or(""), "grant_type=client_credentials&scope=all-apis");
}

TEST_F(M2MTest, TokenIsCachedThenRefreshedBeforeExpiry) {
  OAuthM2MCredentials creds(config_, transport_, clock_);
  EXPECT_EQ(creds.Authorization({}).value(), "Bearer at-1");
  clock_.Advance(39min);
  EXPECT_EQ(creds.Authorization({}).value(), "Bearer at-1");
  EXPECT_EQ(tokens_issued_, 1);
  clock_.Advance(2min);  // under 20 min left of a 60 min token
  EXPECT_EQ(creds.Authorization({}).value(), "Bearer at-2");
  EXPECT_EQ(tokens_issued_, 2);
  EXPECT_EQ(transport_.count(), 3u);  // discovery happened once
}

TEST_F(M2MTest, FailedRefreshKeepsAUsableTokenButNotAnExpiredOne) {
  OAuthM2MCredentials creds(config_, transport_, clock_);
  EXPECT_EQ(creds.Authorization({}).value(), "Bearer at-1");
  fail_tokens_ = true;
  clock_.Advance(40min);
  EXPECT_EQ(creds.Authorization({}).value(), "Bearer at-1");
  clock_.Advance(19min + 30s);  // within 40 s of expiry: no longer usable
  auto s = creds.Authorization({});
  ASSERT_EQ(s.status().code(), api::StatusCode::kUnauthenticated);
  EXPECT_NE(s.status().message().find("invalid_client"), std::string::npos);
  EXPECT_EQ(s.status().message().find("my-very-secret"), std::string::npos) << s.status();
}

TEST_F(M2MTest, DiscoveryUrlFromConfigIsUsed) {
  config_.discovery_url = "https://ws.example.com/oidc/.well-known/oauth-authorization-server";
  config_.host = "https://unused.example.com";
  OAuthM2MCredentials creds(config_, transport_, clock_);
  EXPECT_TRUE(creds.Authorization({}).ok());
}

TEST(HostMetadataTest, BackfillsWorkspaceIdAndDiscoveryUrl) {
  FakeTransport transport([](const HttpRequest& r, std::stop_token) {
    if (r.url == "https://ws.example.com/.well-known/databricks-config") {
      return Reply(200, R"({"oidc_endpoint":"https://ws.example.com/oidc","workspace_id":12345,
                            "cloud":"aws"})");
    }
    return Reply(404, "");
  });
  DatabricksConfig cfg;
  cfg.host = "https://ws.example.com";
  BackfillHostMetadata(cfg, transport);
  EXPECT_EQ(cfg.workspace_id, "12345");
  EXPECT_EQ(cfg.discovery_url,
            "https://ws.example.com/oidc/.well-known/oauth-authorization-server");
  cfg.workspace_id = "999";
  BackfillHostMetadata(cfg, transport);
  EXPECT_EQ(cfg.workspace_id, "999");  // never overwrites
}

TEST(HostMetadataTest, FailureLeavesConfigUnchanged) {
  FakeTransport transport(
      [](const HttpRequest&, std::stop_token) { return Reply(200, "<html>nope</html>"); });
  DatabricksConfig cfg;
  cfg.host = "https://ws.example.com";
  BackfillHostMetadata(cfg, transport);
  EXPECT_EQ(cfg.workspace_id, "");
  EXPECT_EQ(cfg.discovery_url, "");
}

}  // namespace
}  // namespace sbx::controller::databricks
