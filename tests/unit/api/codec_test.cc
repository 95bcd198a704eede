#include "api/codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "api/defaults.h"
#include "api/validation.h"
#include "tests/unit/api/test_objects.h"

namespace sbx::api {
namespace {

using std::chrono::seconds;
using test_objects::FullGitSource;
using test_objects::FullNotifier;
using test_objects::FullPool;
using test_objects::FullSandbox;
using test_objects::FullTask;
using test_objects::FullWorker;
using test_objects::FullWorkspace;

TEST(CodecTest, ObjectJsonRoundTripsEveryKind) {
  for (const Object& o :
       {FullSandbox(), FullWorkspace(), FullWorker(), FullTask(), FullGitSource(), FullPool(),
        FullNotifier(), MakeObject(Kind::kSandbox, "empty"), MakeObject(Kind::kWorkspace, "e"),
        MakeObject(Kind::kAgentWorker, "e"), MakeObject(Kind::kAgentTask, "e"),
        MakeObject(Kind::kGitSource, "e"), MakeObject(Kind::kNotifier, "e")}) {
    for (bool pretty : {true, false}) {
      StatusOr<Object> back = DecodeObjectJson(EncodeObjectJson(o, pretty));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, o) << EncodeObjectJson(o);
    }
  }
}

TEST(CodecTest, SpecAndStatusJsonRoundTrip) {
  for (const Object& o : {FullSandbox(), FullWorkspace(), FullWorker(), FullTask(), FullGitSource(),
                          FullPool(), FullNotifier()}) {
    StatusOr<Spec> spec = DecodeSpecJson(o.kind, EncodeSpecJson(o));
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(*spec == o.spec) << EncodeSpecJson(o);
    StatusOr<ResourceStatus> status = DecodeStatusJson(o.kind, EncodeStatusJson(o));
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_TRUE(*status == o.status) << EncodeStatusJson(o);
  }
}

TEST(CodecTest, SpecJsonIsCanonicalSortedAndCompact) {
  Object o = MakeObject(Kind::kSandbox, "a");
  o.sandbox_spec().display_name = "A";
  o.sandbox_spec().inactivity_timeout = seconds(900);
  EXPECT_EQ(EncodeSpecJson(o),
            R"({"deletionPolicy":"Delete","displayName":"A","inactivityTimeout":"15m",)"
            R"("power":"Running","workspaceRef":"default"})");
  EXPECT_EQ(EncodeStatusJson(o), "{}");
  // Same object, same bytes; a copy encodes identically.
  Object copy = o;
  EXPECT_EQ(EncodeSpecJson(copy), EncodeSpecJson(o));
}

TEST(CodecTest, EmptySubObjectsAreOmitted) {
  Object o = MakeObject(Kind::kWorkspace, "default");
  EXPECT_EQ(EncodeSpecJson(o), "{}");
  Object w = MakeObject(Kind::kAgentWorker, "w");
  EXPECT_EQ(EncodeSpecJson(w), R"({"executor":{"command":"codex"},"restartPolicy":"Always",)"
                               R"("session":"Shared",)"
                               R"("workspaceDirectory":"/home/sandbox-agent/workspace"})");
}

TEST(CodecTest, DecodeSpecJsonIgnoresUnknownFields) {
  StatusOr<Spec> spec = DecodeSpecJson(Kind::kSandbox, R"({"image":"x","futureField":1})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(std::get<SandboxSpec>(*spec).image, "x");
}

TEST(CodecTest, DecodeSpecJsonReportsBadInput) {
  EXPECT_EQ(DecodeSpecJson(Kind::kSandbox, "{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeSpecJson(Kind::kSandbox, R"({"power":"Off"})").status().message(),
            "spec.power: unsupported value \"Off\" (expected Running|Stopped|OnDemand)");
}

TEST(CodecTest, YamlRoundTripsThroughManifestDecoding) {
  // Manifest decoding drops server-set fields and status, so compare specs and user metadata.
  for (const Object& o : {FullSandbox(), FullWorkspace(), FullWorker(), FullTask(), FullGitSource(),
                          FullPool(), FullNotifier()}) {
    const std::string yaml = EncodeObjectYaml(o);
    StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "x.yaml");
    ASSERT_TRUE(ms.ok()) << ms.status() << "\n" << yaml;
    ASSERT_EQ(ms->size(), 1u);
    const Object& back = (*ms)[0].object;
    EXPECT_TRUE(back.spec == o.spec) << yaml;
    EXPECT_EQ(back.metadata.name, o.metadata.name);
    EXPECT_EQ(back.metadata.namespace_, o.metadata.namespace_);
    EXPECT_EQ(back.metadata.labels, o.metadata.labels);
    EXPECT_EQ(back.metadata.annotations, o.metadata.annotations);
  }
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

constexpr char kHeader[] = "apiVersion: sbx.dev/v1alpha1\n";

std::string DecodeError(const std::string& yaml) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "workers/a.yaml");
  if (ms.ok()) {
    return "OK";
  }
  EXPECT_EQ(ms.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ms.status().message().find('\n'), std::string::npos) << "errors are one line";
  return ms.status().message();
}

TEST(DecodeManifestsTest, DecodesMultipleDocumentsWithTheirLines) {
  const std::string yaml = std::string("# leading comment\n---\n") + kHeader +
                           "kind: Sandbox\n"
                           "metadata:\n"
                           "  name: a\n"
                           "  namespace: team\n"
                           "  labels: {app: x}\n"
                           "spec:\n"
                           "  inactivityTimeout: 1h30m\n"
                           "  power: Stopped\n"
                           "  setup:\n"
                           "    - name: deps\n"
                           "      run: |\n"
                           "        echo hi\n"
                           "      timeout: 90s\n"
                           "---\n"
                           "---\n" +
                           kHeader + "kind: Workspace\nmetadata: {name: default}\n";
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "f.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_EQ(ms->size(), 2u);
  const Manifest& a = (*ms)[0];
  EXPECT_EQ(a.file, "f.yaml");
  EXPECT_EQ(a.line, 3);
  EXPECT_EQ(a.object.kind, Kind::kSandbox);
  EXPECT_EQ(a.object.metadata.namespace_, "team");
  EXPECT_EQ(a.object.metadata.labels.at("app"), "x");
  const SandboxSpec& s = a.object.sandbox_spec();
  EXPECT_EQ(s.inactivity_timeout, seconds(5400));
  EXPECT_EQ(s.power, Power::kStopped);
  ASSERT_EQ(s.setup.size(), 1u);
  EXPECT_EQ(s.setup[0].run, "echo hi\n");
  EXPECT_EQ(s.setup[0].timeout, seconds(90));
  EXPECT_EQ((*ms)[1].object.kind, Kind::kWorkspace);
  EXPECT_EQ((*ms)[1].line, 19);
}

TEST(DecodeManifestsTest, AcceptsJson) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      R"({"apiVersion": "sbx.dev/v1alpha1", "kind": "AgentWorker", "metadata": {"name": "w"},
          "spec": {"sandboxRef": "box", "executor": {"args": ["a", "b"]}}})",
      "w.json");
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_EQ(ms->size(), 1u);
  const AgentWorkerSpec& s = (*ms)[0].object.agent_worker_spec();
  EXPECT_EQ(s.sandbox_ref, "box");
  EXPECT_EQ(s.executor.args, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.executor.command, "codex");
}

