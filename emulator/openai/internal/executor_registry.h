// ExecutorRegistry: the executor side of the OpenAI emulator. It answers
// POST {remote_url}/cloud/environment/{id}/register (reference/codex-exec-server.md §3) and
// POST {remote_url}/cloud/environment/{id}/direct/register (§5, direct_transport.h), each only
// under the environment's own session remote_url, serves the WebSocket the registration points
// at (ws://host:W/rendezvous/{environment}/{registration}), speaks plain exec-server JSON-RPC
// on sockets of the stand-in profile and of the direct transport as the JSON-RPC client
// (initialize, then process/* notifications into the State's ProcessWatch records), and keeps
// every environment's connected/disconnected status announced on its session's stream.
//
// Thread-safety: thread-safe; the WebSocket handlers and the timer thread take State::mu.
// Start() once, Stop() once, from the owner. Owns the WebSocket server and the timer thread;
// borrows the State and the FaultInjector, which must outlive it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "api/status.h"
#include "emulator/internal/fault_injector.h"
#include "emulator/internal/http_server.h"
#include "emulator/openai/internal/state.h"
#include "emulator/openai/websocket_server.h"

namespace sbx::emulator::internal::openai {

class ExecutorRegistry {
 public:
  ExecutorRegistry(State& state, FaultInjector& faults);
  ~ExecutorRegistry();  // Stop()
  ExecutorRegistry(const ExecutorRegistry&) = delete;
  ExecutorRegistry& operator=(const ExecutorRegistry&) = delete;

  // Binds the WebSocket port on `host` (a free port). Returns it; kUnavailable if it cannot.
  api::StatusOr<int> Start(const std::string& host);
  // Starts the timer that announces `disconnected` once State::ws_port etc. are set.
  void StartTimer();
  // Closes every socket (their close handlers run) and joins the timer. Idempotent; call
  // State::BeginStop() first.
  void Stop();

  // POST {remote_url}/cloud/environment/{env_id}/register, with the endpoint's faults and
  // latency; `connect_token` is remote_url's last segment (rt_…). A token that is not the
  // environment's gets 404 (unknown_url, or environment_not_found under another session's URL).
  HttpResponse HandleRegister(const std::string& connect_token, const std::string& env_id,
                              const HttpRequest& req);
  // POST {remote_url}/cloud/environment/{env_id}/direct/register: the same checks, SigV4
  // instead of the Bearer key (endpoint "openai.executor.register" for faults and counters).
  HttpResponse HandleDirectRegister(const std::string& connect_token, const std::string& env_id,
                                    const HttpRequest& req);
  // Sends one JSON-RPC message on connection `id` (any thread, mu held or not).
  bool Send(WsConnectionId id, const json& message);
  // Closes every executor socket of `environment_id`; false if none was open.
  bool DropExecutor(const std::string& environment_id);
  std::map<std::string, State::RegistrationCount> Registrations() const;
  void SetRegistrationFailure(State::RegistrationFailure failure);
  // Back to no registration failure and zero counts (admin reset).
  void ResetRegistrations();

 private:
  enum class Transport { kRelay, kDirect };
  HttpResponse Admit(const std::string& connect_token, const std::string& env_id,
                     const HttpRequest& req, Transport transport);
  HttpResponse Register(const std::string& connect_token, const std::string& env_id,
                        const HttpRequest& req, Transport transport);
  // 404 unless `connect_token` is the environment's remote_url token. mu held.
  std::optional<HttpResponse> CheckRemoteUrlLocked(const std::string& connect_token,
                                                   const std::string& env_id,
                                                   const HttpRequest& req) const;
  HttpResponse RegistryFault(const FaultSpec& f);
  // "/rendezvous/{env}/{reg}" → the registration, if it is still valid. mu held.
  std::optional<std::pair<std::string, Registration>> ParseRendezvousLocked(
      const std::string& resource) const;
  int OnWsValidate(const std::string& resource);
  void OnWsOpen(WsConnectionId id, const std::string& resource);
  void OnWsText(WsConnectionId id, const std::string& text);
  void OnWsClose(WsConnectionId id);
  void TimerLoop();

  State& state_;
  FaultInjector& faults_;
  WebSocketServer ws_;
  std::thread timer_;
};

}  // namespace sbx::emulator::internal::openai
