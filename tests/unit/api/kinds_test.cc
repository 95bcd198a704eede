// The kind registry (api/kinds.h): one row per kind, and everything that names kinds agrees
// with it, so adding a kind is a row, its types, a schema file and a reconciler.
#include "api/kinds.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "api/codec.h"
#include "api/defaults.h"
#include "api/text.h"
#include "api/validation.h"

namespace sbx::api {
namespace {

namespace fs = std::filesystem;

TEST(KindTableTest, HasOneRowPerKindInOrder) {
  ASSERT_EQ(Kinds().size(), std::size(kAllKinds));
  for (size_t i = 0; i < std::size(kAllKinds); ++i) {
    EXPECT_EQ(Kinds()[i].kind, kAllKinds[i]) << i;
    EXPECT_EQ(&KindInfoOf(kAllKinds[i]), &Kinds()[i]);
  }
}

TEST(KindTableTest, EveryWordNamesOneKindInAnyCase) {
  std::set<std::string> words;
  for (const KindInfo& info : Kinds()) {
    EXPECT_EQ(info.singular, Lower(info.name));
    EXPECT_EQ(info.plural, Lower(info.plural)) << "FindKind compares lower case";
    EXPECT_EQ(info.short_name, Lower(info.short_name)) << "FindKind compares lower case";
    for (std::string_view word : {info.name, info.singular, info.plural, info.short_name}) {
      ASSERT_FALSE(word.empty()) << info.name;
      const std::string upper = [&] {
        std::string u(word);
        for (char& c : u) {
          c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        }
        return u;
      }();
      ASSERT_NE(FindKind(word), nullptr) << word;
      EXPECT_EQ(FindKind(word)->kind, info.kind) << word;
      ASSERT_NE(FindKind(upper), nullptr) << upper;
      EXPECT_EQ(*ParseKind(upper), info.kind) << upper;
      if (word != info.singular) {  // the name and the singular differ only in case
        EXPECT_TRUE(words.insert(Lower(word)).second) << word << " names two kinds";
      }
    }
    EXPECT_EQ(KindName(info.kind), info.name);
  }
  EXPECT_EQ(FindKind("pod"), nullptr);
  EXPECT_EQ(ParseKind("pod").status().message(),
            "unknown kind \"pod\" (expected " + KindWordList() + ")");
}

// Each row's entry points are its kind's: the object made, defaulted and validated through the
// table is the kind it says.
TEST(KindTableTest, EntryPointsMakeDefaultAndValidateTheirKind) {
  for (const KindInfo& info : Kinds()) {
    Object o = MakeObject(info.kind, "x");
    const std::string encoded = EncodeObjectJson(o);
    StatusOr<Object> decoded = DecodeObjectJson(encoded);
    ASSERT_TRUE(decoded.ok()) << info.name << ": " << decoded.status();
    EXPECT_EQ(decoded->kind, info.kind);
    EXPECT_EQ(decoded->spec.index(), o.spec.index()) << info.name;
    EXPECT_EQ(decoded->status.index(), o.status.index()) << info.name;
    ApplyDefaults(o);
    EXPECT_EQ(o.metadata.namespace_, kDefaultNamespace);
    (void)Validate(o);  // reaches the kind's validator without a kind mismatch (which aborts)
  }
}

TEST(KindTableTest, MessagesListEveryKind) {
  EXPECT_EQ(KindNameList(),
            "Workspace, Sandbox, AgentWorker, AgentTask, GitSource, AgentPool, Notifier");
  EXPECT_EQ(KindWordList(),
            "Workspace|ws, Sandbox|sb, AgentWorker|aw, AgentTask|at, GitSource|gs, AgentPool|ap "
            "or Notifier|nt");
  EXPECT_EQ(PluralList(),
            "workspaces, sandboxes, agentworkers, agenttasks, gitsources, agentpools, notifiers");
  StatusOr<std::vector<Manifest>> unknown =
      DecodeManifests("apiVersion: sbx.dev/v1alpha1\nkind: Sandboxx\nmetadata: {name: a}\n", "f");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find(KindNameList()), std::string::npos) << unknown.status();
  EXPECT_NE(unknown.status().message().find("did you mean \"Sandbox\""), std::string::npos)
      << unknown.status();
}

// Every kind names a schema file that exists, and every schema file belongs to a kind.
TEST(KindTableTest, SchemaFilesAndKindsMatch) {
  const fs::path dir = fs::path(SBX_SOURCE_DIR) / "manifests" / "schema";
  std::set<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().ends_with(".schema.json")) {
      files.insert(e.path().filename().string());
    }
  }
  std::set<std::string> named;
  for (const KindInfo& info : Kinds()) {
    named.insert(std::string(info.schema));
  }
  EXPECT_EQ(files, named);
}

}  // namespace
}  // namespace sbx::api