TEST(DecodeManifestsTest, EmptyInputGivesNoObjects) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests("# nothing\n---\n", "e.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_TRUE(ms->empty());
}

TEST(DecodeManifestsTest, IgnoresServerSetMetadataAndStatus) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(std::string(kHeader) +
                                                           "kind: Sandbox\n"
                                                           "metadata:\n"
                                                           "  name: a\n"
                                                           "  uid: abc\n"
                                                           "  resourceVersion: 7\n"
                                                           "  finalizers: [x]\n"
                                                           "status:\n"
                                                           "  state: RUNNING\n"
                                                           "  whatever: 1\n",
                                                       "f.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  const Object& o = (*ms)[0].object;
  EXPECT_EQ(o.metadata.uid, "");
  EXPECT_EQ(o.metadata.resource_version, 0);
  EXPECT_TRUE(o.metadata.finalizers.empty());
  EXPECT_EQ(o.sandbox_status(), SandboxStatus{});
}

TEST(DecodeManifestsTest, NumbersAreAcceptedForStringFields) {
  StatusOr<std::vector<Manifest>> ms =
      DecodeManifests(std::string(kHeader) +
                          "kind: Workspace\nmetadata: {name: w}\n"
                          "spec: {databricks: {workspaceId: 1234567890123456}}\n",
                      "f.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ((*ms)[0].object.workspace_spec().databricks.workspace_id, "1234567890123456");
}

TEST(DecodeManifestsTest, MalformedYaml) {
  EXPECT_EQ(DecodeError("kind: Sandbox\nmetadata: {name: a\n"),
            "workers/a.yaml:3:1: invalid YAML: end of map flow not found");
  EXPECT_EQ(DecodeError("a: b\n  c: d\n"), "workers/a.yaml:2:4: invalid YAML: illegal map value");
}

TEST(DecodeManifestsTest, UnknownFieldWithHint) {
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  dispalyName: x\n"),
            "workers/a.yaml:6:3: spec.dispalyName: unknown field \"dispalyName\" (did you mean "
            "\"displayName\"?)");
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  display_name: x\n"),
            "workers/a.yaml:6:3: spec.display_name: unknown field \"display_name\" (did you "
            "mean \"displayName\"?)");
  // Nothing close: no hint.
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  colour: blue\n"),
            "workers/a.yaml:6:3: spec.colour: unknown field \"colour\"");
}

