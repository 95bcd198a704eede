// sbxctl against a server (DESIGN §7.3): the built sbxd serves the test's store with --listen,
// and every verb run with SBX_SERVER/SBX_TOKEN (or a context) prints what the same verb prints
// on the local file. sbxd runs as a standby (the test holds the leader lease), so it serves the
// API without reconciling, and nothing changes the objects between the two runs compared.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/e2e/sbxctl_fixture.h"
#include "tests/support/poll.h"

namespace sbx_e2e {
namespace {

using sbx::testing::In;

constexpr char kEditorToken[] = "e2e-editor-token-0123456789";
constexpr char kViewerToken[] = "e2e-viewer-token-0123456789";

class SbxctlServerTest : public SbxctlTest {
 protected:
  void SetUp() override {
    SbxctlTest::SetUp();
    env_["HOME"] = dir_.string();  // no config of the machine's user
    env_["SBX_CONFIG"] = (dir_ / "config.yaml").string();
    {
      auto store = OpenStore();
      auto held = store->TryAcquireLease("sbxd", "e2e-test", std::chrono::hours(1));
      ASSERT_TRUE(held.ok() && *held);
    }
    // The tokens file, written by `sbxd hash-token` from tokens on stdin.
    std::string tokens;
    for (const auto& [name, role, token] :
         {std::tuple{"ci", "editor", kEditorToken}, std::tuple{"pr", "viewer", kViewerToken}}) {
      auto line = sbx::testing::RunProcess(SBXD_PATH, {"hash-token", name, role}, dir_, {},
                                           std::chrono::seconds(30), std::string(token) + "\n");
      ASSERT_EQ(line.exit_code, 0) << line.err;
      ASSERT_EQ(line.out.find(token), std::string::npos);
      tokens += line.out;
    }
    WriteFile(dir_ / "tokens", tokens);
    sbx::testing::ProcessOptions options;
    options.args = {"--db",
                    db_.string(),
                    "--listen",
                    "127.0.0.1:0",
                    "--tokens-file",
                    (dir_ / "tokens").string(),
                    "--metrics-addr",
                    "",
                    "--lease-duration",
                    "3s",
                    "--audit-log",
                    (dir_ / "audit.jsonl").string()};
    options.env = {{"HOME", dir_.string()}};
    options.stdout_path = dir_ / "sbxd.out";
    options.stderr_path = dir_ / "sbxd.err";
    auto sbxd = sbx::testing::Process::Start(SBXD_PATH, options);
    ASSERT_TRUE(sbxd.ok()) << sbxd.status();
    sbxd_ = *std::move(sbxd);
    auto port = sbxd_->WaitForLine(std::regex(R"(serving the API.*port=(\d+))"),
                                   In(std::chrono::seconds(30)), /*from_stderr=*/true);
    ASSERT_TRUE(port.has_value()) << sbxd_->Stderr();
    url_ = "http://127.0.0.1:" + (*port)[1];
    WriteFile(dir_ / "box.yaml",
              SandboxManifest("box", "Box one") + "---\n" + WorkerManifest("w", "box"));
  }

  void TearDown() override {
    sbxd_.reset();
    SbxctlTest::TearDown();
  }

  Result Local(const std::vector<std::string>& args) {
    with_db_ = true;
    env_.erase("SBX_SERVER");
    env_.erase("SBX_TOKEN");
    return Run(args);
  }

  Result Remote(const std::vector<std::string>& args, const std::string& token = kEditorToken) {
    with_db_ = false;
    env_["SBX_SERVER"] = url_;
    env_["SBX_TOKEN"] = token;
    Result r = Run(args);
    env_.erase("SBX_SERVER");
    env_.erase("SBX_TOKEN");
    with_db_ = true;
    return r;
  }

