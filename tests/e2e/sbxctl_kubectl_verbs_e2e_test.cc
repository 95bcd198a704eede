// End-to-end tests of the kubectl habits of issue #18, on the BUILT sbxctl binary:
// get -o jsonpath / custom-columns / --sort-by, completion, explain, label, annotate, patch and
// edit. Each test gets its own database (see sbxctl_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/sbxctl_fixture.h"

namespace {

namespace fs = std::filesystem;
using sbx_e2e::CountLines;
using sbx_e2e::ReadAll;
using sbx_e2e::Result;
using sbx_e2e::SandboxManifest;
using sbx_e2e::SbxctlTest;
using sbx_e2e::WriteFile;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class KubectlVerbsTest : public SbxctlTest {
 protected:
  // Applies Sandboxes "dev" (label app=demo, display "Dev box") and "alpha".
  void ApplyTwo() {
    WriteFile(dir_ / "two.yaml",
              SandboxManifest("dev", "Dev box") + "---\n" + SandboxManifest("alpha", "Alpha"));
    const Result r = Run({"apply", "-f", (dir_ / "two.yaml").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  nlohmann::json GetJson(const std::string& name) {
    const Result r = Run({"get", "sb", name, "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
  // A one-line error and exit 1.
  static void ExpectOneLineError(const Result& r, const std::string& text) {
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_THAT(r.err, StartsWith("error: "));
    EXPECT_THAT(r.err, HasSubstr(text));
  }
};

// ---- get -o jsonpath / custom-columns / --sort-by ----------------------------------------------

TEST_F(KubectlVerbsTest, GetJsonPathRendersTheObjectOrTheList) {
  ApplyTwo();
  Result r = Run({"get", "sb", "dev", "-o", "jsonpath={.spec.displayName}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Dev box");
  r = Run({"get", "sb", "-o", "jsonpath={.items[*].metadata.name}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "alpha dev");
  r = Run({"get", "sb", "-o",
           R"(jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.app}{"\n"}{end})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "alpha=demo\ndev=demo\n");
  r = Run({"get", "sb", "-o", R"(jsonpath={.items[?(@.metadata.name=="dev")].spec.power})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Running");
  // A missing key prints nothing, as kubectl; --allow-missing-template-keys=false makes it fail.
  r = Run({"get", "sb", "dev", "-o", "jsonpath={.status.nope}"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  r = Run(
      {"get", "sb", "dev", "-o", "jsonpath={.spec.nope}", "--allow-missing-template-keys=false"});
  ExpectOneLineError(r, "error executing jsonpath {.spec.nope}: .nope is not found");
}

TEST_F(KubectlVerbsTest, GetBadTemplatesAndColumnsAreOneLineErrors) {
  ApplyTwo();
  ExpectOneLineError(Run({"get", "sb", "-o", "jsonpath={.items[0}"}),
                     "error parsing jsonpath {.items[0}: unterminated [");
  ExpectOneLineError(Run({"get", "sb", "-o", "jsonpath={range .items[*]}{.x}"}),
                     "{range} without {end}");
  ExpectOneLineError(Run({"get", "sb", "-o", "jsonpath="}), "no template given");
  ExpectOneLineError(Run({"get", "sb", "dev", "-o", "jsonpath={.metadata.name[0]}"}),
                     "array index [0] on a string");
  ExpectOneLineError(Run({"get", "sb", "-o", "custom-columns=NAME"}),
                     "unexpected custom-columns spec: \"NAME\"");
  ExpectOneLineError(Run({"get", "sb", "-o", "custom-columns=NAME:.metadata[x"}),
                     "error parsing jsonpath");
  ExpectOneLineError(Run({"get", "sb", "-o", "go-template={{.x}}"}), "unable to match a printer");
  ExpectOneLineError(Run({"get", "sb", "--sort-by", ".spec.nope"}),
                     "couldn't find any field with path \"{.spec.nope}\"");
  ExpectOneLineError(Run({"get", "sb", "--sort-by", "{.a[}"}), "error parsing jsonpath");
}

TEST_F(KubectlVerbsTest, GetCustomColumnsAndSortBy) {
  ApplyTwo();
  Result r = Run({"get", "sb", "-o",
                  "custom-columns=NAME:.metadata.name,DISPLAY:.spec.displayName,"
                  "READY:.status.conditions[?(@.type==\"Ready\")].status",
                  "--sort-by", "{.spec.displayName}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "NAME    DISPLAY   READY\n"
            "alpha   Alpha     <none>\n"
            "dev     Dev box   <none>\n");
  // Sorted by a number, not by name: "dev" was written first.
  r = Run({"get", "sb", "-o", "name", "--sort-by", ".metadata.resourceVersion"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev\nsandbox/alpha\n");
  r = Run({"get", "sb", "--no-headers", "-o", "custom-columns=N:metadata.name"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "alpha\ndev\n");
}

}  // namespace
