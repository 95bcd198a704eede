// `sbxctl migrate` (issue #17) run as the BUILT binary: a store made by `sbxctl apply` plus what
// sbxd would have written (status, inventory, events, a task log, an artifact) is copied into a
// new SQLite file and into PostgreSQL (the ctest fixture's throwaway server, a password in the
// URL), and `sbxctl get -o json` on the copy shows the same objects, uids and resourceVersions
// included. The refusals (non-empty destination, a live sbxd lease, a missing source) exit 1 with
// one line and write nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "controller/store/open_store.h"
#include "controller/store/postgres_store.h"
#include "controller/store/sqlite_store.h"
#include "tests/e2e/sbxctl_fixture.h"
#include "tests/support/postgres_server.h"

namespace {

namespace fs = std::filesystem;
using sbx::api::Kind;
using sbx_e2e::CountLines;
using sbx_e2e::Result;
using sbx_e2e::SandboxManifest;
using sbx_e2e::WorkerManifest;
using sbx_e2e::WriteFile;
using ::testing::HasSubstr;
using ::testing::Not;

class SbxctlMigrateTest : public sbx_e2e::SbxctlTest {
 protected:
  // Two sandboxes and a worker through the CLI; a status, an inventory record, an event, a task
  // log and an artifact as sbxd would write them.
  void Populate() {
    WriteFile(dir_ / "m.yaml", SandboxManifest("sb-a", "Sandbox A") + "---\n" +
                                   SandboxManifest("sb-b", "Sandbox B") + "---\n" +
                                   WorkerManifest("w1", "sb-a"));
    const Result applied = Run({"apply", "-f", (dir_ / "m.yaml").string()});
    ASSERT_EQ(applied.exit_code, 0) << applied.err;
    SetCondition("sb-a", "Ready", sbx::api::ConditionStatus::kTrue, "Running");
    auto store = OpenStore();
    auto a = store->Get({Kind::kSandbox, "default", "sb-a"});
    ASSERT_TRUE(a.ok()) << a.status();
    sbx::controller::Store::InventoryRecord record;
    record.workspace = "ws";
    record.resource_type = "sandbox";
    record.external_id = "sbx-123";
    record.state = sbx::controller::Store::InventoryState::kLive;
    record.owner = {Kind::kSandbox, "default", "sb-a"};
    record.owner_uid = a->metadata.uid;
    ASSERT_TRUE(store->PutInventory(record).ok());
    sbx::controller::Store::Event event;
    event.involved = record.owner;
    event.reason = "Created";
    event.message = "sandbox sbx-123 created";
    ASSERT_TRUE(store->RecordEvent(event).ok());
    // A log and an artifact under the uid of sandbox/sb-a (the store keys them by uid only).
    sbx::controller::Store::TaskLogEntry line;
    line.text = "submitted";
    ASSERT_TRUE(store->AppendTaskLog(record.owner, a->metadata.uid, {line, line}).ok());
    ASSERT_TRUE(store->PutArtifact(record.owner, a->metadata.uid, {"out.txt", 2, "h", "hi"}).ok());
  }

