#include "cli/commands/object_printer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "api/rfc3339.h"

namespace sbx::cli {
namespace {

using ::testing::HasSubstr;

api::Object Sandbox(const std::string& name, const std::string& display_name,
                    int64_t resource_version) {
  api::Object o = api::MakeObject(api::Kind::kSandbox, name);
  o.sandbox_spec().display_name = display_name;
  o.metadata.resource_version = resource_version;
  return o;
}

std::vector<std::string> Names(const std::vector<api::Object>& objects) {
  std::vector<std::string> names;
  for (const api::Object& o : objects) {
    names.push_back(o.metadata.name);
  }
  return names;
}

TEST(ParseOutputSpecTest, ParsesJsonPathAndCustomColumns) {
  auto spec = ParseOutputSpec("jsonpath={.metadata.name}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->format, OutputFormat::kJsonPath);
  EXPECT_EQ(spec->jsonpath->text(), "{.metadata.name}");

  // A comma inside a filter does not split columns.
  spec = ParseOutputSpec(
      R"(custom-columns=NAME:.metadata.name,X:.status.conditions[?(@.reason=="a,b")].type)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->format, OutputFormat::kCustomColumns);
  ASSERT_EQ(spec->columns.size(), 2u);
  EXPECT_EQ(spec->columns[1].header, "X");

  EXPECT_THAT(ParseOutputSpec("custom-columns=").status().message(),
              HasSubstr("no custom columns given"));
  EXPECT_THAT(ParseOutputSpec("custom-columns=A:.a,B").status().message(),
              HasSubstr("unexpected custom-columns spec: \"B\""));
  EXPECT_THAT(ParseOutputSpec("jsonpath").status().message(), HasSubstr("no template given"));
  EXPECT_THAT(ParseOutputSpec("yml").status().message(), HasSubstr("unable to match a printer"));
}

TEST(PrintObjectsTest, CustomColumnsPrintNoneWhereAPathSelectsNothing) {
  auto spec = ParseOutputSpec("custom-columns=NAME:.metadata.name,IMAGE:.spec.image");
  ASSERT_TRUE(spec.ok());
  std::ostringstream out;
  ASSERT_TRUE(PrintObjects(out, {Sandbox("a", "A", 1)}, *spec, false, false, {}).ok());
  EXPECT_EQ(out.str(), "NAME   IMAGE\na      <none>\n");
}

TEST(PrintObjectsTest, JsonPathSeesTheListOrTheNamedObject) {
  auto spec = ParseOutputSpec("jsonpath={.kind}/{.items[*].metadata.name}");
  ASSERT_TRUE(spec.ok());
  std::ostringstream list;
  ASSERT_TRUE(
      PrintObjects(list, {Sandbox("a", "A", 1), Sandbox("b", "B", 2)}, *spec, false, false, {})
          .ok());
  EXPECT_EQ(list.str(), "List/a b");
  std::ostringstream single;
  ASSERT_TRUE(PrintObjects(single, {Sandbox("a", "A", 1)}, *spec, true, false, {}).ok());
  EXPECT_EQ(single.str(), "Sandbox/");
}

TEST(SortObjectsTest, SortsStablyByValueWithMissingValuesFirst) {
  std::vector<api::Object> objects = {Sandbox("a", "Zed", 10), Sandbox("b", "", 9),
                                      Sandbox("c", "Alpha", 2), Sandbox("d", "", 1)};
  ASSERT_TRUE(SortObjects(objects, *JsonPath::ParseRelaxed(".spec.displayName")).ok());
  EXPECT_EQ(Names(objects), (std::vector<std::string>{"b", "d", "c", "a"}));
  ASSERT_TRUE(SortObjects(objects, *JsonPath::ParseRelaxed("metadata.resourceVersion")).ok());
  EXPECT_EQ(Names(objects), (std::vector<std::string>{"d", "c", "b", "a"}));  // 1 < 2 < 9 < 10
  const api::Status missing = SortObjects(objects, *JsonPath::ParseRelaxed(".spec.nope"));
  EXPECT_EQ(missing.message(),
            "couldn't find any field with path \"{.spec.nope}\" in the list of objects");
  EXPECT_EQ(Names(objects), (std::vector<std::string>{"d", "c", "b", "a"}));  // untouched
}

TEST(TaskDurationTest, RunsFromSubmissionToCompletionOrNow) {
  api::AgentTaskStatus s;
  const auto now = *api::ParseRfc3339("2026-01-01T00:10:00Z");
  EXPECT_EQ(TaskDuration(s, now), "<none>");  // not submitted yet
  s.phase = api::TaskPhase::kRunning;
  s.submitted_at = "2026-01-01T00:00:00Z";
  EXPECT_EQ(TaskDuration(s, now), "10m");
  s.phase = api::TaskPhase::kSucceeded;
  s.completed_at = "2026-01-01T00:00:42Z";
  EXPECT_EQ(TaskDuration(s, now), "42s");
}

// One column table serves the headers and the rows: for every kind they agree, plain and wide,
// and wide adds columns.
TEST(TableRowTest, EveryKindHasColumnsAndItsRowsMatchItsHeaders) {
  const auto now = std::chrono::system_clock::now();
  for (const api::Kind kind : api::kAllKinds) {
    EXPECT_TRUE(HasTableColumns(kind)) << api::KindName(kind);
    const api::Object o = api::MakeObject(kind, "x");
    for (const bool wide : {false, true}) {
      for (const bool with_namespace : {false, true}) {
        EXPECT_EQ(TableRow(o, wide, with_namespace, now).size(),
                  TableHeaders(kind, wide, with_namespace).size())
            << api::KindName(kind) << " wide=" << wide;
      }
    }
    EXPECT_GT(TableHeaders(kind, true, false).size(), TableHeaders(kind, false, false).size())
        << api::KindName(kind);
  }
}

TEST(TableRowTest, AgentTaskResultIsTheErrorCodeOrTheFirstLineCut) {
  api::Object task = api::MakeObject(api::Kind::kAgentTask, "t", "default");
  task.agent_task_spec().worker_ref = "fixer";
  auto& s = task.agent_task_status();
  s.result.message = std::string(70, 'x') + "\nsecond line";
  const auto now = std::chrono::system_clock::now();
  std::vector<std::string> row = TableRow(task, /*wide=*/true, /*with_namespace=*/false, now);
  ASSERT_EQ(row.size(), TableHeaders(api::Kind::kAgentTask, true, false).size());
  EXPECT_EQ(row[2], "fixer");  // the worker asked for, until one is picked
  EXPECT_EQ(row[6], "0");      // ATTEMPTS: none made yet
  EXPECT_EQ(row[7], std::string(60, 'x') + "…");
  EXPECT_EQ(row[8], "<none>");  // not queued
  s.result.error = {"connection_failed", "gone"};
  s.queue_position = 3;
  row = TableRow(task, true, false, now);
  EXPECT_EQ(row[7], "connection_failed");
  EXPECT_EQ(row[8], "3");
}

// ATTEMPTS counts the ended attempts and the running one; with retries allowed, out of how many.
TEST(TableRowTest, AgentTaskAttemptsCountTheRunningOneAndShowTheLimit) {
  api::Object task = api::MakeObject(api::Kind::kAgentTask, "t", "default");
  task.agent_task_spec().worker_ref = "fixer";
  auto& s = task.agent_task_status();
  const auto now = std::chrono::system_clock::now();
  s.phase = api::TaskPhase::kRunning;
  EXPECT_EQ(TableRow(task, false, false, now)[6], "1");
  task.agent_task_spec().backoff_limit = 2;
  s.attempts.push_back(
      {1, "fixer", "turn_1", api::TaskPhase::kFailed, {"server_error", ""}, "", ""});
  EXPECT_EQ(TableRow(task, false, false, now)[6], "2/3");
  s.phase = api::TaskPhase::kQueued;
  EXPECT_EQ(TableRow(task, false, false, now)[6], "1/3");
}

// A Notifier's row: its type, whether it is suspended, how many events it subscribes to and its
// delivery counts; wide adds when it last delivered and what it selects.
TEST(TableRowTest, NotifierShowsTypeDeliveriesAndSelector) {
  api::Object n = api::MakeObject(api::Kind::kNotifier, "alerts", "default");
  n.notifier_spec().type = api::NotifierType::kSlack;
  n.notifier_spec().events = {"TaskFailed", "BudgetExceeded"};
  n.notifier_spec().selector.match_labels = {{"team", "a"}, {"tier", "web"}};
  auto& s = n.notifier_status();
  s.pending = 3;
  s.delivered = 41;
  s.dropped = 1;
  const auto now = *api::ParseRfc3339("2026-01-01T01:00:00Z");
  n.metadata.creation_timestamp = "2026-01-01T00:00:00Z";
  const std::vector<std::string> headers = TableHeaders(api::Kind::kNotifier, true, false);
  std::vector<std::string> row = TableRow(n, /*wide=*/true, /*with_namespace=*/false, now);
  ASSERT_EQ(row.size(), headers.size());
  EXPECT_EQ(headers, (std::vector<std::string>{"NAME", "TYPE", "READY", "SUSPEND", "EVENTS",
                                               "PENDING", "DELIVERED", "AGE", "DROPPED",
                                               "LAST-DELIVERED", "SELECTOR", "REASON", "MESSAGE"}));
  EXPECT_EQ(row, (std::vector<std::string>{"alerts", "slack", "Unknown", "False", "2", "3", "41",
                                           "60m", "1", "<none>", "team=a,tier=web", "<none>", ""}));
  n.notifier_spec().suspend = true;
  n.notifier_spec().selector = {};
  s.last_delivered_at = "2026-01-01T00:59:30Z";
  row = TableRow(n, true, false, now);
  EXPECT_EQ(row[3], "True");
  EXPECT_EQ(row[9], "30s ago");
  EXPECT_EQ(row[10], "<none>");
  EXPECT_EQ(TableRow(n, false, false, now).size(),
            TableHeaders(api::Kind::kNotifier, false, false).size());
}

}  // namespace
}  // namespace sbx::cli
