#include "cli/commands/jsonpath.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sbx::cli {
namespace {

using ::testing::HasSubstr;

constexpr char kList[] = R"({
  "apiVersion": "v1", "kind": "List",
  "items": [
    {"metadata": {"name": "a", "labels": {"app": "x", "sbx.dev/tier": "web"}, "generation": 2},
     "status": {"conditions": [{"type": "Ready", "status": "True"},
                               {"type": "Synced", "status": "False"}]}},
    {"metadata": {"name": "b", "generation": 10},
     "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
    {"metadata": {"name": "c", "generation": 1}, "spec": {"setup": [{"name": "s1"}]}}
  ]
})";

std::string Render(std::string_view text, std::string_view json = kList,
                   bool allow_missing = true) {
  auto path = JsonPath::ParseTemplate(text);
  EXPECT_TRUE(path.ok()) << path.status();
  if (!path.ok()) {
    return "<parse error>";
  }
  auto document = JsonDocument::Parse(json);
  EXPECT_TRUE(document.ok()) << document.status();
  auto out = path->Execute(*document, allow_missing);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "<execution error>";
}

std::string ParseError(std::string_view text) {
  auto path = JsonPath::ParseTemplate(text);
  EXPECT_FALSE(path.ok()) << text;
  return path.ok() ? "" : path.status().message();
}

TEST(JsonPathTest, SelectsFieldsAndPrintsTextAround) {
  EXPECT_EQ(Render("{.kind}"), "List");
  EXPECT_EQ(Render("kind={.kind} v={$.apiVersion}"), "kind=List v=v1");
  EXPECT_EQ(Render("{.items[0].metadata.generation}"), "2");
  EXPECT_EQ(Render("{.items[0].metadata.labels['sbx.dev/tier']}"), "web");
}

TEST(JsonPathTest, JoinsSeveralValuesWithASpace) {
  EXPECT_EQ(Render("{.items[*].metadata.name}"), "a b c");
  EXPECT_EQ(Render("{.items[-1].metadata.name}"), "c");
  EXPECT_EQ(Render("{.items[0:2].metadata.name}"), "a b");
  EXPECT_EQ(Render("{.items[0,2].metadata.name}"), "a c");
  EXPECT_EQ(Render("{.items[::2].metadata.name}"), "a c");
  EXPECT_EQ(Render("{..name}"), "a b c s1");
}

TEST(JsonPathTest, PrintsObjectsAndArraysAsCompactJson) {
  EXPECT_EQ(Render("{.items[0].metadata.labels}"), R"({"app":"x","sbx.dev/tier":"web"})");
  EXPECT_EQ(Render("{.items[2].spec.setup}"), R"([{"name":"s1"}])");
  EXPECT_EQ(Render("{.items[0].metadata.labels.*}"), "x web");
}

TEST(JsonPathTest, RangeRepeatsItsBodyWithPathsRelativeToEachValue) {
  EXPECT_EQ(Render(R"({range .items[*]}{.metadata.name}{"\t"}{@.metadata.generation}{"\n"}{end})"),
            "a\t2\nb\t10\nc\t1\n");
  EXPECT_EQ(Render(R"({range .items[*]}[{range .status.conditions[*]}{.type} {end}]{end})"),
            "[Ready Synced ][Ready ][]");
}

TEST(JsonPathTest, FiltersCompareStringsNumbersAndTestExistence) {
  EXPECT_EQ(Render(R"({.items[0].status.conditions[?(@.type=="Ready")].status})"), "True");
  EXPECT_EQ(Render(R"({.items[*].status.conditions[?(@.type == 'Ready')].status})"), "True False");
  EXPECT_EQ(Render(R"({.items[?(@.metadata.generation>=2)].metadata.name})"), "a b");
  EXPECT_EQ(Render(R"({.items[?(@.metadata.generation<2)].metadata.name})"), "c");
  EXPECT_EQ(Render(R"({.items[?(@.metadata.name!="a")].metadata.name})"), "b c");
  EXPECT_EQ(Render(R"({.items[?(@.spec.setup)].metadata.name})"), "c");
}

TEST(JsonPathTest, MissingKeysPrintNothingUnlessAskedToFail) {
  EXPECT_EQ(Render("[{.items[0].spec.nope}]"), "[]");
  EXPECT_EQ(Render("[{.items[7].metadata.name}]"), "[]");
  auto path = JsonPath::ParseTemplate("{.items[0].spec.nope}");
  ASSERT_TRUE(path.ok());
  auto out = path->Execute(*JsonDocument::Parse(kList), /*allow_missing_keys=*/false);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "error executing jsonpath {.items[0].spec.nope}: .spec is not found");
  auto index = JsonPath::ParseTemplate("{.items[7]}");
  ASSERT_TRUE(index.ok());
  EXPECT_THAT(index->Execute(*JsonDocument::Parse(kList), false).status().message(),
              HasSubstr("array index out of bounds: index 7, length 3"));
}