  // `sbxctl get -o json` of every object, on the database `db`, and the records beside the
  // objects as the store reads them back (events through `sbxctl events` would show ages).
  std::string SnapshotOf(const std::string& db) {
    const fs::path saved = db_;
    db_ = db;
    std::string out = Snapshot();
    db_ = saved;
    auto store = sbx::controller::OpenStore(db);
    EXPECT_TRUE(store.ok()) << store.status();
    if (!store.ok()) {
      return out;
    }
    // Each list in a variable: a range-for over `*temporary` would outlive the StatusOr.
    const auto inventory = (*store)->ListInventory(std::nullopt);
    const auto events = (*store)->ListEvents(std::nullopt);
    const auto objects = (*store)->List({});
    if (!inventory.ok() || !events.ok() || !objects.ok()) {
      ADD_FAILURE() << "cannot read " << db;
      return out;
    }
    for (const auto& r : *inventory) {
      out += "inventory " + r.external_id + " " + r.owner_uid + " " + r.created_at + "\n";
    }
    for (const auto& e : *events) {
      out += "event " + e.reason + " " + e.message + " " + e.first_seen + "\n";
    }
    for (const auto& o : *objects) {
      const auto log = (*store)->ReadTaskLog(o.metadata.uid);
      const auto artifacts = (*store)->ListArtifacts(o.metadata.uid);
      if (!log.ok() || !artifacts.ok()) {
        ADD_FAILURE() << "cannot read the task log or artifacts of " << o.metadata.uid;
        return out;
      }
      for (const auto& line : log->entries) {
        out += "log " + o.metadata.uid + " " + std::to_string(line.seq) + " " + line.text + "\n";
      }
      for (const auto& a : *artifacts) {
        const auto content = (*store)->GetArtifact(o.metadata.uid, a.path);
        EXPECT_TRUE(content.ok()) << content.status();
        out += "artifact " + o.metadata.uid + " " + a.path + " " +
               (content.ok() ? content->content : "") + "\n";
      }
    }
    return out;
  }
};

TEST_F(SbxctlMigrateTest, CopiesASqliteStoreIntoANewFileWithItsUids) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  const fs::path target = dir_ / "moved" / "sbx.db";
  const Result r =
      Run({"migrate", "--from", "sqlite:" + db_.string(), "--to", "sqlite:" + target.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "copied 3 objects, 1 inventory record, 1 event, 1 task log (2 lines), 1 "
            "artifact, 3 audit records from " +
                db_.string() + " to " + target.string() + "\n");
  const std::string before = SnapshotOf(db_.string());
  EXPECT_THAT(before, HasSubstr("\"uid\""));
  EXPECT_THAT(before, HasSubstr("artifact "));
  EXPECT_EQ(SnapshotOf(target.string()), before);

  // The second time the destination is not empty: one line, exit 1, nothing written.
  const auto size = fs::file_size(target);
  const Result again =
      Run({"migrate", "--from", "sqlite:" + db_.string(), "--to", target.string()});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(CountLines(again.err), 1) << again.err;
  EXPECT_THAT(again.err, HasSubstr("is not empty (it holds 3 objects, 1 inventory record, 1 "
                                   "event, 1 task log (2 lines), 1 artifact, 3 audit records)"));
  EXPECT_EQ(SnapshotOf(target.string()), before);
  EXPECT_EQ(fs::file_size(target), size);
}

TEST_F(SbxctlMigrateTest, CopiesIntoPostgresWithoutShowingThePassword) {
  std::string error;
  sbx::testing::PostgresServer* server = sbx::testing::SharedPostgresServer(&error);
  ASSERT_NE(server, nullptr) << error;
  auto url = server->NewDatabaseUrl();  // postgres://postgres@127.0.0.1:PORT/DB
  ASSERT_TRUE(url.ok()) << url.status();
  // The test server trusts loopback, so libpq never needs the password: it must still not show.
  const std::string with_password =
      "postgres://postgres:s3cret-pw@" + url->substr(url->find('@') + 1);
  const std::string shown = "postgres://postgres:***@" + url->substr(url->find('@') + 1);
  ASSERT_NO_FATAL_FAILURE(Populate());

  const Result dry = Run({"migrate", "--from", db_.string(), "--to", with_password, "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(dry.out,
            "would copy 3 objects, 1 inventory record, 1 event, 1 task log (2 lines), 1 "
            "artifact, 3 audit records from " +
                db_.string() + " to " + shown + "\n");
  {
    auto pg = sbx::controller::PostgresStore::Open(*url);
    ASSERT_TRUE(pg.ok()) << pg.status();
    EXPECT_TRUE((*pg)->List({})->empty());
  }

  const Result r = Run({"migrate", "--from", "sqlite:" + db_.string(), "--to", with_password});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("copied 3 objects"));
  EXPECT_THAT(r.out, HasSubstr(shown));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("s3cret-pw")));
  EXPECT_EQ(SnapshotOf(*url), SnapshotOf(db_.string()));

  const Result again = Run({"migrate", "--from", db_.string(), "--to", with_password});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr("database " + shown + " is not empty"));
  EXPECT_THAT(again.err, Not(HasSubstr("s3cret-pw")));

  // And back: PostgreSQL → SQLite gives the same store again.
  const fs::path back = dir_ / "back.db";
  const Result home = Run({"migrate", "--from", *url, "--to", back.string()});
  ASSERT_EQ(home.exit_code, 0) << home.err;
  EXPECT_EQ(SnapshotOf(back.string()), SnapshotOf(db_.string()));
}

