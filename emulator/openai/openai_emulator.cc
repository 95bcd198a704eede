#include "emulator/openai/openai_emulator.h"

#include <memory>
#include <mutex>
#include <utility>

#include "emulator/internal/fault_injector.h"
#include "emulator/internal/http_server.h"
#include "emulator/openai/internal/admin_api.h"
#include "emulator/openai/internal/agents_api.h"
#include "emulator/openai/internal/executor_registry.h"
#include "emulator/openai/internal/router.h"
#include "emulator/openai/internal/state.h"
#include "emulator/openai/internal/turn_runner.h"
#include "emulator/openai/internal/webhook_sender.h"

namespace sbx::emulator {

// Wires the parts of emulator/openai/internal/ together: the State they share, the
// ExecutorRegistry (WebSocket server), the TurnRunner, the AgentsApi and AdminApi handlers and
// the Router the HTTP server calls. Members are declared in dependency order, so each part is
// built after, and destroyed before, what it borrows.
class OpenAiEmulator::Impl {
 public:
  explicit Impl(Options options)
      : state_(std::move(options)),
        owned_faults_(state_.options.faults == nullptr ? std::make_unique<internal::FaultInjector>()
                                                       : nullptr),
        faults_(owned_faults_ != nullptr ? owned_faults_.get() : state_.options.faults),
        webhooks_(WebhookConfig(state_.options)),
        registry_(state_, *faults_),
        runner_(state_, registry_),
        agents_(state_, runner_),
        admin_(state_, registry_, *faults_),
        router_(state_, agents_, registry_, admin_, *faults_),
        http_([this](internal::HttpExchange& ex) { router_.Handle(ex); }) {
    if (state_.options.requests_per_second > 0) {
      faults_->SetRateLimit(state_.options.requests_per_second, 0, internal::RateLimit::kOpenAi);
    }
  }

  ~Impl() { Stop(); }

  static internal::openai::WebhookSender::Config WebhookConfig(const Options& o) {
    internal::openai::WebhookSender::Config c;
    c.url = o.webhook_url;
    c.secret = o.webhook_secret;
    c.max_attempts = o.webhook_max_attempts;
    c.retry_base = o.webhook_retry_base;
    c.retry_cap = o.webhook_retry_cap;
    return c;
  }

  api::StatusOr<int> Start(const std::string& host, int port) {
    if (started_) {
      return api::Status(api::StatusCode::kFailedPrecondition, "already started");
    }
    if (api::Status s = internal::openai::WebhookSender::Validate(WebhookConfig(state_.options));
        !s.ok()) {
      return s;
    }
    ASSIGN_OR_RETURN(internal::openai::IpAllowlist allowlist,
                     internal::openai::IpAllowlist::Parse(state_.options.ip_allowlist_enabled,
                                                          state_.options.ip_allowlist));
    {
      std::lock_guard lock(state_.mu);
      state_.ip_allowlist = std::move(allowlist);
    }
    auto ws_port = registry_.Start(host);
    if (!ws_port.ok()) {
      return ws_port.status();
    }
    auto bound = http_.Start(host, port);
    if (!bound.ok()) {
      registry_.Stop();
      return bound.status();
    }
    state_.host = host;
    state_.port = *bound;
    state_.ws_port = *ws_port;
    started_ = true;
    state_.webhooks = &webhooks_;  // before any session exists: read without the lock after
    webhooks_.Start();
    registry_.StartTimer();
    return state_.port;
  }

  void Stop() {
    if (!started_ || stopped_) {
      return;
    }
    state_.BeginStop();
    registry_.Stop();
    runner_.Stop();
    http_.Stop();
    webhooks_.Stop();
    stopped_ = true;
  }

  std::string server_url() const { return state_.server_url(); }
  std::string base_url() const { return state_.base_url(); }
  int websocket_port() const { return state_.ws_port; }
  internal::FaultInjector& faults() { return *faults_; }
  internal::openai::State& state() { return state_; }
  internal::openai::ExecutorRegistry& registry() { return registry_; }
  internal::openai::WebhookSender& webhooks() { return webhooks_; }

 private:
  internal::openai::State state_;
  std::unique_ptr<internal::FaultInjector> owned_faults_;  // when Options::faults is null
  internal::FaultInjector* faults_;
  internal::openai::WebhookSender webhooks_;
  internal::openai::ExecutorRegistry registry_;
  internal::openai::TurnRunner runner_;
  internal::openai::AgentsApi agents_;
  internal::openai::AdminApi admin_;
  internal::openai::Router router_;
  internal::HttpServer http_;
  bool started_ = false;
  bool stopped_ = false;
};

OpenAiEmulator::OpenAiEmulator(Options options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
OpenAiEmulator::~OpenAiEmulator() = default;
api::StatusOr<int> OpenAiEmulator::Start(const std::string& host, int port) {
  return impl_->Start(host, port);
}
void OpenAiEmulator::Stop() { impl_->Stop(); }
std::string OpenAiEmulator::base_url() const { return impl_->base_url(); }
std::string OpenAiEmulator::server_url() const { return impl_->server_url(); }
int OpenAiEmulator::websocket_port() const { return impl_->websocket_port(); }
internal::FaultInjector& OpenAiEmulator::faults() { return impl_->faults(); }
void OpenAiEmulator::SetRegistrationFailure(RegistrationFailure failure) {
  impl_->registry().SetRegistrationFailure(failure);
}
std::map<std::string, OpenAiEmulator::RegistrationCount> OpenAiEmulator::Registrations() const {
  return impl_->registry().Registrations();
}
bool OpenAiEmulator::DropExecutor(const std::string& environment_id) {
  return impl_->registry().DropExecutor(environment_id);
}
bool OpenAiEmulator::ExpireSession(const std::string& session_id) {
  return impl_->state().ExpireSession(session_id);
}
std::string OpenAiEmulator::WebhookStats() const { return impl_->webhooks().Stats().dump(); }

}  // namespace sbx::emulator
