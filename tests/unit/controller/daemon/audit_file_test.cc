// AuditFile (sbxd --audit-log): the store's audit records as JSON lines, in id order, none
// repeated or skipped across rounds, restarts, a line torn by a crash, or a rotation; the file
// private to its owner. Real SQLite file and real files.
#include "controller/daemon/audit_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "controller/store/sqlite_store.h"

namespace sbx::controller::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class AuditFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("sbx-audit-file-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "audit.jsonl").string();
    auto store = SqliteStore::Open((dir_ / "sbx.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // One record, as the API server appends for an exec.
  void Append(const std::string& name) {
    Store::AuditRecord r;
    r.actor = "alice";
    r.role = "admin";
    r.verb = "exec";
    r.object = {api::Kind::kSandbox, "default", name};
    r.result = "ok";
    r.source = "api";
    ASSERT_TRUE(store_->AppendAudit(r).ok());
  }
  // The file's lines as "id name".
  static std::vector<std::string> Lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) {
      const nlohmann::json j = nlohmann::json::parse(line);
      out.push_back(std::to_string(j["id"].get<int64_t>()) + " " +
                    j["object"]["name"].get<std::string>());
    }
    return out;
  }
  std::unique_ptr<AuditFile> MustOpen() {
    auto file = AuditFile::Open(*store_, path_);
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? *std::move(file) : nullptr;
  }

  fs::path dir_;
  std::string path_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(AuditFileTest, EachRoundAppendsTheNewRecordsAndARestartContinuesAfterTheLastLine) {
  Append("a");
  Append("b");
  std::unique_ptr<AuditFile> file = MustOpen();
  ASSERT_EQ(*file->CopyNew(), 2);
  EXPECT_EQ(*file->CopyNew(), 0);
  Append("c");
  ASSERT_EQ(*file->CopyNew(), 1);
  EXPECT_THAT(Lines(path_), ElementsAre("1 a", "2 b", "3 c"));
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // sbxd restarts: nothing repeated, nothing skipped.
  Append("d");
  file = MustOpen();
  EXPECT_EQ(file->last_id(), 3);
  ASSERT_EQ(*file->CopyNew(), 1);
  EXPECT_THAT(Lines(path_), ElementsAre("1 a", "2 b", "3 c", "4 d"));
  // Batches: at most `batch` a round.
  Append("e");
  Append("f");
  EXPECT_EQ(*file->CopyNew(1), 1);
  EXPECT_EQ(*file->CopyNew(1), 1);
  EXPECT_THAT(Lines(path_), ElementsAre("1 a", "2 b", "3 c", "4 d", "5 e", "6 f"));
}

TEST_F(AuditFileTest, ALineTornByACrashIsWrittenAgainWhole) {
  Append("a");
  Append("b");
  ASSERT_EQ(*MustOpen()->CopyNew(1), 1);
  {
    std::ofstream torn(path_, std::ios::app);
    torn << R"({"id":2,"time":"2026-)";  // sbxd was killed in the middle of the line
  }
  std::unique_ptr<AuditFile> file = MustOpen();
  EXPECT_EQ(file->last_id(), 1);
  ASSERT_EQ(*file->CopyNew(), 1);
  EXPECT_THAT(Lines(path_), ElementsAre("1 a", "2 b"));
}

TEST_F(AuditFileTest, ARotatedFileStartsAgainWithOnlyTheNewRecords) {
  Append("a");
  std::unique_ptr<AuditFile> file = MustOpen();
  ASSERT_EQ(*file->CopyNew(), 1);
  fs::rename(path_, path_ + ".1");  // logrotate
  Append("b");
  ASSERT_EQ(*file->CopyNew(), 1);
  EXPECT_THAT(Lines(path_ + ".1"), ElementsAre("1 a"));
  EXPECT_THAT(Lines(path_), ElementsAre("2 b"));
}

TEST_F(AuditFileTest, AFileOfAnotherProgramIsRefused) {
  {
    std::ofstream other(path_);
    other << "GET / HTTP/1.1 200\n";
  }
  auto file = AuditFile::Open(*store_, path_);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), api::StatusCode::kFailedPrecondition);
  EXPECT_THAT(file.status().message(), HasSubstr("not an audit record"));
}

}  // namespace
}  // namespace sbx::controller::daemon