TEST_F(SbxctlMigrateTest, RefusesWhileAnSbxdHoldsTheSourceAndCreatesNothing) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  {
    auto store = OpenStore();
    ASSERT_TRUE(*store->TryAcquireLease("sbxd", "node-1/pid-42", std::chrono::minutes(5)));
  }
  const fs::path target = dir_ / "new.db";
  const Result r = Run({"migrate", "--from", db_.string(), "--to", target.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("node-1/pid-42 holds its \"sbxd\" lease"));
  EXPECT_FALSE(fs::exists(target));

  const Result forced =
      Run({"migrate", "--from", db_.string(), "--to", target.string(), "--ignore-lease"});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(SnapshotOf(target.string()), SnapshotOf(db_.string()));
}

// #24: a source that is not already an sbx store is refused and left as it was: an empty file
// (which opening would have made an sbx database) and another program's SQLite file.
TEST_F(SbxctlMigrateTest, RefusesASourceThatIsNotAnSbxStoreAndLeavesItUntouched) {
  const fs::path empty = dir_ / "empty.db";
  { std::ofstream touch(empty); }
  const fs::path foreign = dir_ / "foreign.db";
  ASSERT_EQ(std::system(("sqlite3 " + foreign.string() + " 'PRAGMA application_id = 42;'").c_str()),
            0);
  const auto bytes = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (const fs::path& source : {empty, foreign}) {
    const std::string before = bytes(source);
    const fs::path target = dir_ / "out.db";
    const Result r = Run({"migrate", "--from", source.string(), "--to", target.string()});
    EXPECT_EQ(r.exit_code, 1) << source;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("is not an sbx database")) << r.err;
    EXPECT_EQ(bytes(source), before) << source << " was changed";
    EXPECT_FALSE(fs::exists(target));
  }
}

// #24: names reach file paths (the git cache) in the destination's sbxd, and a store is not
// trusted to hold only validated ones: a source with a name that is not a DNS label is refused
// whole, before the destination exists, naming the record.
TEST_F(SbxctlMigrateTest, RefusesASourceWithANameThatIsNotADnsLabelAndCreatesNothing) {
  ASSERT_NO_FATAL_FAILURE(Populate());
  ASSERT_EQ(std::system(("sqlite3 " + db_.string() +
                         " \"UPDATE objects SET namespace = '../../etc' WHERE name = 'sb-b'\"")
                            .c_str()),
            0);
  const fs::path target = dir_ / "new.db";
  const Result r = Run({"migrate", "--from", db_.string(), "--to", target.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("namespace \"../../etc\"")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("nothing was copied")) << r.err;
  EXPECT_FALSE(fs::exists(target));
  const Result dry = Run({"migrate", "--from", db_.string(), "--to", target.string(), "--dry-run"});
  EXPECT_EQ(dry.exit_code, 1);
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(SbxctlMigrateTest, RefusesAMissingSourceOrTheSameStoreTwice) {
  const Result missing =
      Run({"migrate", "--from", (dir_ / "typo.db").string(), "--to", (dir_ / "x.db").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("typo.db does not exist"));
  EXPECT_FALSE(fs::exists(dir_ / "typo.db"));
  EXPECT_FALSE(fs::exists(dir_ / "x.db"));

  ASSERT_NO_FATAL_FAILURE(Populate());
  const Result same = Run({"migrate", "--from", db_.string(), "--to", "sqlite:" + db_.string()});
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_THAT(same.err, HasSubstr("the same store"));
}

}  // namespace
