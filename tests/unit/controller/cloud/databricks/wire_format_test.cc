#include "controller/cloud/databricks/wire_format.h"

#include <gtest/gtest.h>

namespace sbx::controller::databricks {
namespace {

using namespace std::chrono_literals;

TEST(WireFormatTest, DecodesAFullSandbox) {
  auto s = DecodeSandbox(R"({
    "name": "sandboxes/dev-a",
    "display_name": "Dev A",
    "spec": {"compute": {"inactivity_timeout": "900s"},
             "environment": {"image_uri": "main.images.agents.base:1"}},
    "metadata": {"custom_tags": {"team": "ml"}},
    "status": {"state": "SANDBOX_STATE_RUNNING"},
    "create_time": "2026-09-01T12:00:00Z",
    "update_time": "2026-09-01T12:00:05.120Z"
  })");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sandbox_id, "dev-a");
  EXPECT_EQ(s->name, "sandboxes/dev-a");
  EXPECT_EQ(s->display_name, "Dev A");
  EXPECT_EQ(s->inactivity_timeout, 900s);
  EXPECT_EQ(s->image_uri, "main.images.agents.base:1");
  EXPECT_EQ(s->custom_tags.at("team"), "ml");
  EXPECT_EQ(s->state, SandboxState::kRunning);
  EXPECT_EQ(s->state_raw, "SANDBOX_STATE_RUNNING");
  EXPECT_EQ(s->create_time, "2026-09-01T12:00:00Z");
  EXPECT_EQ(s->update_time, "2026-09-01T12:00:05.120Z");
}

TEST(WireFormatTest, UnknownEnumValueIsUnknownNotAnError) {
  auto s =
      DecodeSandbox(R"({"name":"sandboxes/x","status":{"state":"SANDBOX_STATE_HIBERNATING"}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state, SandboxState::kUnknown);
  EXPECT_EQ(s->state_raw, "SANDBOX_STATE_HIBERNATING");
  EXPECT_EQ(SandboxStateName(s->state), "UNKNOWN");
}

TEST(WireFormatTest, MissingStatusIsUnspecifiedAndUnknownFieldsAreIgnored) {
  auto s =
      DecodeSandbox(R"({"name":"sandboxes/x","future_field":{"a":[1,2]},"spec":{"gpu":true}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->state, SandboxState::kUnspecified);
  EXPECT_FALSE(s->inactivity_timeout.has_value());
}

TEST(WireFormatTest, AcceptsFractionalDurations) {
  auto s = DecodeSandbox(R"({"spec":{"compute":{"inactivity_timeout":"3599.6s"}}})");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->inactivity_timeout, 3600s);
  EXPECT_EQ(ParseDuration("1.000000001s").value(), 1s);
  EXPECT_EQ(ParseDuration("0s").value(), 0s);
  EXPECT_EQ(ParseDuration("-5s").value(), -5s);
}

TEST(WireFormatTest, RejectsMalformedDurations) {
  for (const char* bad : {"", "s", "15m", "900", "1.2.3s", "abcs", "1e3s"}) {
    EXPECT_EQ(ParseDuration(bad).status().code(), api::StatusCode::kInvalidArgument) << bad;
  }
  auto s = DecodeSandbox(R"({"spec":{"compute":{"inactivity_timeout":"15 minutes"}}})");
  EXPECT_EQ(s.status().code(), api::StatusCode::kInternal);
  EXPECT_NE(s.status().message().find("inactivity_timeout"), std::string::npos);
}

TEST(WireFormatTest, FormatsDurationsInWholeSeconds) {
  EXPECT_EQ(FormatDuration(900s), "900s");
  EXPECT_EQ(FormatDuration(0s), "0s");
}

TEST(WireFormatTest, Int64PidAsStringOrNumber) {
  auto page = DecodeCommandPage(R"({"commands":[
      {"command_id":"c1","cmd":"/bin/true","pid":"9007199254740993","finished":true,"exit_code":0},
      {"command_id":"c2","cmd":"/bin/sleep","args":["10"],"pid":42,"finished":false},
      {"command_id":"c3","cmd":"/nope","finished":true}]})");
  ASSERT_TRUE(page.ok()) << page.status();
  const auto& cmds = page->first;
  ASSERT_EQ(cmds.size(), 3u);
  EXPECT_EQ(cmds[0].pid, int64_t{9007199254740993});
  EXPECT_EQ(cmds[0].exit_code, 0);
  EXPECT_TRUE(cmds[0].finished);
  EXPECT_EQ(cmds[1].pid, 42);
  EXPECT_EQ(cmds[1].args, std::vector<std::string>{"10"});
  EXPECT_FALSE(cmds[1].exit_code.has_value());
  EXPECT_FALSE(cmds[2].pid.has_value());
  EXPECT_EQ(page->second, "");
}

TEST(WireFormatTest, BadPidIsInternalError) {
  auto page = DecodeCommandPage(R"({"commands":[{"pid":"12x"}]})");
  EXPECT_EQ(page.status().code(), api::StatusCode::kInternal);
  EXPECT_NE(page.status().message().find("pid"), std::string::npos);
}

