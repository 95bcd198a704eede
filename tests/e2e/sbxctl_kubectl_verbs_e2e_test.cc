// End-to-end tests of the kubectl habits of issue #18, on the BUILT sbxctl binary:
// get -o jsonpath / custom-columns / --sort-by, completion, explain, label, annotate, patch and
// edit. Each test gets its own database (see sbxctl_fixture.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
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
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::IsSupersetOf;
using ::testing::Not;
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
  // A shell script to use as $EDITOR; "$1" is the file to edit.
  void SetEditor(const std::string& name, const std::string& body) {
    const fs::path script = dir_ / name;
    WriteFile(script, "#!/bin/sh\nset -e\n" + body);
    fs::permissions(script, fs::perms::owner_all);
    env_["EDITOR"] = script.string();
    env_["TMPDIR"] = dir_.string();  // where kept copies of edits go
  }
  // The copies of edits sbxctl kept (it removes the file of a finished edit).
  std::vector<fs::path> KeptEdits() {
    std::vector<fs::path> kept;
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().filename().string().rfind("sbxctl-edit-", 0) == 0) {
        kept.push_back(entry.path());
      }
    }
    return kept;
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

TEST_F(KubectlVerbsTest, GetWatchRendersTheTemplatePerObject) {
  ApplyTwo();
  const int n = ++runs_;
  const pid_t watcher = Start(
      {"get", "sb", "-w", "--timeout", "60s", "-o", "jsonpath={.metadata.name}={.spec.power};"}, "",
      n);
  const fs::path out = dir_ / ("stdout" + std::to_string(n));
  const auto wait_for = [&out](const std::string& text) {
    return sbx::testing::PollUntil([&] { return ReadAll(out).find(text) != std::string::npos; },
                                   sbx::testing::In(std::chrono::seconds(30)),
                                   std::chrono::milliseconds(10));
  };
  ASSERT_TRUE(wait_for("alpha=Running;dev=Running;")) << ReadAll(out);
  ASSERT_EQ(Run({"patch", "sb", "alpha", "-p", R"({"spec":{"power":"Stopped"}})"}).exit_code, 0);
  EXPECT_TRUE(wait_for("alpha=Stopped;")) << ReadAll(out);
  kill(watcher, SIGTERM);
  const Result r = Finish(watcher, n);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "alpha=Running;dev=Running;alpha=Stopped;");
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

// ---- label / annotate / patch ------------------------------------------------------------------

