#include "tests/support/sbxd_harness.h"

#include <signal.h>

#include <algorithm>
#include <iostream>
#include <random>
#include <regex>

namespace sbx::testing {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

double MetricSample(const std::string& text, const std::string& family,
                    const std::vector<std::string>& labels) {
  size_t at = 0;
  while ((at = text.find("\n" + family + "{", at)) != std::string::npos) {
    const size_t end = text.find('\n', at + 1);
    const std::string line = text.substr(at + 1, end - at - 1);
    at = end;
    if (std::all_of(labels.begin(), labels.end(),
                    [&](const std::string& l) { return line.find(l) != std::string::npos; })) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

std::pair<std::string, std::string> ConditionOf(const nlohmann::json& object,
                                                const std::string& type) {
  if (!object.is_object() || !object.contains("status") ||
      !object["status"].contains("conditions")) {
    return {"", ""};
  }
  for (const nlohmann::json& c : object["status"]["conditions"]) {
    if (c.value("type", "") == type) {
      return {c.value("status", ""), c.value("reason", "")};
    }
  }
  return {"", ""};
}

SbxdHarness::SbxdHarness(Options options) : options_(std::move(options)) {
  std::random_device rd;
  dir_ = fs::temp_directory_path() / (options_.dir_prefix + std::to_string(rd()));
  fs::create_directories(dir_ / "logs");
  db_ = options_.db.empty() ? dir_ / "state" / "sbx.db" : fs::path(options_.db);
}

SbxdHarness::~SbxdHarness() { Finish(/*keep_dir=*/false); }

void SbxdHarness::Finish(bool keep_dir) {
  if (finished_) {
    return;
  }
  finished_ = true;
  daemons_.clear();  // SIGKILLs whatever still runs
  if (emulator_) {
    emulator_->Signal(SIGTERM);  // lets it kill the sandboxes' processes
    if (!emulator_->Wait(In(milliseconds(5000)))) {
      emulator_->Kill();
    }
    emulator_.reset();
  }
  if (keep_dir) {
    std::cerr << "test directory kept for inspection: " << dir_ << "\n";
  } else {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

api::Status SbxdHarness::StartEmulator(std::vector<std::string> extra_args, milliseconds timeout) {
  std::vector<std::string> args = {
      "--databricks-port", "0",     "--root",  (dir_ / "emu").string(), "--pending-delay", "200ms",
      "--stopping-delay",  "200ms", "--token", options_.token};
  const bool openai = !options_.app_key.empty();
  if (openai) {
    args.insert(args.end(), {"--openai-port", "0", "--openai-api-key", options_.app_key,
                             "--openai-executor-key", options_.executor_key});
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  ASSIGN_OR_RETURN(emulator_,
                   Process::Start(options_.binaries.emulator, ChildOptions("emulator", args)));
  auto d = emulator_->WaitForLine(std::regex(R"(^databricks: (http://\S+))"), In(timeout));
  if (!d) {
    return api::UnavailableError("emulator did not start: " + emulator_->Stderr());
  }
  std::optional<std::vector<std::string>> o;
  if (openai) {
    o = emulator_->WaitForLine(std::regex(R"(^openai: (http://\S+))"), In(timeout));
    if (!o) {
      return api::UnavailableError("no OpenAI half: " + emulator_->Stderr());
    }
  }
  databricks_url_ = (*d)[1];
  databricks_ = std::make_unique<HttpTestClient>(databricks_url_);
  databricks_->SetHeader("Authorization", "Bearer " + options_.token);
  if (openai) {
    openai_url_ = (*o)[1];
    std::string root = openai_url_;
    if (root.size() > 3 && root.compare(root.size() - 3, 3, "/v1") == 0) {
      root.resize(root.size() - 3);
    }
    openai_ = std::make_unique<HttpTestClient>(root);
    openai_->SetHeader("Authorization", "Bearer " + options_.app_key);
    openai_->SetHeader("OpenAI-Beta", "agents=v1");
  }
  return api::OkStatus();
}

api::StatusOr<Process*> SbxdHarness::StartSbxd(const std::string& log_name,
                                               std::vector<std::string> extra_args) {
  std::vector<std::string> args = {
      "--db",           db_.string(),  "--resync",         "30s", "--sweep-interval", "1s",
      "--metrics-addr", "127.0.0.1:0", "--lease-duration", "3s"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  ASSIGN_OR_RETURN(std::unique_ptr<Process> p,
                   Process::Start(options_.binaries.sbxd, ChildOptions(log_name, args)));
  daemons_.push_back(std::move(p));
  return daemons_.back().get();
}

std::string SbxdHarness::InlineWorkerYaml(const std::string& name,
                                          const std::string& workspace_directory) {
  return "apiVersion: sbx.dev/v1alpha1\nkind: AgentWorker\nmetadata:\n  name: " + name +
         "\nspec:\n  sandbox:\n    inactivityTimeout: 1h\n    setup:\n"
         "      - name: workspace\n        run: " +
         nlohmann::json("mkdir -p " + workspace_directory).dump() +
         "\n  agent:\n    model: gpt-5-codex\n  workspaceDirectory: " + workspace_directory + "\n";
}

int SbxdHarness::MetricsPort(Process& sbxd, milliseconds timeout) {
  auto m = sbxd.WaitForLine(std::regex(R"(serving health and metrics.*port=(\d+))"), In(timeout),
                            /*from_stderr=*/true);
  return m ? std::stoi((*m)[1]) : 0;
}

std::map<std::string, std::string> SbxdHarness::Env() const {
  std::map<std::string, std::string> env = {{"HOME", dir_.string()}};
  if (!databricks_url_.empty()) {
    env["DATABRICKS_HOST"] = databricks_url_;
    env["DATABRICKS_TOKEN"] = options_.token;
  }
  if (!openai_url_.empty()) {
    env["OPENAI_BASE_URL"] = openai_url_;
    env["OPENAI_API_KEY"] = options_.app_key;
    env["OPENAI_EXECUTOR_API_KEY"] = options_.executor_key;
  }
  for (const auto& [name, value] : extra_env_) {
    env[name] = value;
  }
  return env;
}

ProcessOptions SbxdHarness::ChildOptions(const std::string& log_name,
                                         std::vector<std::string> args) const {
  ProcessOptions o;
  o.args = std::move(args);
  o.env = Env();
  o.unset_env = {"DATABRICKS_CONFIG_PROFILE", "DATABRICKS_CONFIG_FILE", "DATABRICKS_CLIENT_ID",
                 "DATABRICKS_CLIENT_SECRET", "SBX_DB"};
  o.stdout_path = dir_ / "logs" / (log_name + ".out");
  o.stderr_path = dir_ / "logs" / (log_name + ".err");
  return o;
}

RunResult SbxdHarness::Sbxctl(std::vector<std::string> args, milliseconds timeout) const {
  args.insert(args.begin(), {"--db", db_.string()});
  return RunProcess(options_.binaries.sbxctl, args, dir_ / "logs", Env(), timeout);
}

RunResult SbxdHarness::Apply(const std::string& name, const std::string& yaml) const {
  const fs::path file = dir_ / "manifests" / (name + ".yaml");
  WriteFile(file, yaml);
  return Sbxctl({"apply", "-f", file.string()});
}

nlohmann::json SbxdHarness::Get(const std::string& kind, const std::string& name) const {
  RunResult r = Sbxctl({"get", kind, name, "-o", "json"});
  if (r.exit_code != 0) {
    return nullptr;
  }
  return nlohmann::json::parse(r.out, nullptr, false);
}

}  // namespace sbx::testing