  // Ages ("5s", "2m3s") depend on when a run happens, not on where it reads from; so do the
  // column widths they set.
  static std::string WithoutAges(const std::string& text) {
    static const std::regex kAge(R"(\b(\d+[smhd])+\b)");
    static const std::regex kSpaces(" +");  // an age's width moves the columns after it
    return std::regex_replace(std::regex_replace(text, kAge, "<age>"), kSpaces, " ");
  }

  // Runs `args` both ways and expects the same exit code, stdout and stderr.
  void ExpectSame(const std::vector<std::string>& args) {
    Result local = Local(args);
    Result remote = Remote(args);
    local.out = WithoutAges(local.out);
    remote.out = WithoutAges(remote.out);
    std::string joined;
    for (const std::string& a : args) {
      joined += a + " ";
    }
    EXPECT_EQ(remote.exit_code, local.exit_code) << joined << "\n" << remote.err;
    EXPECT_EQ(remote.out, local.out) << joined;
    EXPECT_EQ(remote.err, local.err) << joined;
  }

  std::unique_ptr<sbx::testing::Process> sbxd_;
  std::string url_;
};

TEST_F(SbxctlServerTest, EveryVerbPrintsWhatItPrintsOnTheLocalFile) {
  const Result created = Remote({"apply", "-f", (dir_ / "box.yaml").string()});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  EXPECT_EQ(created.out, "sandbox/box created\nagentworker/w created\n");
  SetCondition("box", "Ready", sbx::api::ConditionStatus::kTrue, "Running");

  ExpectSame({"apply", "-f", (dir_ / "box.yaml").string()});
  ExpectSame({"get", "sandboxes"});
  ExpectSame({"get", "sb,aw", "-A", "-o", "wide"});
  ExpectSame({"get", "sandbox", "box", "-o", "yaml"});
  ExpectSame({"get", "sb", "-l", "app=demo", "-o", "name"});
  ExpectSame({"get", "sandbox/box", "-o", "jsonpath={.spec.displayName}"});
  ExpectSame({"describe", "sandbox/box"});
  ExpectSame({"get", "sandbox", "missing"});
  ExpectSame({"wait", "--for=condition=Ready", "sandbox/box", "--timeout", "5s"});

  WriteFile(dir_ / "changed.yaml", SandboxManifest("box", "Box two"));
  ExpectSame({"diff", "-f", (dir_ / "changed.yaml").string()});
  ExpectSame({"apply", "--dry-run", "-f", (dir_ / "changed.yaml").string()});
  WriteFile(dir_ / "bad.yaml", SandboxManifest("box", "x") + "  power: Sometimes\n");
  ExpectSame({"apply", "-f", (dir_ / "bad.yaml").string()});

  const Result labelled = Remote({"label", "sandbox/box", "tier=gold"});
  EXPECT_EQ(labelled.exit_code, 0) << labelled.err;
  EXPECT_EQ(labelled.out, "sandbox/box labeled\n");
  ExpectSame({"get", "sb", "-l", "tier=gold", "-o", "name"});
  // The write through the server is an event naming the token.
  const Result events = Local({"events", "sandbox/box"});
  EXPECT_NE(events.out.find("AppliedByApi"), std::string::npos) << events.out;
  ExpectSame({"events", "sandbox/box"});

  const Result deleted = Remote({"delete", "agentworker/w"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  ExpectSame({"get", "aw"});
}

TEST_F(SbxctlServerTest, AViewerTokenReadsButCannotWrite) {
  ASSERT_EQ(Remote({"apply", "-f", (dir_ / "box.yaml").string()}).exit_code, 0);
  const Result read = Remote({"get", "sb", "-o", "name"}, kViewerToken);
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "sandbox/box\n");
  const Result write = Remote({"delete", "sandbox/box"}, kViewerToken);
  EXPECT_EQ(write.exit_code, 1);
  EXPECT_NE(write.err.find("needs the editor role"), std::string::npos) << write.err;
  const Result wrong = Remote({"get", "sb"}, "not-a-token-of-this-server");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("bearer token"), std::string::npos) << wrong.err;
}

// DESIGN §8.3: a write through the server is audited as its token, a write on the local file as
// the local user; `sbxctl audit` reads both, the server refuses it to a non-admin token, and
// sbxd --audit-log copies every record to its file as JSON lines (a standby sbxd too).
TEST_F(SbxctlServerTest, WritesOfBothSurfacesAreAuditedAndCopiedToTheAuditLogFile) {
  ASSERT_EQ(Remote({"apply", "-f", (dir_ / "box.yaml").string()}).exit_code, 0);
  ASSERT_EQ(Local({"label", "sandbox/box", "team=a"}).exit_code, 0);
  EXPECT_EQ(Remote({"delete", "sandbox/box"}, kViewerToken).exit_code, 1);
  const Result audit = Local({"audit"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  const std::regex row(
      R"(\S+\s+ci\s+editor\s+apply\s+default\s+sandbox/box\s+created\s+\S+\s+api)");
  EXPECT_TRUE(std::regex_search(audit.out, row)) << audit.out;
  EXPECT_TRUE(std::regex_search(
      audit.out, std::regex(R"(local\s+label\s+default\s+sandbox/box\s+configured\s+\S+\s+cli)")))
      << audit.out;
  EXPECT_TRUE(std::regex_search(
      audit.out, std::regex(R"(pr\s+viewer\s+delete\s+default\s+sandbox/box\s+PERMISSION_DENIED)")))
      << audit.out;
  const Result mine = Local({"audit", "--actor", "pr", "-o", "json"});
  ASSERT_EQ(mine.exit_code, 0) << mine.err;
  EXPECT_EQ(nlohmann::json::parse(mine.out)["items"].size(), 1u) << mine.out;
  EXPECT_EQ(Local({"audit", "--since", "nonsense"}).exit_code, 1);
  const Result refused = Remote({"audit"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("needs the admin role"), std::string::npos) << refused.err;

  // Four records (the apply made two: the sandbox and the worker), each a line of the file.
  std::string lines;
  EXPECT_TRUE(sbx::testing::PollUntil(
      [&] {
        lines = ReadAll(dir_ / "audit.jsonl");
        return std::count(lines.begin(), lines.end(), '\n') == 4;
      },
      sbx::testing::In(std::chrono::seconds(20))))
      << lines;
  EXPECT_NE(lines.find(R"("result":"PERMISSION_DENIED")"), std::string::npos) << lines;
}

TEST_F(SbxctlServerTest, ContextsInTheConfigFileSelectTheServer) {
  ASSERT_EQ(Local({"apply", "-f", (dir_ / "box.yaml").string()}).exit_code, 0);
  const Result set =
      Local({"config", "set-context", "team", "--server", url_, "--token", kViewerToken});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "Context \"team\" created.\n");
  EXPECT_EQ(fs::status(dir_ / "config.yaml").permissions() & fs::perms::group_all, fs::perms::none);
  ASSERT_EQ(Local({"config", "use-context", "team"}).exit_code, 0);
  const Result contexts = Local({"config", "get-contexts"});
  EXPECT_NE(contexts.out.find("*"), std::string::npos);
  EXPECT_EQ(contexts.out.find(kViewerToken), std::string::npos);  // never printed
  // No --db, no SBX_SERVER: the current context's server.
  with_db_ = false;
  const Result read = Run({"get", "sb", "-o", "name"});
  with_db_ = true;
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(read.out, "sandbox/box\n");
  // The context's token never goes to another server named by SBX_SERVER.
  with_db_ = false;
  env_["SBX_SERVER"] = "http://127.0.0.1:1";
  const Result other = Run({"get", "sb"});
  env_.erase("SBX_SERVER");
  with_db_ = true;
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("no token"), std::string::npos) << other.err;
}

}  // namespace
}  // namespace sbx_e2e