TEST_F(KubectlVerbsTest, LabelAndAnnotateSetAndRemoveKeysWithoutANewGeneration) {
  ApplyTwo();
  Result r = Run({"label", "sb", "dev", "tier=web", "owner=ops"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev labeled\n");
  r = Run({"label", "sb/dev", "tier=web"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev not labeled\n");
  ExpectOneLineError(Run({"label", "sb", "dev", "app=other"}),
                     "'app' already has a value (demo), and --overwrite is false");
  r = Run({"label", "sb", "dev", "app=other", "owner-", "--overwrite"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"annotate", "sandbox", "dev", "note=hello world"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev annotated\n");
  nlohmann::json dev = GetJson("dev");
  EXPECT_EQ(dev["metadata"]["labels"], (nlohmann::json{{"app", "other"}, {"tier", "web"}}));
  EXPECT_EQ(dev["metadata"]["annotations"]["note"], "hello world");
  EXPECT_EQ(dev["metadata"]["generation"], 1);  // metadata only

  // Same validation as apply; every object of a kind; a stale --resource-version.
  ExpectOneLineError(Run({"label", "sb", "dev", "bad key=x"}), "metadata.labels.bad key");
  ExpectOneLineError(Run({"label", "sb", "dev"}), "at least one label update is required");
  r = Run({"label", "sb", "--all", "team=a"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/alpha labeled\nsandbox/dev labeled\n");
  r = Run({"label", "sb", "dev", "team=b", "--overwrite", "--resource-version", "1"});
  ExpectOneLineError(r,
                     "Operation cannot be fulfilled on sandboxes \"dev\": the object has been "
                     "modified");
  r = Run({"label", "sb", "nope", "a=b"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "Error from server (NotFound): sandboxes \"nope\" not found\n");
}

TEST_F(KubectlVerbsTest, PatchMergesJsonValidatesLikeApplyAndBumpsGenerationOnSpecChange) {
  ApplyTwo();
  Result r = Run({"patch", "sb", "dev", "-p", R"({"spec":{"power":"Stopped"}})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev patched\n");
  nlohmann::json dev = GetJson("dev");
  EXPECT_EQ(dev["spec"]["power"], "Stopped");
  EXPECT_EQ(dev["spec"]["displayName"], "Dev box");  // merged, not replaced
  EXPECT_EQ(dev["metadata"]["generation"], 2);
  r = Run({"patch", "sandbox/dev", "--type", "merge", "-p", R"({"spec":{"power":"Stopped"}})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev patched (no change)\n");
  r = Run({"patch", "sb", "dev", "--type", "json", "-p",
           R"([{"op":"replace","path":"/spec/displayName","value":"J"}])"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Run({"patch", "sb", "dev", "-p", R"({"metadata":{"labels":{"app":null}}})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  dev = GetJson("dev");
  EXPECT_EQ(dev["spec"]["displayName"], "J");
  EXPECT_EQ(dev["metadata"]["generation"], 3);
  EXPECT_FALSE(dev["metadata"].contains("labels"));

  const std::string before = Snapshot();
  ExpectOneLineError(Run({"patch", "sb", "dev", "-p", R"({"spec":{"powr":"Stopped"}})"}),
                     "spec.powr: unknown field \"powr\" (did you mean \"power\"?)");
  ExpectOneLineError(Run({"patch", "sb", "dev", "-p", R"({"spec":{"power":"Off"}})"}),
                     "spec.power");
  ExpectOneLineError(Run({"patch", "sb", "dev", "-p", "{not json"}), "not valid JSON");
  ExpectOneLineError(Run({"patch", "sb", "dev", "-p", R"({"metadata":{"name":"x"}})"}),
                     "cannot change kind, metadata.name");
  ExpectOneLineError(Run({"patch", "sb", "dev", "--type", "strategic", "-p", "{}"}),
                     "--type must be \"merge\" or \"json\"");
  ExpectOneLineError(Run({"patch", "sb", "dev", "--type", "json", "-p",
                          R"([{"op":"remove","path":"/spec/nope"}])"}),
                     "the patch does not apply");
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(KubectlVerbsTest, PatchFollowsTheSecretReferenceRulesOfApply) {
  WriteFile(dir_ / "ws.yaml",
            "apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: prod\nspec:\n"
            "  databricks:\n    host: https://x.cloud.databricks.com\n"
            "    tokenFrom: {env: SBX_SECRET_TOKEN}\n");
  Result r = Run({"apply", "-f", (dir_ / "ws.yaml").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // sbxd's own credentials are not a manifest author's to name (SECURITY.md).
  ExpectOneLineError(Run({"patch", "ws", "prod", "-p",
                          R"({"spec":{"databricks":{"tokenFrom":{"env":"DATABRICKS_TOKEN"}}}})"}),
                     "spec.databricks.tokenFrom.env");
  ExpectOneLineError(Run({"patch", "ws", "prod", "-p",
                          R"({"spec":{"databricks":{"tokenFrom":{"env":null,"file":"../x"}}}})"}),
                     "spec.databricks.tokenFrom.file");
  r = Run({"patch", "ws", "prod", "-p",
           R"({"spec":{"databricks":{"tokenFrom":{"env":"SBX_SECRET_OTHER"}}}})"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// ---- edit ---------------------------------------------------------------------------------------

TEST_F(KubectlVerbsTest, EditAppliesWhatWasSavedWithANewGeneration) {
  ApplyTwo();
  SetEditor("editor.sh",
            "grep -q '^# Please edit the object below' \"$1\"\n"
            "sed -i 's/displayName: Dev box/displayName: Edited/; s/app: demo/app: edited/' "
            "\"$1\"\n");
  const Result r = Run({"edit", "sb", "dev"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev edited\n");
  const nlohmann::json dev = GetJson("dev");
  EXPECT_EQ(dev["spec"]["displayName"], "Edited");
  EXPECT_EQ(dev["metadata"]["labels"]["app"], "edited");
  EXPECT_EQ(dev["metadata"]["generation"], 2);
  EXPECT_TRUE(KeptEdits().empty());
}

TEST_F(KubectlVerbsTest, EditSavedUnchangedOrEmptiedIsANoOp) {
  ApplyTwo();
  const std::string before = Snapshot();
  SetEditor("unchanged.sh", "true\n");
  Result r = Run({"edit", "sandbox/dev"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Edit cancelled, no changes made.\n");
  SetEditor("empty.sh", ": > \"$1\"\n");
  r = Run({"edit", "sb", "dev"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Edit cancelled, no changes made.\n");
  // A change to status only is no change of the object's.
  SetEditor("status.sh", "printf 'status:\\n  state: HACKED\\n' >> \"$1\"\n");
  r = Run({"edit", "sb", "dev"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Edit cancelled, no changes made.\n");
  EXPECT_EQ(Snapshot(), before);
  SetEditor("fails.sh", "exit 3\n");
  ExpectOneLineError(Run({"edit", "sb", "dev"}), "exited with status 3; nothing was changed");
  EXPECT_EQ(Snapshot(), before);
  EXPECT_TRUE(KeptEdits().empty());
}

TEST_F(KubectlVerbsTest, EditReopensAnInvalidEditWithTheErrorAtTheTop) {
  ApplyTwo();
  // 1st round: an invalid value. 2nd round: keep what the editor showed, then fix it.
  SetEditor("invalid.sh",
            "n=$(cat \"$0.count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$0.count\"\n"
            "cp \"$1\" \"$0.round$n\"\n"
            "if [ $n = 1 ]; then sed -i 's/power: Running/power: Sideways/' \"$1\"; "
            "else sed -i 's/power: Sideways/power: Stopped/' \"$1\"; fi\n");
  const Result r = Run({"edit", "sb", "dev"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "sandbox/dev edited\n");
  const std::string second = ReadAll(dir_ / "invalid.sh.round2");
  EXPECT_THAT(second, StartsWith("# Please edit the object below."));
  EXPECT_THAT(second, HasSubstr("# sandboxes \"dev\" was not valid:\n# * "));
  EXPECT_THAT(second, HasSubstr("spec.power: unsupported value \"Sideways\""));
  EXPECT_THAT(second, HasSubstr("power: Sideways"));  // what the user wrote, not the original
  EXPECT_EQ(GetJson("dev")["spec"]["power"], "Stopped");

  // The same invalid edit saved twice: cancelled, exit 1, the edit kept in a file.
  const std::string before = Snapshot();
  SetEditor("stubborn.sh", "sed -i 's/power: Stopped/power: Sideways/' \"$1\"\n");
  const Result again = Run({"edit", "sb", "dev"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("error: Edit cancelled, no valid changes were saved.\n"));
  ASSERT_EQ(KeptEdits().size(), 1u);
  EXPECT_THAT(again.err, HasSubstr(KeptEdits()[0].string()));
  EXPECT_EQ(Snapshot(), before);
}

TEST_F(KubectlVerbsTest, EditRefusesAChangeMadeWhileTheEditorWasOpen) {
  ApplyTwo();
  // The "concurrent" writer runs inside the editor: no timing involved.
  SetEditor("race.sh", std::string("\"") + SBXCTL_PATH + "\" --db \"" + db_.string() +
                           "\" label sb dev raced=yes >/dev/null\n"
                           "sed -i 's/displayName: Dev box/displayName: Lost/' \"$1\"\n");
  const Result r = Run({"edit", "sb", "dev"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("error: Operation cannot be fulfilled on sandboxes \"dev\": the "
                                "object has been modified; please apply your changes to the "
                                "latest version and try again\n"));
  const nlohmann::json dev = GetJson("dev");
  EXPECT_EQ(dev["spec"]["displayName"], "Dev box");
  EXPECT_EQ(dev["metadata"]["labels"]["raced"], "yes");
  ASSERT_EQ(KeptEdits().size(), 1u);
  EXPECT_THAT(ReadAll(KeptEdits()[0]), HasSubstr("displayName: Lost"));
}

TEST_F(KubectlVerbsTest, EditOfAMissingObjectIsNotFound) {
  SetEditor("never.sh", "exit 1\n");
  const Result r = Run({"edit", "sb", "nope"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "Error from server (NotFound): sandboxes \"nope\" not found\n");
}

// ---- explain ------------------------------------------------------------------------------------

TEST_F(KubectlVerbsTest, ExplainPrintsTypeDefaultAllowedValuesAndDescriptionFromTheSchemas) {
  Result r = Run({"explain", "sandbox.spec.power"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "KIND:       Sandbox\n"
            "VERSION:    sbx.dev/v1alpha1\n\n"
            "FIELD: power <string>\n"
            "DEFAULT: Running\n"
            "ENUM:\n    Running\n    Stopped\n    OnDemand\n\n"
            "DESCRIPTION:\n    Desired power state. OnDemand: set up once, then stopped idleStop "
            "after its workers' last task and started again when a task (or a session waiting "
            "for its executor) needs it.\n");
  r = Run({"explain", "sb.spec.setup"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("FIELD: setup <[]Object>\n"));
  EXPECT_THAT(r.out, HasSubstr("  name\t<string> -required-\n    Unique step name.\n"));
  EXPECT_THAT(r.out, HasSubstr("  timeout\t<string>\n  default: 5m\n"));
  // Through a $ref / allOf, and a list is transparent.
  r = Run({"explain", "agentworkers.spec.sandbox.setup.run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("FIELD: run <string>\n"));
  r = Run({"explain", "ws"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("KIND:       Workspace\n"));
  EXPECT_THAT(r.out, HasSubstr("  metadata\t<Object> -required-\n"));
  r = Run({"explain", "sandbox", "--recursive"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  spec\t<Object>\n"));
  EXPECT_THAT(r.out, HasSubstr("    setup\t<[]Object>\n      name\t<string>\n"));
  EXPECT_THAT(r.out, HasSubstr("    labels\t<map[string]string>\n"));
}

TEST_F(KubectlVerbsTest, ExplainOfAnUnknownFieldOrKindIsAOneLineError) {
  ExpectOneLineError(Run({"explain", "sandbox.spec.nope"}), "field \"nope\" does not exist");
  ExpectOneLineError(Run({"explain", "sandbox.spec.power.x"}), "field \"x\" does not exist");
  ExpectOneLineError(Run({"explain", "sandbox."}), "a field name is missing");
  ExpectOneLineError(Run({"explain", "pods"}), "pods");
  ExpectOneLineError(Run({"explain"}), "you must specify the type of resource to explain");
}

// ---- completion ---------------------------------------------------------------------------------

// Lines of `text`.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    out.push_back(line);
  }
  return out;
}

TEST_F(KubectlVerbsTest, CompleteOffersVerbsKindsFlagsAndNamesFromTheStore) {
  ApplyTwo();
  const auto complete = [this](std::vector<std::string> words) {
    words.insert(words.begin(), {"__complete", "--"});
    const Result r = Run(words);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Lines(r.out);
  };
  EXPECT_THAT(complete({"ed"}), ElementsAre("edit"));
  EXPECT_THAT(complete({""}), IsSupersetOf({"apply", "get", "label", "annotate", "patch", "edit",
                                            "explain", "completion"}));
  EXPECT_THAT(complete({""}), Not(Contains("__complete")));
  EXPECT_THAT(complete({"get", ""}), IsSupersetOf({"sandbox", "sb", "aw", "ws", "inventory"}));
  EXPECT_THAT(complete({"get", "sb", ""}), ElementsAre("alpha", "dev"));
  EXPECT_THAT(complete({"label", "sandboxes", "d"}), ElementsAre("dev"));
  EXPECT_THAT(complete({"edit", "sb/"}), ElementsAre("sb/alpha", "sb/dev"));
  EXPECT_THAT(complete({"-n", "other", "get", "sb", ""}), IsEmpty());
  EXPECT_THAT(complete({"get", "-n", ""}), ElementsAre("default"));
  EXPECT_THAT(complete({"get", "--so"}), ElementsAre("--sort-by"));
  EXPECT_THAT(complete({"label", "--ov"}), ElementsAre("--overwrite"));
  EXPECT_THAT(complete({"get", "sb", "-o", "j"}), ElementsAre("json", "jsonpath="));
  EXPECT_THAT(complete({"explain", "sb.spec.se"}), ElementsAre("sb.spec.setup"));
  EXPECT_THAT(complete({"completion", ""}), ElementsAre("bash", "zsh", "fish"));
  // A <TAB> does not create a database.
  const fs::path none = dir_ / "none" / "sbx.db";
  EXPECT_THAT(complete({"--db", none.string(), "get", "sb", ""}), IsEmpty());
  EXPECT_FALSE(fs::exists(none));
}

TEST_F(KubectlVerbsTest, CompletionScriptsForBashZshAndFish) {
  ApplyTwo();
  Result r = Run({"completion", "bash"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path script = dir_ / "sbxctl.bash";
  WriteFile(script, r.out);
  // The script in a real bash, sbxctl on PATH as a user has it.
  const fs::path out = dir_ / "bash.out";
  const std::string command = "PATH=\"" + fs::path(SBXCTL_PATH).parent_path().string() +
                              ":$PATH\" SBX_DB=\"" + db_.string() + "\" bash -c 'source \"" +
                              script.string() +
                              "\"; COMP_WORDS=(sbxctl get sb d); COMP_CWORD=3; _sbxctl; "
                              "printf \"%s\\n\" \"${COMPREPLY[@]}\"; complete -p sbxctl' > \"" +
                              out.string() + "\" 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << ReadAll(out);
  EXPECT_EQ(ReadAll(out), "dev\ncomplete -o default -F _sbxctl sbxctl\n");

  r = Run({"completion", "zsh"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("#compdef sbxctl\n"));
  EXPECT_THAT(r.out, HasSubstr("__complete --"));
  r = Run({"completion", "fish"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("complete -c sbxctl -f -a '(__sbxctl_complete)'"));
  ExpectOneLineError(Run({"completion", "tcsh"}), "unsupported shell type \"tcsh\"");
}

}  // namespace
