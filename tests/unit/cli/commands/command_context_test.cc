#include "cli/commands/command_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "cli/commands/wait_command.h"
#include "tests/support/fake_clock.h"

namespace sbx::cli {
namespace {

TEST(ParseLabelSelectorTest, ParsesEqualityTerms) {
  auto s = ParseLabelSelector("app=web,tier==db");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::map<std::string, std::string>{{"app", "web"}, {"tier", "db"}}));
  EXPECT_TRUE(ParseLabelSelector("")->empty());
}

TEST(ParseLabelSelectorTest, RejectsWhatItDoesNotSupport) {
  EXPECT_FALSE(ParseLabelSelector("app!=web").ok());
  EXPECT_FALSE(ParseLabelSelector("app").ok());
  EXPECT_FALSE(ParseLabelSelector("=x").ok());
}

TEST(ResolveTargetsTest, AcceptsKindNameAndSlashForms) {
  auto a = ResolveTargets({"sb", "x", "y"}, "ns");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[1], (api::ObjectKey{api::Kind::kSandbox, "ns", "y"}));
  auto b = ResolveTargets({"agentworkers/w"}, "default");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->front(), (api::ObjectKey{api::Kind::kAgentWorker, "default", "w"}));
  EXPECT_FALSE(ResolveTargets({"sb"}, "default").ok());
  EXPECT_FALSE(ResolveTargets({"pods", "x"}, "default").ok());
  EXPECT_FALSE(ResolveTargets({}, "default").ok());
}

TEST(NamingTest, LooksLikeKubectl) {
  const api::ObjectKey key{api::Kind::kSandbox, "default", "foo"};
  EXPECT_EQ(QualifiedName(key), "sandbox/foo");
  EXPECT_EQ(NotFoundMessage(key), "Error from server (NotFound): sandboxes \"foo\" not found");
}

TEST(ParseTimeoutTest, AcceptsDurationsAndSeconds) {
  EXPECT_EQ(*ParseTimeout("5m"), std::chrono::minutes(5));
  EXPECT_EQ(*ParseTimeout("30"), std::chrono::seconds(30));
  EXPECT_FALSE(ParseTimeout("soon").ok());
}

TEST(ParseWaitForTest, ParsesConditionsAndDelete) {
  auto c = ParseWaitFor("condition=Ready");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->type, "Ready");
  EXPECT_EQ(c->status, api::ConditionStatus::kTrue);
  c = ParseWaitFor("condition=Synced=False");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->type, "Synced");
  EXPECT_EQ(c->status, api::ConditionStatus::kFalse);
  EXPECT_TRUE(ParseWaitFor("delete")->for_delete);
  EXPECT_FALSE(ParseWaitFor("Ready").ok());
  EXPECT_FALSE(ParseWaitFor("condition=Ready=maybe").ok());
}

using ::testing::HasSubstr;

TEST(ResolveOneTargetTest, TakesABareNameOrAnyNameOfTheKindAndRefusesOtherKinds) {
  auto key = ResolveOneTarget("fix-1", api::Kind::kAgentTask, "team");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, (api::ObjectKey{api::Kind::kAgentTask, "team", "fix-1"}));
  for (const char* text : {"agenttask/fix-1", "at/fix-1", "AgentTasks/fix-1"}) {
    key = ResolveOneTarget(text, api::Kind::kAgentTask, "team");
    ASSERT_TRUE(key.ok()) << text << ": " << key.status();
    EXPECT_EQ(key->name, "fix-1");
  }
  EXPECT_THAT(ResolveOneTarget("sandbox/x", api::Kind::kAgentTask, "d").status().message(),
              HasSubstr("\"sandbox/x\" is not an agenttask"));
  EXPECT_FALSE(ResolveOneTarget("", api::Kind::kAgentTask, "d").ok());
  EXPECT_FALSE(ResolveOneTarget("at/", api::Kind::kAgentTask, "d").ok());
}

TEST(CommandContextTest, ErrorLinesEscapeControlCharactersFromTheMessage) {
  std::ostringstream out;
  std::ostringstream err;
  testing::FakeClock clock;
  CommandContext ctx(out, err, clock, nullptr);
  EXPECT_EQ(ctx.Fail(api::UnavailableError("sandbox said \x1b]0;pwned\x07\nsecond\rline")),
            kExitError);
  EXPECT_EQ(err.str(),
            "error: sandbox said \\x1b]0;pwned\\x07\n"
            "error: second\\rline\n");
}

}  // namespace
}  // namespace sbx::cli
