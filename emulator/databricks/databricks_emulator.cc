#include "emulator/databricks/databricks_emulator.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <thread>
#include <utility>

#include "emulator/databricks/internal/admin_api.h"
#include "emulator/databricks/internal/auth.h"
#include "emulator/databricks/internal/exec_api.h"
#include "emulator/databricks/internal/router.h"
#include "emulator/databricks/internal/sandbox_api.h"
#include "emulator/databricks/internal/state.h"
#include "emulator/internal/fault_injector.h"
#include "emulator/internal/http_server.h"
#include "emulator/internal/process_runner.h"
#include "emulator/internal/socket_owner.h"

namespace sbx::emulator {
namespace {

namespace fs = std::filesystem;

}  // namespace

// Wires the parts of emulator/databricks/internal/ together: the State they share, the Auth,
// SandboxApi, ExecApi and AdminApi handlers, the Router the HTTP server calls, and the timer
// thread that runs the lifecycle transitions on time. Members are declared in dependency
// order, so each part is built after, and destroyed before, what it borrows.
class DatabricksEmulator::Impl {
 public:
  explicit Impl(Options options)
      : state_(std::move(options)),
        owned_faults_(state_.options.faults == nullptr ? std::make_unique<internal::FaultInjector>()
                                                       : nullptr),
        faults_(owned_faults_ != nullptr ? owned_faults_.get() : state_.options.faults),
        auth_(state_),
        sandboxes_(state_),
        exec_(state_),
        admin_(state_, *faults_),
        router_(state_, auth_, sandboxes_, exec_, admin_, *faults_),
        server_([this](internal::HttpExchange& ex) { router_.Handle(ex); }) {}

  ~Impl() { Stop(); }

  api::StatusOr<int> Start(const std::string& host, int port) {
    if (state_.options.root_dir.empty()) {
      return api::InvalidArgumentError("root_dir is required");
    }
    std::error_code ec;
    state_.root = fs::absolute(state_.options.root_dir, ec);
    state_.bin_dir = state_.options.bin_dir.empty() ? state_.root / "bin"
                                                    : fs::absolute(state_.options.bin_dir, ec);
    fs::create_directories(state_.root / "sandboxes", ec);
    if (ec) {
      return api::InvalidArgumentError("cannot create root dir " + state_.root.string() + ": " +
                                       ec.message());
    }
    fs::create_directories(state_.bin_dir, ec);
    state_.isolation = internal::Isolation::kPathRewrite;
    if (state_.options.prefer_mount_namespace &&
        internal::ProbeIsolation() == internal::Isolation::kMountNamespace) {
      std::error_code e1, e2;
      fs::create_directories(std::string(internal::databricks::kSandboxHome), e1);
      fs::create_directories(std::string(internal::databricks::kNamespaceBinDir), e2);
      if (!e1 && !e2) {
        state_.isolation = internal::Isolation::kMountNamespace;
      }
    }
    spdlog::info("databricks emulator {}: root {}, commands see /home/sandbox-agent via {}",
                 state_.instance_id, state_.root.string(),
                 internal::IsolationName(state_.isolation));
    if (state_.options.requests_per_second > 0) {
      faults_->SetRateLimit(state_.options.requests_per_second, 0);
    }
    auto bound = server_.Start(host, port);
    if (!bound.ok()) {
      return bound.status();
    }
    state_.host = host;
    state_.port = *bound;
    timer_ = std::jthread([this](std::stop_token st) { state_.TimerLoop(st); });
    return state_.port;
  }

  void Stop() {
    {
      std::lock_guard lock(state_.mu);
      if (state_.stopped) {
        return;
      }
      state_.stopped = true;
      // In-flight exec-sync handlers return once their processes die, so the server can join.
      for (auto& [id, sb] : state_.sandboxes) {
        for (pid_t pg : sb.exec_pgids) {
          ::kill(-pg, SIGKILL);
        }
      }
    }
    internal::KillProcessesWithEnv(std::string(internal::databricks::kMarkerName) + "=" +
                                   state_.instance_id + "/");
    server_.Stop();
    if (timer_.joinable()) {
      timer_.request_stop();
      state_.cv.notify_all();
      timer_.join();
    }
    internal::KillProcessesWithEnv(std::string(internal::databricks::kMarkerName) + "=" +
                                   state_.instance_id + "/");
  }

  std::string base_url() const { return state_.base_url(); }
  const std::string& instance_id() const { return state_.instance_id; }
  std::string isolation() const { return std::string(internal::IsolationName(state_.isolation)); }
  internal::FaultInjector& faults() { return *faults_; }

  std::string EgressAddressOf(const std::string& peer_address, int peer_port, int local_port) {
    const std::string ours = state_.instance_id + "/";
    for (pid_t pid : internal::TcpClientProcesses(peer_address, peer_port, local_port)) {
      std::optional<std::string> marker =
          internal::ProcessEnvValue(pid, internal::databricks::kMarkerName);
      if (!marker || !marker->starts_with(ours)) {
        continue;
      }
      std::lock_guard lock(state_.mu);
      internal::databricks::SandboxRec* sb = state_.FindLocked(marker->substr(ours.size()));
      if (sb != nullptr && !sb->egress_ip.empty()) {
        return sb->egress_ip;
      }
    }
    return peer_address;
  }

 private:
  internal::databricks::State state_;
  std::unique_ptr<internal::FaultInjector> owned_faults_;  // when Options::faults is null
  internal::FaultInjector* faults_;
  internal::databricks::Auth auth_;
  internal::databricks::SandboxApi sandboxes_;
  internal::databricks::ExecApi exec_;
  internal::databricks::AdminApi admin_;
  internal::databricks::Router router_;
  internal::HttpServer server_;
  std::jthread timer_;
};

DatabricksEmulator::DatabricksEmulator(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
DatabricksEmulator::~DatabricksEmulator() = default;
api::StatusOr<int> DatabricksEmulator::Start(const std::string& host, int port) {
  return impl_->Start(host, port);
}
void DatabricksEmulator::Stop() { impl_->Stop(); }
std::string DatabricksEmulator::base_url() const { return impl_->base_url(); }
const std::string& DatabricksEmulator::instance_id() const { return impl_->instance_id(); }
std::string DatabricksEmulator::isolation_mechanism() const { return impl_->isolation(); }
internal::FaultInjector& DatabricksEmulator::faults() { return impl_->faults(); }
std::string DatabricksEmulator::EgressAddressOf(const std::string& peer_address, int peer_port,
                                                int local_port) const {
  return impl_->EgressAddressOf(peer_address, peer_port, local_port);
}

}  // namespace sbx::emulator