TEST(DecodeManifestsTest, WrongType) {
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  setup: abc\n"),
            "workers/a.yaml:6:3: spec.setup: expected a list, got \"abc\"");
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  image: {a: b}\n"),
            "workers/a.yaml:6:3: spec.image: expected a string, got a mapping");
  EXPECT_EQ(
      DecodeError(std::string(kHeader) + "kind: Workspace\nmetadata:\n  name: a\nspec:\n  limits:\n"
                                         "    maxSandboxes: lots\n"),
      "workers/a.yaml:7:5: spec.limits.maxSandboxes: expected an integer, got \"lots\"");
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  displayName: true\n"),
            "workers/a.yaml:6:3: spec.displayName: expected a string, got a boolean (quote "
            "it: \"true\")");
  EXPECT_EQ(
      DecodeError(std::string(kHeader) + "kind: Workspace\nmetadata:\n  name: a\nspec:\n  openai:\n"
                                         "    apiKeyFrom: OPENAI_API_KEY\n"),
      "workers/a.yaml:7:5: spec.openai.apiKeyFrom: expected a mapping like {env: NAME} "
      "or {file: /path}, got \"OPENAI_API_KEY\"");
  EXPECT_EQ(DecodeError("- a\n"),
            "workers/a.yaml:1:1: expected a mapping with apiVersion, kind, metadata and spec, "
            "got a list");
}

TEST(DecodeManifestsTest, BadDuration) {
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: AgentWorker\nmetadata:\n  name: a\nspec:\n  sandbox:\n"
                        "    inactivityTimeout: 15x\n"),
            "workers/a.yaml:7:5: spec.sandbox.inactivityTimeout: invalid duration \"15x\" "
            "(expected e.g. 90s, 15m, 1h30m)");
}

TEST(DecodeManifestsTest, BadEnum) {
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  power: running\n"),
            "workers/a.yaml:6:3: spec.power: unsupported value \"running\" (expected "
            "Running|Stopped|OnDemand)");
}

TEST(DecodeManifestsTest, UnknownKind) {
  EXPECT_EQ(DecodeError(std::string(kHeader) + "kind: Sandboxx\nmetadata:\n  name: a\n"),
            "workers/a.yaml:2:1: kind: unknown kind \"Sandboxx\" (expected one of: Workspace, "
            "Sandbox, AgentWorker, AgentTask, GitSource, AgentPool, Notifier; did you mean "
            "\"Sandbox\"?)");
  EXPECT_EQ(DecodeError(std::string(kHeader) + "metadata:\n  name: a\n"),
            "workers/a.yaml:1:1: kind: required field is missing (expected one of: Workspace, "
            "Sandbox, AgentWorker, AgentTask, GitSource, AgentPool, Notifier)");
}

TEST(DecodeManifestsTest, WrongApiVersion) {
  EXPECT_EQ(DecodeError("apiVersion: sbx.dev/v1\nkind: Sandbox\nmetadata:\n  name: a\n"),
            "workers/a.yaml:1:1: apiVersion: unsupported apiVersion \"sbx.dev/v1\" (expected "
            "sbx.dev/v1alpha1)");
  EXPECT_EQ(DecodeError("kind: Sandbox\nmetadata:\n  name: a\n"),
            "workers/a.yaml:1:1: apiVersion: required field is missing (expected "
            "sbx.dev/v1alpha1)");
}

TEST(DecodeManifestsTest, MissingName) {
  EXPECT_EQ(DecodeError(std::string(kHeader) + "kind: Sandbox\nmetadata:\n  labels: {}\n"),
            "workers/a.yaml:3:1: metadata.name: required field is missing");
  EXPECT_EQ(DecodeError(std::string(kHeader) + "kind: Sandbox\n"),
            "workers/a.yaml:1:1: metadata.name: required field is missing");
}

TEST(DecodeManifestsTest, DuplicateField) {
  EXPECT_EQ(DecodeError(std::string(kHeader) + "kind: Sandbox\nmetadata:\n  name: a\n  name: b\n"),
            "workers/a.yaml:5:3: metadata.name: duplicate field");
}

TEST(DecodeManifestsTest, ErrorsPointIntoLaterDocuments) {
  EXPECT_EQ(DecodeError(std::string(kHeader) + "kind: Sandbox\nmetadata: {name: a}\n---\n" +
                        kHeader + "kind: Sandbox\nmetadata: {name: b}\nspec:\n  imagee: x\n"),
            "workers/a.yaml:9:3: spec.imagee: unknown field \"imagee\" (did you mean \"image\"?)");
}