TEST(WireFormatTest, DecodesExecResults) {
  auto r = DecodeExecResult(R"({"command_id":"c9","status":"EXECUTE_COMMAND_STATUS_COMPLETED",
      "exit_code":3,"stdout":"hi\n","stderr":"warn","truncated":true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->command_id, "c9");
  EXPECT_EQ(r->status, ExecStatus::kCompleted);
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "hi\n");
  EXPECT_EQ(r->stderr_text, "warn");
  EXPECT_TRUE(r->truncated);

  auto t = DecodeExecResult(R"({"status":"EXECUTE_COMMAND_STATUS_TIMED_OUT"})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->status, ExecStatus::kTimedOut);
  EXPECT_FALSE(t->exit_code.has_value());
  EXPECT_EQ(DecodeExecResult(R"({"status":"EXECUTE_COMMAND_STATUS_PAUSED"})")->status,
            ExecStatus::kUnknown);
}

TEST(WireFormatTest, PageTokenAbsentOrEmptyMeansLastPage) {
  auto a = DecodeSandboxPage(R"({"sandboxes":[{"name":"sandboxes/a"}]})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->next_page_token, "");
  auto b = DecodeSandboxPage(R"({"sandboxes":[],"next_page_token":""})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->next_page_token, "");
  auto c = DecodeSandboxPage(R"({})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->sandboxes.empty());
  auto d = DecodeSandboxPage(R"({"sandboxes":[{"name":"sandboxes/a"}],"next_page_token":"p2"})");
  EXPECT_EQ(d->next_page_token, "p2");
}

TEST(WireFormatTest, GarbageBodyIsInternalWithAnExcerpt) {
  auto s = DecodeSandbox("<html>502 Bad Gateway</html>");
  EXPECT_EQ(s.status().code(), api::StatusCode::kInternal);
  EXPECT_NE(s.status().message().find("502 Bad Gateway"), std::string::npos);
  const std::string huge(10000, 'x');
  auto h = DecodeSandbox(huge);
  EXPECT_EQ(h.status().code(), api::StatusCode::kInternal);
  EXPECT_LT(h.status().message().size(), 400u);
  EXPECT_EQ(DecodeSandbox("[1,2]").status().code(), api::StatusCode::kInternal);
  EXPECT_EQ(DecodeSandbox("").status().code(), api::StatusCode::kInternal);
}

TEST(WireFormatTest, CreateBodyHasOnlySetFieldsAndNoOutputFields) {
  Sandbox s;
  s.name = "sandboxes/ignored";
  s.state = SandboxState::kRunning;
  s.display_name = "A";
  s.inactivity_timeout = 600s;
  EXPECT_EQ(EncodeSandboxForCreate(s),
            R"({"display_name":"A","spec":{"compute":{"inactivity_timeout":"600s"}}})");
  EXPECT_EQ(EncodeSandboxForCreate(Sandbox{}), "{}");
  s.image_uri = "c.s.f.img:1";
  s.custom_tags = {{"k", "v"}};
  EXPECT_EQ(
      EncodeSandboxForCreate(s),
      R"({"display_name":"A","metadata":{"custom_tags":{"k":"v"}},"spec":{"compute":{"inactivity_timeout":"600s"},"environment":{"image_uri":"c.s.f.img:1"}}})");
}

TEST(WireFormatTest, UpdateBodyHasExactlyTheMaskedFields) {
  Sandbox s;
  s.display_name = "New";
  s.inactivity_timeout = 1200s;
  s.image_uri = "not.sent:1";
  EXPECT_EQ(EncodeSandboxUpdate(s, {"display_name"}).value(), R"({"display_name":"New"})");
  EXPECT_EQ(EncodeSandboxUpdate(s, {"spec.compute.inactivity_timeout"}).value(),
            R"({"spec":{"compute":{"inactivity_timeout":"1200s"}}})");
  EXPECT_EQ(EncodeSandboxUpdate(s, {"display_name", "spec.compute.inactivity_timeout"}).value(),
            R"({"display_name":"New","spec":{"compute":{"inactivity_timeout":"1200s"}}})");
  EXPECT_EQ(EncodeSandboxUpdate(s, {}).status().code(), api::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeSandboxUpdate(s, {"status.state"}).status().code(),
            api::StatusCode::kInvalidArgument);
}

TEST(WireFormatTest, ExecRequestCarriesArgsEnvsAndTimeout) {
  ExecRequest r;
  r.cmd = "/bin/bash";
  r.args = {"-c", "echo hi"};
  r.envs = {{"A", "1"}};
  r.execution_timeout = 30s;
  EXPECT_EQ(
      EncodeExecRequest(r),
      R"({"args":["-c","echo hi"],"cmd":"/bin/bash","envs":{"A":"1"},"execution_timeout":"30s"})");
  r.args = {std::string("bad\xff utf8")};
  EXPECT_NO_THROW((void)EncodeExecRequest(r));
}

}  // namespace
}  // namespace sbx::controller::databricks