TEST(JsonPathTest, IndexingSomethingThatIsNotAnArrayIsAnError) {
  auto path = JsonPath::ParseTemplate("{.kind[0]}");
  ASSERT_TRUE(path.ok());
  auto out = path->Execute(*JsonDocument::Parse(kList));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "error executing jsonpath {.kind[0]}: array index [0] on a string");
}

TEST(JsonPathTest, BadTemplatesAreOneLineErrorsNamingTheTemplate) {
  EXPECT_EQ(ParseError("{.items[0}"),
            "error parsing jsonpath {.items[0}: unterminated [ at position 9 in {.items[0}");
  EXPECT_THAT(ParseError("{.items["), HasSubstr("unclosed action"));
  EXPECT_THAT(ParseError("{.a.b"), HasSubstr("unclosed action"));
  EXPECT_THAT(ParseError("{range .items[*]}{.x}"), HasSubstr("{range} without {end}"));
  EXPECT_THAT(ParseError("{.x}{end}"), HasSubstr("{end} without {range}"));
  EXPECT_THAT(ParseError("{metadata.name}"), HasSubstr("unrecognized character 'm'"));
  EXPECT_THAT(ParseError("{}"), HasSubstr("empty action"));
  EXPECT_THAT(ParseError("{.items[?(@.a ~ 1)]}"), HasSubstr("expected ==, !=, <, <=, > or >="));
  EXPECT_THAT(ParseError(R"({"\q"})"), HasSubstr("unknown escape \\q"));
  EXPECT_THAT(ParseError("{.a b}"), HasSubstr("unexpected \"b\""));
  EXPECT_THAT(ParseError("{end x}"), HasSubstr("unexpected \"x\""));
  EXPECT_EQ(Render("{ range .items[*] }{ .metadata.name }{ end }"), "abc");
  for (const std::string_view bad : {"{.items[}", "{.a.}", "{.items[1:2:0]}"}) {
    EXPECT_THAT(ParseError(bad), HasSubstr("error parsing jsonpath ")) << bad;
    EXPECT_EQ(ParseError(bad).find('\n'), std::string::npos) << bad;
  }
}

TEST(JsonPathTest, RelaxedPathsAcceptWhatCustomColumnsAndSortByTake) {
  const auto document = JsonDocument::Parse(kList);
  ASSERT_TRUE(document.ok());
  for (const std::string_view text : {"{.kind}", ".kind", "kind", "{kind}"}) {
    auto path = JsonPath::ParseRelaxed(text);
    ASSERT_TRUE(path.ok()) << text << ": " << path.status();
    EXPECT_EQ(path->text(), "{.kind}");
    auto values = path->Values(*document);
    ASSERT_TRUE(values.ok());
    ASSERT_EQ(values->size(), 1u);
    EXPECT_EQ((*values)[0].text, "List");
    EXPECT_EQ((*values)[0].type, JsonPathValue::Type::kString);
  }
  EXPECT_FALSE(JsonPath::ParseRelaxed("").ok());
  EXPECT_FALSE(JsonPath::ParseRelaxed("{.a}{.b}").ok());
  EXPECT_FALSE(JsonPath::ParseRelaxed("{range .items[*]}{end}").ok());
}

TEST(JsonPathTest, ValuesCompareNumbersNumericallyAndStringsByBytes) {
  const auto document = JsonDocument::Parse(kList);
  auto generations = JsonPath::ParseRelaxed(".items[*].metadata.generation")->Values(*document);
  ASSERT_TRUE(generations.ok());
  ASSERT_EQ(generations->size(), 3u);
  EXPECT_LT(CompareJsonPathValues((*generations)[0], (*generations)[1]), 0);  // 2 < 10
  EXPECT_GT(CompareJsonPathValues((*generations)[0], (*generations)[2]), 0);  // 2 > 1
  JsonPathValue a{JsonPathValue::Type::kString, 0, "10"};
  JsonPathValue b{JsonPathValue::Type::kString, 0, "2"};
  EXPECT_LT(CompareJsonPathValues(a, b), 0);
  EXPECT_EQ(CompareJsonPathValues(a, a), 0);
}

TEST(JsonPathTest, DocumentThatIsNotJsonIsInvalidArgument) {
  EXPECT_EQ(JsonDocument::Parse("{").status().code(), api::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sbx::cli