TEST(DecodeManifestsTest, LocateErrorUsesTheDeepestKnownField) {
  StatusOr<std::vector<Manifest>> ms =
      DecodeManifests(std::string(kHeader) +
                          "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  setup:\n"
                          "    - name: x\n      run: echo\n",
                      "f.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  const Manifest& m = (*ms)[0];
  EXPECT_EQ(LocateError(m, InvalidArgumentError("spec.setup[0].run: must not be empty")).message(),
            "f.yaml:8:7: spec.setup[0].run: must not be empty");
  EXPECT_EQ(LocateError(m, InvalidArgumentError("spec.setup[0].timeout: bad")).message(),
            "f.yaml:7:7: spec.setup[0].timeout: bad");
  EXPECT_EQ(LocateError(m, InvalidArgumentError("spec.image: bad")).message(),
            "f.yaml:5:1: spec.image: bad");
  EXPECT_EQ(LocateError(m, InvalidArgumentError("other: bad")).message(), "f.yaml:1:1: other: bad");
  EXPECT_TRUE(LocateError(m, OkStatus()).ok());
}

TEST(DecodeManifestsTest, TrickyStringsRoundTripThroughYaml) {
  const std::string tricky[] = {
      "",         "true",     "null",      "~",        "123",     "1.5",          "0x1F", "1:30",
      "-",        "- a",      "a: b",      "#x",       "  lead",  "trail ",       "a\nb", "a\nb\n",
      "a\n\nb\n", "a\nb\n\n", "tab\there", "quote\"s", "ünïcode", "{x}",          "[y]",  "*a",
      "&b",       "!t",       "%p",        "@q",       "`r",      "line\r\nbreak"};
  for (const std::string& s : tricky) {
    Object o = MakeObject(Kind::kAgentWorker, "w");
    o.agent_worker_spec().agent.instructions = s;
    o.agent_worker_spec().agent.model = s;
    o.metadata.labels = {{"k", s}};
    const std::string yaml = EncodeObjectYaml(o);
    StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "x.yaml");
    ASSERT_TRUE(ms.ok()) << ms.status() << "\n" << yaml;
    ASSERT_EQ(ms->size(), 1u);
    EXPECT_EQ((*ms)[0].object.agent_worker_spec().agent.instructions, s) << yaml;
    EXPECT_EQ((*ms)[0].object.agent_worker_spec().agent.model, s) << yaml;
    EXPECT_EQ((*ms)[0].object.metadata.labels.at("k"), s) << yaml;
  }
}

