#include "api/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <iterator>
#include <limits>
#include <string>

#include "api/defaults.h"

namespace sbx::api {
namespace {

using std::chrono::seconds;

Object Sandbox(std::string name = "box") {
  Object o = MakeObject(Kind::kSandbox, std::move(name));
  ApplyDefaults(o);
  return o;
}

Object Worker() {
  Object o = MakeObject(Kind::kAgentWorker, "w");
  o.agent_worker_spec().sandbox_ref = "box";
  ApplyDefaults(o);
  return o;
}

// A webhook Notifier of namespace default as DESIGN §8.3 writes one.
Object Notifier() {
  Object o = MakeObject(Kind::kNotifier, "alerts");
  NotifierSpec& s = o.notifier_spec();
  s.url_from = {"", "alerts-hook"};
  s.signing_secret_from = {"SBX_SECRET_DEFAULT_SIGNING", ""};
  s.events = {"TaskFailed", "TaskTimedOut", "BudgetExceeded"};
  s.selector.match_labels = {{"team", "a"}};
  ApplyDefaults(o);
  return o;
}

std::string Error(const Object& o) {
  Status s = Validate(o);
  if (s.ok()) {
    return "OK";
  }
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  return s.message();
}

TEST(ValidationTest, DefaultedObjectsAreValid) {
  EXPECT_EQ(Error(Sandbox()), "OK");
  EXPECT_EQ(Error(Worker()), "OK");
  Object ws = MakeObject(Kind::kWorkspace, "default");
  EXPECT_EQ(Error(ws), "OK");
}

TEST(ValidationTest, Names) {
  EXPECT_EQ(Error(Sandbox("Box")),
            "metadata.name: invalid name \"Box\": must consist of lowercase letters, digits and "
            "'-'");
  EXPECT_EQ(Error(Sandbox("-box")),
            "metadata.name: invalid name \"-box\": must start and end with a lowercase letter or "
            "digit");
  EXPECT_EQ(Error(Sandbox(std::string(64, 'a'))), "metadata.name: invalid name \"" +
                                                      std::string(64, 'a') +
                                                      "\": must be at most 63 characters");
  EXPECT_EQ(Error(Sandbox(std::string(63, 'a'))).find("metadata.name"), std::string::npos);
  Object o = Sandbox();
  o.metadata.name = "";
  EXPECT_EQ(Error(o), "metadata.name: is required");
  o = Sandbox();
  o.metadata.namespace_ = "Team_A";
  EXPECT_EQ(Error(o),
            "metadata.namespace: invalid namespace \"Team_A\": must consist of lowercase letters, "
            "digits and '-'");
}

TEST(ValidationTest, Labels) {
  Object o = Sandbox();
  o.metadata.labels = {{"app.kubernetes.io/name", "agent"}, {"tier", ""}};
  EXPECT_EQ(Error(o), "OK");
  o.metadata.labels = {{"bad key", "x"}};
  EXPECT_EQ(Error(o),
            "metadata.labels.bad key: invalid key \"bad key\": may contain only letters, digits, "
            "'-', '_' and '.'");
  o.metadata.labels = {{"Bad_Prefix/x", "x"}};
  EXPECT_EQ(Error(o),
            "metadata.labels.Bad_Prefix/x: invalid key prefix \"Bad_Prefix\": must be a DNS "
            "subdomain (lowercase labels separated by '.')");
  o.metadata.labels = {{"app", "has space"}};
  EXPECT_EQ(Error(o),
            "metadata.labels.app: invalid value \"has space\": may contain only letters, digits, "
            "'-', '_' and '.'");
}

TEST(ValidationTest, SandboxId) {
  Object o = Sandbox();
  o.sandbox_spec().sandbox_id = "has_underscore";
  EXPECT_EQ(Error(o),
            "spec.sandboxId: invalid sandbox id \"has_underscore\": must consist of lowercase "
            "letters, digits and '-'");
  Object longer = MakeObject(Kind::kSandbox, std::string(40, 'b'), std::string(40, 'n'));
  ApplyDefaults(longer);
  EXPECT_NE(Error(longer).find("spec.sandboxId: invalid sandbox id"), std::string::npos);
  EXPECT_NE(Error(longer).find("set sandboxId explicitly"), std::string::npos);
}

TEST(ValidationTest, DisplayNameAndTimeout) {
  Object o = Sandbox();
  o.sandbox_spec().display_name = std::string(256, 'x');
  EXPECT_EQ(Error(o), "OK");
  o.sandbox_spec().display_name = std::string(257, 'x');
  EXPECT_EQ(Error(o), "spec.displayName: must be at most 256 bytes");
  o = Sandbox();
  o.sandbox_spec().inactivity_timeout = seconds(0);  // auto-stop off, as the API documents
  EXPECT_EQ(Error(o), "OK");
  o.sandbox_spec().inactivity_timeout = seconds(-1);
  EXPECT_EQ(Error(o), "spec.inactivityTimeout: must not be negative (0 = auto-stop off)");
}

// Review #10, finding 5: durations are bounded by what their consumer accepts.
TEST(ValidationTest, InactivityTimeoutIsAtMostADay) {
  Object o = Sandbox();
  o.sandbox_spec().inactivity_timeout = std::chrono::hours(24);
  EXPECT_EQ(Error(o), "OK");
  o.sandbox_spec().inactivity_timeout = std::chrono::hours(24) + seconds(1);
  EXPECT_EQ(Error(o), "spec.inactivityTimeout: must be at most 24h");
  o.sandbox_spec().inactivity_timeout = std::chrono::hours(99999999999);
  EXPECT_EQ(Error(o), "spec.inactivityTimeout: must be at most 24h");
  Object w = MakeObject(Kind::kAgentWorker, "w");
  w.agent_worker_spec().sandbox = SandboxSpec{};
  w.agent_worker_spec().sandbox->inactivity_timeout = std::chrono::hours(25);
  ApplyDefaults(w);
  EXPECT_EQ(Error(w), "spec.sandbox.inactivityTimeout: must be at most 24h");
}

TEST(ValidationTest, SetupStepTimeoutIsAtMostADay) {
  Object o = Sandbox();
  o.sandbox_spec().setup = {{"a", "echo", std::chrono::hours(24)}};
  EXPECT_EQ(Error(o), "OK");
  o.sandbox_spec().setup = {{"a", "echo", seconds(60)},
                            {"b", "echo", std::chrono::hours(24) + seconds(1)}};
  EXPECT_EQ(Error(o), "spec.setup[1].timeout: must be at most 24h");
}

TEST(ValidationTest, SetupSteps) {
  Object o = Sandbox();
  o.sandbox_spec().setup = {{"deps", "apt-get install -y jq", seconds(60)},
                            {"deps", "echo", seconds(60)}};
  EXPECT_EQ(Error(o), "spec.setup[1].name: duplicate step name \"deps\"");
  o.sandbox_spec().setup = {{"", "echo", seconds(60)}};
  EXPECT_EQ(Error(o), "spec.setup[0].name: is required");
  o.sandbox_spec().setup = {{"a/b", "echo", seconds(60)}};
  EXPECT_EQ(Error(o),
            "spec.setup[0].name: invalid step name \"a/b\": may contain only letters, digits, "
            "'-', '_' and '.'");
  o.sandbox_spec().setup = {{"a", "  \n", seconds(60)}};
  EXPECT_EQ(Error(o), "spec.setup[0].run: is required (a bash script)");
  o.sandbox_spec().setup = {{"a", "echo", seconds(0)}};
  EXPECT_EQ(Error(o), "spec.setup[0].timeout: must be greater than 0");
}

TEST(ValidationTest, SecretRefs) {
  Object o = MakeObject(Kind::kWorkspace, "default");
  WorkspaceSpec& s = o.workspace_spec();
  s.databricks.token_from = {"SBX_SECRET_TOKEN", "token"};
  EXPECT_EQ(Error(o), "spec.databricks.tokenFrom: set exactly one of env or file, not both");
  s.databricks.token_from = {"1BAD", ""};
  EXPECT_EQ(Error(o),
            "spec.databricks.tokenFrom.env: invalid environment variable name \"1BAD\" (expected "
            "letters, digits and '_', not starting with a digit)");
  s.databricks.token_from = {"", "token"};
  EXPECT_EQ(Error(o), "OK");
  s.databricks.token_from = {"SBX_SECRET_TOKEN", ""};
  EXPECT_EQ(Error(o), "OK");
  s.databricks.client_id_from = {"SBX_SECRET_CLIENT_ID", ""};
  EXPECT_EQ(Error(o),
            "spec.databricks.clientSecretFrom: OAuth machine-to-machine needs both clientIdFrom "
            "and clientSecretFrom");
}

// A manifest may name only the sources the operator allowed (SECURITY.md): not sbxd's own
// credentials, not any file of the machine.
TEST(ValidationTest, SecretRefsNameOnlyAllowedSources) {
  Object o = MakeObject(Kind::kWorkspace, "default");
  SecretRef& ref = o.workspace_spec().databricks.token_from;
  for (const char* name : {"DATABRICKS_TOKEN", "OPENAI_API_KEY", "HOME", "SBX_SECRET_"}) {
    ref = {name, ""};
    EXPECT_EQ(Error(o), "spec.databricks.tokenFrom.env: environment variable \"" +
                            std::string(name) +
                            "\" is not an allowed secret source: names must start with "
                            "\"SBX_SECRET_\" (the controller's own credentials cannot be named; "
                            "see SECURITY.md)");
  }
  for (const char* file : {"/proc/self/environ", "/etc/hostname", "../token", "..", ".", "a/b"}) {
    ref = {"", file};
    EXPECT_EQ(Error(o),
              "spec.databricks.tokenFrom.file: must be a plain file name inside the "
              "controller's secrets directory (sbxd --secrets-dir), without '/' or "
              "\"..\", got \"" +
                  std::string(file) + "\"");
  }
  // The operator's own prefix.
  ref = {"TEAM_KEY", ""};
  EXPECT_TRUE(Validate(o, ValidationOptions{.secret_env_prefix = "TEAM_"}).ok());
  EXPECT_FALSE(Validate(o).ok());
  o = Worker();
  o.agent_worker_spec().executor.api_key_from = {"DATABRICKS_TOKEN", ""};
  EXPECT_THAT(Error(o), ::testing::StartsWith("spec.executor.apiKeyFrom.env: environment variable "
                                              "\"DATABRICKS_TOKEN\" is not an allowed"));
}

TEST(ValidationTest, PlainHttpOnlyForLoopbackHosts) {
  Object o = MakeObject(Kind::kWorkspace, "default");
  for (const char* ok : {"https://dbc-1.cloud.databricks.com", "http://127.0.0.1:8080",
                         "http://localhost:1/v1", "http://[::1]:80", "http://127.1.2.3"}) {
    o.workspace_spec().databricks.host = ok;
    o.workspace_spec().openai.base_url = ok;
    EXPECT_EQ(Error(o), "OK") << ok;
  }
  o.workspace_spec().openai.base_url = "";
  for (const char* bad : {"http://dbc-1.cloud.databricks.com", "http://127.0.0.1.evil.com",
                          "http://localhost.evil.com", "http://10.0.0.1", "http://[::2]"}) {
    o.workspace_spec().databricks.host = bad;
    EXPECT_EQ(Error(o),
              "spec.databricks.host: must use https:// (plain http:// only for a "
              "loopback host such as the local emulator), got \"" +
                  std::string(bad) + "\"")
        << bad;
  }
  o.workspace_spec().databricks.host = "https://127.0.0.1@evil.com";
  EXPECT_EQ(Error(o),
            "spec.databricks.host: must not contain user info (user@host), got "
            "\"https://127.0.0.1@evil.com\"");
  o.workspace_spec().databricks.host = "";
  o.workspace_spec().openai.base_url = "http://api.openai.com/v1";
  EXPECT_THAT(Error(o), ::testing::StartsWith("spec.openai.baseUrl: must use https://"));
}

TEST(ValidationTest, WorkspaceLimitsAndUrls) {
  Object o = MakeObject(Kind::kWorkspace, "default");
  o.workspace_spec().limits.max_sandboxes = -1;
  EXPECT_EQ(Error(o), "spec.limits.maxSandboxes: must not be negative (0 = no limit of ours)");
  o.workspace_spec().limits = {-0.5, 0};
  EXPECT_EQ(Error(o), "spec.limits.requestsPerSecond: must be a non-negative number (0 = default)");
  o.workspace_spec().limits = {std::numeric_limits<double>::quiet_NaN(), 0};
  EXPECT_NE(Error(o), "OK");
  o.workspace_spec().limits = {};
  o.workspace_spec().databricks.host = "x.cloud.databricks.com";
  EXPECT_EQ(Error(o),
            "spec.databricks.host: must start with https:// (or http:// for a loopback host), "
            "got \"x.cloud.databricks.com\"");
}

TEST(ValidationTest, AgentWorkerNeedsExactlyOneSandboxSource) {
  Object o = Worker();
  o.agent_worker_spec().sandbox_ref = "";
  EXPECT_EQ(Error(o), "spec: set exactly one of sandboxRef or sandbox");
  o = Worker();
  o.agent_worker_spec().sandbox = SandboxSpec{};
  EXPECT_EQ(Error(o), "spec: set exactly one of sandboxRef or sandbox, not both");
}

TEST(ValidationTest, InlineSandboxIsValidatedUnderItsPath) {
  Object o = MakeObject(Kind::kAgentWorker, "w");
  o.agent_worker_spec().sandbox = SandboxSpec{};
  o.agent_worker_spec().sandbox->inactivity_timeout = seconds(-1);
  ApplyDefaults(o);
  EXPECT_EQ(Error(o), "spec.sandbox.inactivityTimeout: must not be negative (0 = auto-stop off)");
}

TEST(ValidationTest, AgentWorkerPerTaskRunsOnASleepingSandboxToo) {
  Object o = MakeObject(Kind::kAgentWorker, "w");
  o.agent_worker_spec().sandbox = SandboxSpec{};
  o.agent_worker_spec().session = SessionMode::kPerTask;
  ApplyDefaults(o);
  EXPECT_EQ(Error(o), "OK");
  o.agent_worker_spec().sandbox->power = Power::kOnDemand;
  EXPECT_EQ(Error(o), "OK");
}

TEST(ValidationTest, WorkspaceDirectoryAndExecutor) {
  Object o = Worker();
  o.agent_worker_spec().workspace_directory = "workspace";
  EXPECT_EQ(Error(o), "spec.workspaceDirectory: must be an absolute path, got \"workspace\"");
  o = Worker();
  o.agent_worker_spec().executor.command = "";
  EXPECT_EQ(Error(o), "spec.executor.command: is required");
  o = Worker();
  o.agent_worker_spec().executor.api_key_from = {"", "/etc/key"};
  EXPECT_THAT(Error(o),
              ::testing::StartsWith("spec.executor.apiKeyFrom.file: must be a plain file name"));
}

TEST(ValidationTest, ExecutorEnvironment) {
  Object o = Worker();
  std::vector<EnvVar>& env = o.agent_worker_spec().executor.env;
  env = {{"RUST_LOG", "info", {}}, {"TEAM_TOKEN", "", {"SBX_SECRET_TEAM", ""}}};
  EXPECT_EQ(Error(o), "OK");
  env = {{"1X", "v", {}}};
  EXPECT_THAT(Error(o), ::testing::StartsWith("spec.executor.env[0].name: invalid environment"));
  for (const char* reserved : {"CODEX_API_KEY", "CODEX_HOME", "SBX_REMOTE_URL"}) {
    env = {{reserved, "v", {}}};
    EXPECT_THAT(Error(o), ::testing::HasSubstr("is set by sbx")) << reserved;
  }
  env = {{"A", "1", {}}, {"A", "2", {}}};
  EXPECT_EQ(Error(o), "spec.executor.env[1].name: duplicate environment variable \"A\"");
  env = {{"A", "1", {"SBX_SECRET_A", ""}}};
  EXPECT_EQ(Error(o), "spec.executor.env[0]: set value or valueFrom, not both");
  env = {{"A", "", {"DATABRICKS_TOKEN", ""}}};
  EXPECT_THAT(Error(o), ::testing::StartsWith("spec.executor.env[0].valueFrom.env: environment "
                                              "variable \"DATABRICKS_TOKEN\" is not an allowed"));
}

TEST(ValidationTest, NotifierWebhookAndSlackAreValid) {
  EXPECT_EQ(Error(Notifier()), "OK");
  Object o = Notifier();
  o.notifier_spec().type = NotifierType::kSlack;
  o.notifier_spec().signing_secret_from = {};
  o.notifier_spec().selector = {};
  EXPECT_EQ(Error(o), "OK");
  o.notifier_spec().events.assign(std::begin(kNotifierEvents), std::end(kNotifierEvents));
  EXPECT_EQ(Error(o), "OK");
}

TEST(ValidationTest, NotifierNeedsAUrlReferenceFollowingTheSecretRules) {
  Object o = Notifier();
  o.notifier_spec().url_from = {};
  EXPECT_EQ(Error(o),
            "spec.urlFrom: is required: a secret reference to the URL to POST to, {env: NAME} or "
            "{file: NAME}");
  o.notifier_spec().url_from = {"SBX_SECRET_DEFAULT_HOOK", "hook"};
  EXPECT_EQ(Error(o), "spec.urlFrom: set exactly one of env or file, not both");
  o.notifier_spec().url_from = {"SLACK_WEBHOOK_URL", ""};
  EXPECT_THAT(Error(o), ::testing::StartsWith("spec.urlFrom.env: environment variable "
                                              "\"SLACK_WEBHOOK_URL\" is not an allowed secret "
                                              "source: names must start with \"SBX_SECRET_\""));
  o.notifier_spec().url_from = {"", "../hook"};
  EXPECT_THAT(Error(o), ::testing::StartsWith("spec.urlFrom.file: must be a plain file name"));
  // The operator's prefix applies as to every other reference.
  o.notifier_spec().url_from = {"TEAM_HOOK", ""};
  o.notifier_spec().signing_secret_from = {"TEAM_SIGNING", ""};
  EXPECT_TRUE(Validate(o, ValidationOptions{.secret_env_prefix = "TEAM_"}).ok());
}

TEST(ValidationTest, NotifierWebhookNeedsASigningSecretAndSlackHasNone) {
  Object o = Notifier();
  o.notifier_spec().signing_secret_from = {};
  EXPECT_EQ(Error(o),
            "spec.signingSecretFrom: is required for type webhook: a secret reference to the "
            "Standard Webhooks signing secret");
  o.notifier_spec().signing_secret_from = {"HOME", ""};
  EXPECT_THAT(Error(o), ::testing::StartsWith("spec.signingSecretFrom.env: environment variable "
                                              "\"HOME\" is not an allowed secret source"));
  o.notifier_spec().signing_secret_from = {"", "a/b"};
  EXPECT_THAT(Error(o),
              ::testing::StartsWith("spec.signingSecretFrom.file: must be a plain file name"));
  o = Notifier();
  o.notifier_spec().type = NotifierType::kSlack;
  EXPECT_EQ(Error(o),
            "spec.signingSecretFrom: must not be set for type slack: Slack incoming webhooks are "
            "not signed");
}

TEST(ValidationTest, NotifierEventsAreKnownAndDistinct) {
  Object o = Notifier();
  o.notifier_spec().events.clear();
  EXPECT_EQ(Error(o),
            "spec.events: must name at least one of TaskSucceeded, TaskFailed, TaskTimedOut, "
            "TaskCancelled, WorkerNotReady, ExecutorCrashLooping, GitSourceFailed, "
            "BudgetExceeded, PoolScalingLimited");
  o.notifier_spec().events = {"TaskFailed", "TaskTimedOut", "taskfailed"};
  EXPECT_EQ(Error(o),
            "spec.events[2]: unknown event \"taskfailed\" (expected one of TaskSucceeded, "
            "TaskFailed, TaskTimedOut, TaskCancelled, WorkerNotReady, ExecutorCrashLooping, "
            "GitSourceFailed, BudgetExceeded, PoolScalingLimited)");
  o.notifier_spec().events = {"TaskFailed", "BudgetExceeded", "TaskFailed"};
  EXPECT_EQ(Error(o), "spec.events[2]: duplicate event \"TaskFailed\"");
}

TEST(ValidationTest, NotifierSelectorLabelsAreLabels) {
  Object o = Notifier();
  o.notifier_spec().selector.match_labels = {{"app.kubernetes.io/name", "agent"}, {"tier", ""}};
  EXPECT_EQ(Error(o), "OK");
  o.notifier_spec().selector.match_labels = {{"bad key", "x"}};
  EXPECT_EQ(Error(o),
            "spec.selector.matchLabels.bad key: invalid key \"bad key\": may contain only "
            "letters, digits, '-', '_' and '.'");
  o.notifier_spec().selector.match_labels = {{"team", "has space"}};
  EXPECT_EQ(Error(o),
            "spec.selector.matchLabels.team: invalid value \"has space\": may contain only "
            "letters, digits, '-', '_' and '.'");
}

TEST(ValidationTest, DnsLabelHelper) {
  EXPECT_EQ(ValidateDnsLabel("a"), "");
  EXPECT_EQ(ValidateDnsLabel("a-1"), "");
  EXPECT_EQ(ValidateDnsLabel(""), "must not be empty");
  EXPECT_NE(ValidateDnsLabel("a.b"), "");
  EXPECT_NE(ValidateDnsLabel("a-"), "");
}

}  // namespace
}  // namespace sbx::api