TEST(DecodeManifestsTest, ThousandManifestsDecodeWellUnderASecond) {
  std::string yaml;
  for (int i = 0; i < 1000; ++i) {
    yaml += std::string("---\n") + kHeader + "kind: Sandbox\nmetadata:\n  name: box-" +
            std::to_string(i) +
            "\n  labels: {app: agents}\nspec:\n  displayName: Box\n  inactivityTimeout: 15m\n"
            "  setup:\n    - name: deps\n      run: echo hi\n";
  }
  // CPU time, not wall time: other builds share the 2-core CI machine.
  const std::clock_t start = std::clock();
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(yaml, "many.yaml");
  const double elapsed_ms = 1000.0 * static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ(ms->size(), 1000u);
#if defined(__SANITIZE_ADDRESS__)
  constexpr double kBudgetMs = 3000;  // ASan makes allocation-heavy parsing ~3x slower.
#else
  constexpr double kBudgetMs = 1000;
#endif
  EXPECT_LT(elapsed_ms, kBudgetMs);
  std::printf("decoded 1000 manifests in %.0f ms of CPU\n", elapsed_ms);
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

// Every prefix of a valid manifest and a few hostile inputs give either objects or a one-line
// error, never a crash (run under ASan in CI).
TEST(DecodeManifestsTest, TruncatedAndHostileInputFailCleanly) {
  const std::string full =
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: w\n"
      "  labels: {a: b}\nspec:\n  sandbox:\n    setup:\n      - name: x\n        run: |\n"
      "          echo \"hi\"\n    inactivityTimeout: 15m\n  executor:\n    args: [a, 'b']\n";
  for (size_t n = 0; n <= full.size(); ++n) {
    StatusOr<std::vector<Manifest>> ms = DecodeManifests(full.substr(0, n), "p.yaml");
    if (!ms.ok()) {
      EXPECT_EQ(ms.status().message().find('\n'), std::string::npos) << ms.status();
      EXPECT_EQ(ms.status().message().rfind("p.yaml:", 0), 0u) << ms.status();
    }
  }
  const std::string hostile[] = {std::string("\0\1\2", 3),
                                 "{{{{",
                                 "]]]",
                                 "- - - -",
                                 "&a [*a]",
                                 "? complex\n: key",
                                 "\"unterminated",
                                 "key: \"a\nb\": c",
                                 "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata:\n"
                                 "  name: a\nspec:\n  \"bad\\nkey\": 1\n"};
  for (const std::string& text : hostile) {
    StatusOr<std::vector<Manifest>> ms = DecodeManifests(text, "h.yaml");
    if (!ms.ok()) {
      EXPECT_EQ(ms.status().message().find('\n'), std::string::npos) << ms.status();
    }
  }
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

// tests/fuzz/regressions/manifest_codec/: yaml-cpp reported documents forever on this input,
// and decoding grew without bound. It must now fail with one clear line.
TEST(DecodeManifestsTest, InputOnWhichTheParserMakesNoProgressFailsCleanly) {
  const std::filesystem::path file = std::filesystem::path(SBX_SOURCE_DIR) / "tests" / "fuzz" /
                                     "regressions" / "manifest_codec" /
                                     "oom-parseyaml-endless-documents";
  std::ifstream in(file, std::ios::binary);
  ASSERT_TRUE(in) << file;
  const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  StatusOr<std::vector<Manifest>> decoded = DecodeManifests(content, "endless.yaml");
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoded.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(decoded.status().message().rfind("endless.yaml:", 0), 0u) << decoded.status();
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

// `inactivityTimeout: 0` (auto-stop off) survives decode → validate → encode → decode; without
// the field the spec has no timeout at all (also off, but not sent).
TEST(DecodeManifestsTest, ZeroInactivityTimeoutRoundTrips) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: a}\n"
      "spec:\n  inactivityTimeout: 0\n",
      "a.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  Object o = (*ms)[0].object;
  ASSERT_EQ(o.sandbox_spec().inactivity_timeout, std::chrono::seconds(0));
  ApplyDefaults(o);
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
  const std::string json = EncodeSpecJson(o);
  EXPECT_NE(json.find(R"("inactivityTimeout":"0s")"), std::string::npos) << json;
  StatusOr<std::vector<Manifest>> again = DecodeManifests(EncodeObjectYaml(o), "b.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].object.sandbox_spec().inactivity_timeout, std::chrono::seconds(0));
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Review #10, finding 3. An alias is refused where it is used, before anything is copied: the
// old decoder expanded each one into a copy of the anchored node.
TEST(DecodeManifestsTest, RefusesAliasesWhereTheyAreUsed) {
  EXPECT_EQ(
      DecodeError(std::string(kHeader) + "kind: Sandbox\nmetadata:\n  name: a\n  annotations:\n"
                                         "    x: &v hello\n    y: *v\n"),
      "workers/a.yaml:7:8: metadata.annotations.y: aliases (*name) are not allowed in sbx "
      "manifests");
  EXPECT_EQ(
      DecodeError(std::string(kHeader) + "kind: Sandbox\nmetadata: {name: a}\nspec:\n  setup:\n"
                                         "    - &step {name: a, run: b}\n    - *step\n"),
      "workers/a.yaml:7:7: spec.setup[1]: aliases (*name) are not allowed in sbx manifests");
  // As a key, the place is the mapping it is a key of ("yaml" at the top).
  EXPECT_EQ(DecodeError("x: &k kind\n*k : Sandbox\n"),
            "workers/a.yaml:2:1: yaml: aliases (*name) are not allowed in sbx manifests");
  // An anchor alone is harmless.
  EXPECT_EQ(DecodeError(std::string(kHeader) + "kind: Sandbox\nmetadata:\n  name: &n a\n"), "OK");
}

TEST(DecodeManifestsTest, AliasBombsFailAtTheFirstAlias) {
  // A large scalar used many times (this shape took 2 GB with a 1 MiB scalar)…
  std::string wide = std::string(kHeader) + "kind: Sandbox\nmetadata:\n  name: a\n" +
                     "  annotations:\n    big: &big " + std::string(64 << 10, 'x') + "\n";
  for (int i = 0; i < 2000; ++i) {
    wide += "    a" + std::to_string(i) + ": *big\n";
  }
  EXPECT_EQ(DecodeError(wide),
            "workers/a.yaml:7:9: metadata.annotations.a0: aliases (*name) are not allowed in sbx "
            "manifests");
  // …and "billion laughs": ten times ten times … a small list.
  std::string laughs = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level < 10; ++level) {
    const std::string prev = "*l" + std::to_string(level - 1);
    laughs += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [" + prev;
    for (int k = 1; k < 10; ++k) {
      laughs += ", " + prev;
    }
    laughs += "]\n";
  }
  EXPECT_EQ(DecodeError(laughs),
            "workers/a.yaml:2:10: l1[0]: aliases (*name) are not allowed in sbx manifests");
}

std::string NestedLists(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// yaml-cpp's own recursion guard said "invalid YAML: bad file" at 1:1; the limit is now ours,
// with the place where it is crossed.
TEST(DecodeManifestsTest, NestingDeeperThanTheLimitIsRefusedWithItsPlace) {
  ASSERT_EQ(kMaxManifestDepth, 64);
  EXPECT_THAT(DecodeError(NestedLists(64)), Not(HasSubstr("nesting")));
  EXPECT_EQ(DecodeError(NestedLists(65)),
            "workers/a.yaml:1:65: yaml: nesting deeper than 64 levels");
  EXPECT_EQ(DecodeError(NestedLists(400)),
            "workers/a.yaml:1:65: yaml: nesting deeper than 64 levels");
  std::string block;
  for (int i = 0; i < 100; ++i) {
    block += std::string(2 * i, ' ') + "k:\n";
  }
  EXPECT_EQ(DecodeError(block), "workers/a.yaml:65:129: yaml: nesting deeper than 64 levels");
  // Unclosed: yaml-cpp reads "[[" as a list holding a mapping with a list for key, so the
  // 64 levels are crossed at the 33rd bracket. Must not overflow the stack (ASan in CI).
  EXPECT_EQ(DecodeError("a: " + std::string(100'000, '[')),
            "workers/a.yaml:1:36: yaml: nesting deeper than 64 levels");
  EXPECT_EQ(DecodeError(std::string(100'000, '{')),
            "workers/a.yaml:1:64: yaml: nesting deeper than 64 levels");
}

TEST(DecodeManifestsTest, MoreNodesThanTheLimitAreRefused) {
  std::string list = "[0";
  list.reserve(2 * kMaxManifestNodes + 4);
  for (size_t i = 1; i < kMaxManifestNodes; ++i) {
    list += ",0";
  }
  // The list and kMaxManifestNodes - 1 items are exactly the limit; one item more is over it.
  EXPECT_THAT(DecodeError(list.substr(0, list.size() - 2) + "]"), HasSubstr("got a list"));
  EXPECT_EQ(DecodeError(list + "]"), "workers/a.yaml:1:" + std::to_string(2 * kMaxManifestNodes) +
                                         ": yaml: more than 250000 keys and values in one file");
}

// yaml-cpp keeps every token of a flow collection that might be a mapping key until the
// collection ends (~250 bytes per "["): 8 MiB of "[" took 2 GB before the first event.
TEST(DecodeManifestsTest, HugeFlowCollectionsAreCutShortBeforeTheyAreBuffered) {
  const std::string expected =
      "workers/a.yaml:1:1: yaml: a flow collection ([…] or {…}) with more than 262144 entries; "
      "write it in block style";
  EXPECT_EQ(DecodeError(std::string(300'000, '[')), expected);
  std::string flat = "[a";
  for (int i = 0; i < 300'000; ++i) {
    flat += ",a";
  }
  EXPECT_EQ(DecodeError(flat + "]"), expected);
  // As a value, after other documents: yaml-cpp delivers the outer "{" before buffering.
  EXPECT_THAT(DecodeError("a: b\n---\nc: " + std::string(300'000, '{')),
              HasSubstr("workers/a.yaml:3:4: yaml: a flow collection"));
  // Only flow indicators count: a long scalar passes, and so does a flow list under the limit.
  std::string meta = std::string(kHeader) + "kind: Sandbox\nmetadata:\n  name: a\n";
  EXPECT_EQ(DecodeError(meta + "  annotations:\n    big: \"" + std::string(4 << 20, 'x') + "\"\n"),
            "OK");
  std::string list = "[x";
  for (int i = 0; i < 200'000; ++i) {
    list += ",x";
  }
  EXPECT_EQ(DecodeError(meta + "  labels: {a: b}\nspec:\n  image: " + list + "]\n"),
            "workers/a.yaml:7:3: spec.image: expected a string, got a list");
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

// Review #10, finding 4: "\xff\xfe" in an annotation aborted sbxctl in the store's JSON encoder.
// Every key and string value is checked once, where it is parsed.
TEST(DecodeManifestsTest, RefusesTextThatIsNotUtf8WithItsPlace) {
  const std::string meta = std::string(kHeader) + "kind: Sandbox\nmetadata:\n  name: a\n";
  EXPECT_EQ(DecodeError(meta + "  annotations:\n    note: \"\xff\xfe\"\n"),
            "workers/a.yaml:6:11: metadata.annotations.note: not valid UTF-8");
  EXPECT_EQ(DecodeError(meta + "  annotations:\n    note: plain \xff\n"),
            "workers/a.yaml:6:11: metadata.annotations.note: not valid UTF-8");
  // A key: the path of its mapping ("yaml" at the top).
  EXPECT_EQ(DecodeError(meta + "  labels:\n    \xc3: x\n"),
            "workers/a.yaml:6:5: metadata.labels: not valid UTF-8");
  EXPECT_EQ(DecodeError("k\xff: x\n"), "workers/a.yaml:1:1: yaml: not valid UTF-8");
  EXPECT_EQ(DecodeError(meta + "spec:\n  setup:\n    - {name: a, run: \"\xed\xa0\x80\"}\n"),
            "workers/a.yaml:7:22: spec.setup[0].run: not valid UTF-8");
  const std::string bad[] = {
      "\x80",              // continuation byte alone
      "\xc0\xaf",          // overlong "/"
      "\xe0\x80\xaf",      // overlong "/"
      "\xe2\x82",          // truncated "€"
      "\xed\xa0\x80",      // UTF-16 surrogate
      "\xf4\x90\x80\x80",  // above U+10FFFF
      "\xf8\x88\x80\x80\x80",
  };
  for (const std::string& b : bad) {
    EXPECT_THAT(DecodeError(meta + "  annotations: {x: \"a" + b + "z\"}\n"),
                HasSubstr(": metadata.annotations.x: not valid UTF-8"))
        << b;
  }
  // Well-formed text of every length passes, and so does YAML's \x escape (a code point).
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      meta + "  annotations: {a: \"é€😀\xef\xbf\xbf\xf4\x8f\xbf\xbf\", b: \"\\xff\"}\n", "u.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ((*ms)[0].object.metadata.annotations.at("a"), "é€😀\xef\xbf\xbf\xf4\x8f\xbf\xbf");
  EXPECT_EQ((*ms)[0].object.metadata.annotations.at("b"), "\xc3\xbf");
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

// Review #10, finding 5: 99999999999h was accepted and overflowed later.
TEST(DecodeManifestsTest, DurationAboveTheParsersMaximumIsRefusedAtItsPlace) {
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Sandbox\nmetadata:\n  name: a\nspec:\n  inactivityTimeout: "
                        "99999999999h\n"),
            "workers/a.yaml:6:3: spec.inactivityTimeout: invalid duration \"99999999999h\": "
            "more than the maximum of 876000h (100 years)");
}

// A multi-line string with a C1 control (U+009B, the one-byte CSI) is not written as a raw
// literal block: `get -o yaml` and `diff` print it escaped. (yaml-cpp writes DEL as it is in a
// double-quoted scalar; terminals ignore DEL.)
TEST(DecodeManifestsTest, TaskInputOverItsBoundIsRefusedAtItsPlace) {
  constexpr int64_t kMaxTaskInputBytes = int64_t{256} << 10;
  auto decode = [](size_t bytes) {
    return DecodeManifests(
        "apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata: {name: t}\n"
        "spec:\n  workerRef: w\n  input: " +
            std::string(bytes, 'x') + "\n",
        "task.yaml");
  };
  EXPECT_TRUE(decode(static_cast<size_t>(kMaxTaskInputBytes)).ok());
  StatusOr<std::vector<Manifest>> over = decode(static_cast<size_t>(kMaxTaskInputBytes) + 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(),
            "task.yaml:6:3: spec.input: is 262145 bytes, more than the limit of 256 KiB");
}

TEST(CodecTest, YamlNeverWritesC1ControlsRaw) {
  Object o = MakeObject(Kind::kSandbox, "s");
  SetupResult step;
  step.name = "tools";
  step.message =
      "boom \xc2\x9b"
      "2J\nsecond line \x7f\n";
  o.sandbox_status().setup.push_back(step);
  const std::string yaml = EncodeObjectYaml(o);
  EXPECT_EQ(yaml.find("\xc2\x9b"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\\x9b"), std::string::npos) << yaml;
}

}  // namespace
}  // namespace sbx::api

namespace sbx::api {
namespace {

// Power OnDemand (DESIGN §7.2): idleStop defaults to 10m, round-trips, and a bad one is refused at
// its place in the file.
TEST(DecodeManifestsTest, OnDemandIdleStopDefaultsRoundTripsAndIsLocated) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: a}\nspec:\n  power: "
      "OnDemand\n",
      "a.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  Object o = (*ms)[0].object;
  EXPECT_EQ(o.sandbox_spec().power, Power::kOnDemand);
  ApplyDefaults(o);
  EXPECT_EQ(o.sandbox_spec().idle_stop, std::chrono::seconds(600));
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
  StatusOr<std::vector<Manifest>> again = DecodeManifests(EncodeObjectYaml(o), "b.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].object.sandbox_spec().idle_stop, std::chrono::seconds(600));
  EXPECT_EQ((*again)[0].object.sandbox_spec().power, Power::kOnDemand);

  ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata: {name: a}\nspec:\n"
      "  sandbox:\n    power: OnDemand\n    idleStop: 0s\n",
      "w.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  o = (*ms)[0].object;
  ApplyDefaults(o);
  EXPECT_EQ(LocateError((*ms)[0], Validate(o)).message(),
            "w.yaml:7:5: spec.sandbox.idleStop: must be between 1s and 24h, not 0s");
  // Running power ignores it (switching power is a one-field patch).
  ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: Sandbox\nmetadata: {name: a}\nspec:\n  idleStop: 1s\n",
      "a.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  o = (*ms)[0].object;
  ApplyDefaults(o);
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
}

// Notifier (DESIGN §8.3): the design's manifest decodes, validates and round-trips through JSON
// (the store) and YAML (sbxctl get -o yaml | apply).
constexpr char kNotifierYaml[] =
    "apiVersion: sbx.dev/v1alpha1\n"
    "kind: Notifier\n"
    "metadata: {name: alerts, namespace: default}\n"
    "spec:\n"
    "  type: webhook\n"
    "  urlFrom: {file: alerts-hook}\n"
    "  signingSecretFrom: {env: SBX_SECRET_DEFAULT_SIGNING}\n"
    "  events: [TaskFailed, TaskTimedOut, WorkerNotReady, GitSourceFailed, BudgetExceeded]\n"
    "  selector: {matchLabels: {team: a}}\n"
    "  suspend: false\n";

TEST(DecodeManifestsTest, NotifierWebhookRoundTrips) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(kNotifierYaml, "n.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  Object o = (*ms)[0].object;
  ApplyDefaults(o);
  EXPECT_TRUE(Validate(o).ok()) << Validate(o);
  const NotifierSpec& s = o.notifier_spec();
  EXPECT_EQ(s.type, NotifierType::kWebhook);
  EXPECT_EQ(s.url_from, (SecretRef{"", "alerts-hook"}));
  EXPECT_EQ(s.signing_secret_from, (SecretRef{"SBX_SECRET_DEFAULT_SIGNING", ""}));
  EXPECT_EQ(s.events, (std::vector<std::string>{"TaskFailed", "TaskTimedOut", "WorkerNotReady",
                                                "GitSourceFailed", "BudgetExceeded"}));
  EXPECT_EQ(s.selector.match_labels, (std::map<std::string, std::string>{{"team", "a"}}));
  EXPECT_FALSE(s.suspend);

  o.notifier_status().delivered = 2;
  o.notifier_status().last_delivered_at = "2026-01-01T00:00:00Z";
  StatusOr<Object> back = DecodeObjectJson(EncodeObjectJson(o));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, o) << EncodeObjectJson(o);
  StatusOr<std::vector<Manifest>> again = DecodeManifests(EncodeObjectYaml(o), "again.yaml");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0].object.notifier_spec(), s);
}

// type has a default (webhook), so it is written always; a value the codec does not know is
// refused at its place.
TEST(DecodeManifestsTest, NotifierTypeDefaultsToWebhookAndIsChecked) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: Notifier\nmetadata: {name: a}\nspec:\n"
      "  urlFrom: {file: hook}\n",
      "n.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ((*ms)[0].object.notifier_spec().type, NotifierType::kWebhook);
  EXPECT_EQ(EncodeSpecJson((*ms)[0].object), R"({"type":"webhook","urlFrom":{"file":"hook"}})");
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Notifier\nmetadata:\n  name: a\nspec:\n  type: teams\n"),
            "workers/a.yaml:6:3: spec.type: unsupported value \"teams\" (expected "
            "webhook|slack)");
  EXPECT_EQ(DecodeError(std::string(kHeader) +
                        "kind: Notifier\nmetadata:\n  name: a\nspec:\n  selector: {team: a}\n"),
            "workers/a.yaml:6:14: spec.selector.team: unknown field \"team\"");
}

// A validation error names the event's index and points at its line.
TEST(DecodeManifestsTest, NotifierEventErrorsAreLocated) {
  StatusOr<std::vector<Manifest>> ms = DecodeManifests(
      "apiVersion: sbx.dev/v1alpha1\nkind: Notifier\nmetadata: {name: a}\nspec:\n"
      "  urlFrom: {file: hook}\n  signingSecretFrom: {file: signing}\n"
      "  events:\n    - TaskFailed\n    - TaskTimedOut\n    - TaskExploded\n",
      "n.yaml");
  ASSERT_TRUE(ms.ok()) << ms.status();
  Object o = (*ms)[0].object;
  ApplyDefaults(o);
  EXPECT_THAT(LocateError((*ms)[0], Validate(o)).message(),
              ::testing::StartsWith("n.yaml:10:7: spec.events[2]: unknown event \"TaskExploded\""));
}

}  // namespace
}  // namespace sbx::api
