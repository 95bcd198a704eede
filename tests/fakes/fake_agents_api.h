// FakeAgentsApi: an in-memory AgentsApi. Sessions get ids sess_N and self-hosted environments
// ccarenv_N (status pending until the test says otherwise); knobs to fail the next call of a
// method, mark a session failed or gone, set an environment's status, and count calls. DELETE
// follows the real service (reference §1.6, like the emulator's --strict-session-delete): a
// session whose turn is running → kAborted (409, cancel first); a session none of whose turns
// ever ran → kAborted "session has no durably bound CCA root", also after a cancel
// (SetStrictDelete(false) turns that rule off).
//
// Turn model (reference §2): SendEvents with a user message on an idle session starts a root
// turn (turn.created, item.added for the user item, session.in_progress, turn.in_progress),
// unless SetAutoStartTurns(false); on a busy session it is steering (counted, no new turn).
// A non-empty Idempotency-Key is recorded and deduped per session like the real service: a
// repeated key is answered OK and does nothing. Cancel ends the active turn (turn.cancelled,
// idle) unless SetCancelEndsTurn(false). The test then drives the running turn: AddCommand,
// AddAssistantMessage, EmitSubagentTurn, CompleteTurn / FailTurn; each emits the events the
// service would to every open StreamEvents subscriber of the session and saves the items, which
// ListTurns / GetTurn / ListTurnItems / ListItems page like the service (order desc by default,
// limit 1–100, `after` an id of the list). StreamEvents blocks until stop (kCancelled), the
// callback returns false (OK), the session is deleted (OK, EOF) or CloseStreams. Fault keys for
// FailNext/Calls: create get update list delete cancel (a cancel-only batch) send (a batch with
// a message) environment stream turns turn items.
// Thread-safe; callbacks run on the StreamEvents caller's thread without the fake's lock held.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller/cloud/openai/agents_api.h"
#include "controller/cloud/openai/wire_format.h"
#include "tests/fakes/fault_queue.h"

namespace sbx::testing {

namespace oa = controller::openai;

class FakeAgentsApi final : public oa::AgentsApi {
 public:
  api::StatusOr<oa::Session> CreateSession(const oa::CreateSessionRequest& request,
                                           std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("create"));
    oa::Session s;
    s.id = "sess_" + std::to_string(++next_);
    s.status = oa::SessionStatus::kIdle;
    s.environment.type = oa::EnvironmentType::kSelfHosted;
    s.environment.id = "ccarenv_" + std::to_string(next_);
    s.environment.remote_url = "http://127.0.0.1:9/v1";
    s.environment.workspace_directory = request.workspace_directory;
    s.agent.model = request.model;
    s.agent.instructions = request.instructions;
    s.metadata = request.metadata;
    sessions_[s.id] = s;
    environments_[s.environment.id] = oa::EnvironmentStatus::kPending;
    return s;
  }
  api::StatusOr<oa::Session> GetSession(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("get"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    return it->second;
  }
  api::StatusOr<oa::Session> UpdateSessionAgent(const std::string& id, const std::string& model,
                                                const std::string& instructions,
                                                std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("update"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    it->second.agent.model = model;
    it->second.agent.instructions = instructions;
    return it->second;
  }
  api::StatusOr<oa::SessionPage> ListSessions(const oa::ListSessionsParams& params,
                                              std::stop_token) override {
    std::lock_guard lock(mu_);
    list_limits_.push_back(params.limit);
    RETURN_IF_ERROR(Take("list"));
    oa::SessionPage page;
    for (const auto& [id, s] : sessions_) {
      page.sessions.push_back(s);
    }
    return page;
  }
  api::StatusOr<std::vector<oa::Session>> ListAllSessions(oa::ListSessionsParams params,
                                                          std::stop_token stop) override {
    ASSIGN_OR_RETURN(oa::SessionPage page, ListSessions(params, stop));
    return page.sessions;
  }
  api::Status DeleteSession(const std::string& id, std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("delete"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    if (it->second.status == oa::SessionStatus::kInProgress) {
      return api::AbortedError("HTTP 409 conflict_error: Session " + id +
                               " has a running turn; cancel it first");
    }
    if (strict_delete_ && bound_.count(id) == 0) {
      return api::AbortedError("HTTP 409 conflict_error: session has no durably bound CCA root");
    }
    sessions_.erase(it);
    CloseStreamsLocked(id, api::OkStatus());  // an open stream ends with EOF (reference §1.6)
    return api::OkStatus();
  }
  api::Status SendEvents(const std::string& id, const std::vector<oa::InputEvent>& events,
                         const std::string& idempotency_key, std::stop_token stop) override {
    const bool has_message = std::any_of(events.begin(), events.end(), [](const oa::InputEvent& e) {
      return e.kind == oa::InputEvent::Kind::kMessage;
    });
    if (has_message) {
      // HoldSends: the service holds the POST while no executor is connected (reference §2.2).
      std::unique_lock hold(hold_mu_);
      if (!hold_cv_.wait(hold, stop, [this] { return !holding_; })) {
        return api::CancelledError("stopped while the service held the input");
      }
    }
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take(has_message ? "send" : "cancel"));
    auto it = sessions_.find(id);
    if (it == sessions_.end()) {
      return api::NotFoundError("session " + id + " not found");
    }
    if (!idempotency_key.empty()) {
      idempotency_keys_.push_back(idempotency_key);
      if (!seen_keys_[id].insert(idempotency_key).second) {
        ++deduped_[id];
        return api::OkStatus();  // 202 again, nothing new
      }
    }
    for (const oa::InputEvent& e : events) {
      if (e.kind == oa::InputEvent::Kind::kCancel) {
        if (cancel_ends_turn_ && it->second.status == oa::SessionStatus::kInProgress) {
          EndTurnLocked(id, oa::TurnStatus::kCancelled, std::nullopt, std::nullopt);
        }
        continue;
      }
      ++accepted_inputs_[id];
      inputs_[id].push_back(e.text);
      if (auto_start_turns_ && it->second.status != oa::SessionStatus::kInProgress) {
        StartTurnLocked(id, e.text);
      }
    }
    return api::OkStatus();
  }
  api::StatusOr<oa::TurnPage> ListTurns(const std::string& id, const oa::ListParams& params,
                                        std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("turns"));
    RETURN_IF_ERROR(CheckSession(id));
    return Page(turns_[id], params);
  }
  api::StatusOr<oa::Turn> GetTurn(const std::string& id, const std::string& turn_id,
                                  std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("turn"));
    RETURN_IF_ERROR(CheckSession(id));
    oa::Turn* turn = FindTurnLocked(id, turn_id);
    if (turn == nullptr) {
      return api::NotFoundError("turn " + turn_id + " not found in session " + id);
    }
    return *turn;
  }
  api::StatusOr<oa::ItemPage> ListTurnItems(const std::string& id, const std::string& turn_id,
                                            const oa::ListParams& params,
                                            std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("items"));
    RETURN_IF_ERROR(CheckSession(id));
    if (FindTurnLocked(id, turn_id) == nullptr) {
      return api::NotFoundError("turn " + turn_id + " not found in session " + id);
    }
    std::vector<oa::Item> rows;
    for (const oa::Item& item : items_[id]) {
      if (item.turn_id == turn_id) {
        rows.push_back(item);
      }
    }
    return Page(rows, params);
  }
  api::StatusOr<oa::ItemPage> ListItems(const std::string& id, const oa::ListParams& params,
                                        std::stop_token) override {
    std::lock_guard lock(mu_);
    RETURN_IF_ERROR(Take("items"));
    RETURN_IF_ERROR(CheckSession(id));
    return Page(items_[id], params);
  }
  api::StatusOr<oa::Environment> GetEnvironment(const std::string& id, std::stop_token,
                                                bool routine) override {
    std::lock_guard lock(mu_);
    routine_environment_gets_ += routine ? 1 : 0;
    RETURN_IF_ERROR(Take("environment"));
    auto it = environments_.find(id);
    if (it == environments_.end()) {
      return api::NotFoundError("environment " + id + " not found");
    }
    oa::Environment e;
    e.id = id;
    e.type = oa::EnvironmentType::kSelfHosted;
    e.status = it->second;
    e.status_raw = std::string(oa::EnvironmentStatusName(it->second));
    return e;
  }
  api::Status StreamEvents(const std::string& id, const oa::StreamCallbacks& callbacks,
                           std::stop_token stop) override {
    std::unique_lock lock(mu_);
    RETURN_IF_ERROR(Take("stream"));
    RETURN_IF_ERROR(CheckSession(id));
    auto sub = std::make_shared<Subscriber>();
    sub->session_id = id;
    subscribers_.push_back(sub);
    auto leave = [&](api::Status status) {
      std::erase(subscribers_, sub);
      return status;
    };
    if (callbacks.on_open) {
      lock.unlock();
      callbacks.on_open();
      lock.lock();
    }
    while (true) {
      cv_.wait(lock, stop, [&] { return !sub->queue.empty() || sub->closed; });
      if (stop.stop_requested()) {
        return leave(api::CancelledError("stream of " + id + " stopped"));
      }
      if (!sub->queue.empty()) {
        oa::SessionEvent event = std::move(sub->queue.front());
        sub->queue.pop_front();
        lock.unlock();
        const bool more = !callbacks.on_event || callbacks.on_event(event);
        lock.lock();
        if (!more) {
          return leave(api::OkStatus());
        }
        continue;
      }
      return leave(sub->end);
    }
  }
  using oa::AgentsApi::StreamEvents;

  // ---- test knobs ----
  void SetEnvironmentStatus(const std::string& env_id, oa::EnvironmentStatus status) {
    std::lock_guard lock(mu_);
    environments_[env_id] = status;
  }
  // Input waits for the executor (reference §2.1): the session asks for an environment_connection
  // (requires_action) while `waiting`, and is idle again after.
  void SetWaitingForExecutor(const std::string& id, bool waiting) {
    std::lock_guard lock(mu_);
    oa::Session& s = sessions_.at(id);
    s.required_actions.clear();
    s.status = oa::SessionStatus::kIdle;
    if (waiting) {
      oa::RequiredAction action;
      action.type_raw = "environment_connection";
      action.environment_id = s.environment.id;
      s.required_actions.push_back(action);
      s.status = oa::SessionStatus::kRequiresAction;
    }
  }
  void FailSession(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.at(id).status = oa::SessionStatus::kFailed;
  }
  // A root turn starts running (status in_progress) with `input` as its user item (none when
  // empty); the session's root is bound from now on. Returns the turn id.
  std::string StartTurn(const std::string& id, const std::string& input = "") {
    std::lock_guard lock(mu_);
    return StartTurnLocked(id, input);
  }
  // The running turn completes by itself (status idle).
  void FinishTurn(const std::string& id) { CompleteTurn(id); }
  void CompleteTurn(const std::string& id, std::optional<oa::Usage> usage = std::nullopt) {
    std::lock_guard lock(mu_);
    EndTurnLocked(id, oa::TurnStatus::kCompleted, std::nullopt, std::move(usage));
  }
  // The running turn fails with turn error `code` (reference §2.3, e.g. "connection_failed").
  void FailTurn(const std::string& id, const std::string& code, const std::string& message,
                std::optional<oa::Usage> usage = std::nullopt) {
    std::lock_guard lock(mu_);
    EndTurnLocked(id, oa::TurnStatus::kFailed, oa::ApiError{.code = code, .message = message},
                  std::move(usage));
  }
  // The running turn runs `command`: item.added, one output delta, item.done (completed for exit
  // code 0, failed otherwise; incomplete without an exit code). Returns the item id.
  std::string AddCommand(const std::string& id, const std::string& command,
                         const std::string& output, std::optional<int64_t> exit_code) {
    std::lock_guard lock(mu_);
    oa::Item item;
    item.id = "cmd_" + std::to_string(++next_);
    item.type = oa::ItemType::kCommandExecution;
    item.type_raw = "command_execution";
    item.turn_id = ActiveTurnLocked(id);
    item.command = command;
    item.cwd = "/workspace";
    item.status = oa::ItemStatus::kInProgress;
    item.status_raw = "in_progress";
    const int64_t index = OutputIndexLocked(id);
    EmitItemLocked(id, "agent.session.turn.item.added", item, index);
    if (!output.empty()) {
      oa::SessionEvent delta = TurnScopedLocked(id, "agent.output.command_execution_output.delta");
      delta.item_id = item.id;
      delta.output_index = index;
      delta.text = output;
      EmitLocked(id, std::move(delta));
    }
    item.output = output;
    item.exit_code = exit_code;
    item.duration_ms = 5;
    item.status = !exit_code        ? oa::ItemStatus::kIncomplete
                  : *exit_code == 0 ? oa::ItemStatus::kCompleted
                                    : oa::ItemStatus::kFailed;
    item.status_raw = std::string(oa::ItemStatusName(item.status));
    SaveItemLocked(id, item);
    EmitItemLocked(id, "agent.session.turn.item.done", item, index);
    return item.id;
  }
  // The running turn says `text` (final_answer): item.added, output_text.delta/.done, item.done.
  std::string AddAssistantMessage(const std::string& id, const std::string& text) {
    std::lock_guard lock(mu_);
    oa::Item item;
    item.id = "msg_" + std::to_string(++next_);
    item.type = oa::ItemType::kMessage;
    item.type_raw = "message";
    item.turn_id = ActiveTurnLocked(id);
    item.role = "assistant";
    item.phase = "final_answer";
    item.status = oa::ItemStatus::kInProgress;
    item.status_raw = "in_progress";
    const int64_t index = OutputIndexLocked(id);
    EmitItemLocked(id, "agent.session.turn.item.added", item, index);
    for (const char* type :
         {"agent.session.turn.output_text.delta", "agent.session.turn.output_text.done"}) {
      oa::SessionEvent e = TurnScopedLocked(id, type);
      e.item_id = item.id;
      e.output_index = index;
      e.content_index = 0;
      e.text = text;
      EmitLocked(id, std::move(e));
    }
    item.text = text;
    item.status = oa::ItemStatus::kCompleted;
    item.status_raw = "completed";
    SaveItemLocked(id, item);
    EmitItemLocked(id, "agent.session.turn.item.done", item, index);
    return item.id;
  }
  // A subagent turn of the running turn is created and ends with `status` (turn events with
  // turn.subagent_id set; not listed by ListTurns, which lists root turns).
  void EmitSubagentTurn(const std::string& id, const std::string& subagent_id,
                        oa::TurnStatus status = oa::TurnStatus::kCompleted) {
    std::lock_guard lock(mu_);
    oa::Turn turn;
    turn.id = "turn_" + std::to_string(++next_);
    turn.session_id = id;
    turn.subagent_id = subagent_id;
    turn.status = oa::TurnStatus::kInProgress;
    turn.status_raw = "in_progress";
    turn.created_at = Now();
    EmitTurnLocked(id, "agent.session.turn.created", turn);
    turn.status = status;
    turn.status_raw = std::string(oa::TurnStatusName(status));
    turn.completed_at = Now();
    EmitTurnLocked(id, "agent.session.turn." + turn.status_raw, turn);
  }
  // Any event, as is (its kind is the test's business).
  void Emit(const std::string& id, oa::SessionEvent event) {
    std::lock_guard lock(mu_);
    EmitLocked(id, std::move(event));
  }
  // Ends every open stream of the session after its queued events: OK is a clean EOF,
  // kUnavailable a dropped connection.
  void CloseStreams(const std::string& id, api::Status end = api::OkStatus()) {
    std::lock_guard lock(mu_);
    CloseStreamsLocked(id, std::move(end));
  }
  // Polls until `n` streams of the session are open (their on_open has run or is running).
  bool WaitForSubscribers(const std::string& id, size_t n,
                          std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      {
        std::lock_guard lock(mu_);
        const auto open = std::count_if(subscribers_.begin(), subscribers_.end(),
                                        [&](const auto& s) { return s->session_id == id; });
        if (static_cast<size_t>(open) >= n) {
          return true;
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  void SetAutoStartTurns(bool start) {
    std::lock_guard lock(mu_);
    auto_start_turns_ = start;
  }
  // While held, a SendEvents with a message waits (before anything is recorded) until
  // ReleaseSends, as the service holds the POST while no executor is connected.
  void HoldSends() {
    std::lock_guard hold(hold_mu_);
    holding_ = true;
  }
  void ReleaseSends() {
    {
      std::lock_guard hold(hold_mu_);
      holding_ = false;
    }
    hold_cv_.notify_all();
  }
  // Every Idempotency-Key SendEvents received, repeats included, in order.
  std::vector<std::string> IdempotencyKeys() const {
    std::lock_guard lock(mu_);
    return idempotency_keys_;
  }
  // User messages accepted (not deduped) for the session, and their texts.
  int AcceptedInputs(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = accepted_inputs_.find(id);
    return it == accepted_inputs_.end() ? 0 : it->second;
  }
  std::vector<std::string> Inputs(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = inputs_.find(id);
    return it == inputs_.end() ? std::vector<std::string>{} : it->second;
  }
  // Posts answered OK without effect because their key was seen before.
  int Deduped(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = deduped_.find(id);
    return it == deduped_.end() ? 0 : it->second;
  }
  // Root turns started in the session (oldest first).
  std::vector<oa::Turn> Turns(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = turns_.find(id);
    return it == turns_.end() ? std::vector<oa::Turn>{} : it->second;
  }
  void SetStrictDelete(bool strict) {
    std::lock_guard lock(mu_);
    strict_delete_ = strict;
  }
  void SetCancelEndsTurn(bool ends) {
    std::lock_guard lock(mu_);
    cancel_ends_turn_ = ends;
  }
  void ForgetSession(const std::string& id) {
    std::lock_guard lock(mu_);
    sessions_.erase(id);
  }
  bool HasSession(const std::string& id) const {
    std::lock_guard lock(mu_);
    return sessions_.count(id) != 0;
  }
  int SessionCount() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(sessions_.size());
  }
  int Calls(const std::string& method) const {
    std::lock_guard lock(mu_);
    return faults_.Calls(method);
  }
  // The `limit` of every session list page asked for, in order (one page per list here).
  std::vector<int> ListLimits() const {
    std::lock_guard lock(mu_);
    return list_limits_;
  }
  void FailNext(const std::string& method, api::Status status, int times = 1) {
    std::lock_guard lock(mu_);
    faults_.FailNext(method, std::move(status), times);
  }
  // GetEnvironment calls made as routine looks (counted in Calls("environment") too).
  int RoutineEnvironmentGets() const {
    std::lock_guard lock(mu_);
    return routine_environment_gets_;
  }

 private:
  api::Status Take(const std::string& method) { return faults_.Take(method); }  // requires mu_

  struct Subscriber {
    std::string session_id;
    std::deque<oa::SessionEvent> queue;  // Guarded by mu_.
    bool closed = false;                 // Guarded by mu_.
    api::Status end;                     // Guarded by mu_.
  };

  static int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

  api::Status CheckSession(const std::string& id) const {  // requires mu_
    if (sessions_.count(id) == 0) {
      return api::NotFoundError("session " + id + " not found");
    }
    return api::OkStatus();
  }

  // One page of `rows` (oldest first) as the service pages: desc by default, `after` exclusive.
  template <typename T>
  static api::StatusOr<oa::ListPage<T>> Page(std::vector<T> rows, const oa::ListParams& params) {
    if (params.limit < 0 || params.limit > 100) {
      return api::InvalidArgumentError("limit must be an integer between 1 and 100");
    }
    if (params.order != oa::ListOrder::kAsc) {
      std::reverse(rows.begin(), rows.end());
    }
    auto start = rows.begin();
    if (!params.after.empty()) {
      start = std::find_if(rows.begin(), rows.end(),
                           [&](const T& row) { return row.id == params.after; });
      if (start == rows.end()) {
        return api::InvalidArgumentError("after: unknown id '" + params.after + "'");
      }
      ++start;
    }
    const size_t limit = params.limit == 0 ? 20 : static_cast<size_t>(params.limit);
    oa::ListPage<T> page;
    for (auto it = start; it != rows.end() && page.data.size() < limit; ++it) {
      page.data.push_back(*it);
    }
    page.has_more = static_cast<size_t>(rows.end() - start) > page.data.size();
    if (!page.data.empty()) {
      page.first_id = page.data.front().id;
      page.last_id = page.data.back().id;
    }
    return page;
  }

  oa::Turn* FindTurnLocked(const std::string& id, const std::string& turn_id) {
    for (oa::Turn& t : turns_[id]) {
      if (t.id == turn_id) {
        return &t;
      }
    }
    return nullptr;
  }

  // The running root turn; aborts the test if there is none (a test bug).
  std::string ActiveTurnLocked(const std::string& id) const {
    auto it = active_.find(id);
    if (it == active_.end()) {
      std::fprintf(stderr, "FakeAgentsApi: session %s has no running turn\n", id.c_str());
      std::abort();
    }
    return it->second;
  }

  int64_t OutputIndexLocked(const std::string& id) { return output_index_[id]++; }

  void EmitLocked(const std::string& id, oa::SessionEvent event) {
    event.event_id = "evt_" + std::to_string(++next_);
    event.kind = oa::ClassifyEventType(event.type);
    if (event.session_id.empty()) {
      event.session_id = id;
    }
    for (const auto& sub : subscribers_) {
      if (sub->session_id == id && !sub->closed) {
        sub->queue.push_back(event);
      }
    }
    cv_.notify_all();
  }

  void CloseStreamsLocked(const std::string& id, api::Status end) {
    for (const auto& sub : subscribers_) {
      if (sub->session_id == id) {
        sub->closed = true;
        sub->end = end;
      }
    }
    cv_.notify_all();
  }

  oa::SessionEvent TurnScopedLocked(const std::string& id, const std::string& type) const {
    oa::SessionEvent e;
    e.type = type;
    e.session_id = id;
    e.turn_id = ActiveTurnLocked(id);
    return e;
  }

  void EmitSessionLocked(const std::string& id, const std::string& type) {
    oa::SessionEvent e;
    e.type = type;
    e.session = sessions_.at(id);
    EmitLocked(id, std::move(e));
  }

  void EmitTurnLocked(const std::string& id, const std::string& type, const oa::Turn& turn) {
    oa::SessionEvent e;
    e.type = type;
    e.turn_id = turn.id;
    e.turn = turn;
    e.usage = turn.usage;
    EmitLocked(id, std::move(e));
  }

  void EmitItemLocked(const std::string& id, const std::string& type, const oa::Item& item,
                      std::optional<int64_t> output_index) {
    oa::SessionEvent e;
    e.type = type;
    e.turn_id = item.turn_id;
    e.item = item;
    e.item_id = item.id;
    e.item_type = item.type_raw;
    e.output_index = output_index;
    EmitLocked(id, std::move(e));
  }

  void SaveItemLocked(const std::string& id, const oa::Item& item) {
    std::vector<oa::Item>& items = items_[id];
    auto it = std::find_if(items.begin(), items.end(),
                           [&](const oa::Item& i) { return i.id == item.id; });
    if (it == items.end()) {
      items.push_back(item);
    } else {
      *it = item;
    }
  }

  std::string StartTurnLocked(const std::string& id, const std::string& input) {
    oa::Session& session = sessions_.at(id);
    oa::Turn turn;
    turn.id = "turn_" + std::to_string(++next_);
    turn.session_id = id;
    turn.status = oa::TurnStatus::kQueued;
    turn.status_raw = "queued";
    turn.created_at = Now();
    turns_[id].push_back(turn);
    active_[id] = turn.id;
    output_index_[id] = 0;
    bound_.insert(id);
    EmitTurnLocked(id, "agent.session.turn.created", turn);
    if (!input.empty()) {
      oa::Item user;
      user.id = "msg_" + std::to_string(++next_);
      user.type = oa::ItemType::kMessage;
      user.type_raw = "message";
      user.turn_id = turn.id;
      user.role = "user";
      user.text = input;
      user.status = oa::ItemStatus::kCompleted;
      user.status_raw = "completed";
      SaveItemLocked(id, user);
      EmitItemLocked(id, "agent.session.turn.item.added", user, std::nullopt);
    }
    session.status = oa::SessionStatus::kInProgress;
    EmitSessionLocked(id, "agent.session.in_progress");
    oa::Turn& saved = *FindTurnLocked(id, turn.id);
    saved.status = oa::TurnStatus::kInProgress;
    saved.status_raw = "in_progress";
    saved.started_at = Now();
    EmitTurnLocked(id, "agent.session.turn.in_progress", saved);
    return turn.id;
  }

  void EndTurnLocked(const std::string& id, oa::TurnStatus status,
                     std::optional<oa::ApiError> error, std::optional<oa::Usage> usage) {
    oa::Session& session = sessions_.at(id);
    auto active = active_.find(id);
    if (active != active_.end()) {
      oa::Turn& turn = *FindTurnLocked(id, active->second);
      turn.status = status;
      turn.status_raw = std::string(oa::TurnStatusName(status));
      turn.completed_at = Now();
      turn.error = std::move(error);
      turn.usage = std::move(usage);
      active_.erase(active);
      EmitTurnLocked(id, "agent.session.turn." + turn.status_raw, turn);
    }
    session.status = oa::SessionStatus::kIdle;
    EmitSessionLocked(id, "agent.session.idle");
  }

  std::mutex hold_mu_;
  std::condition_variable_any hold_cv_;
  bool holding_ = false;  // Guarded by hold_mu_.
  mutable std::mutex mu_;
  std::condition_variable_any cv_;  // signalled when a subscriber's queue or state changes
  int next_ = 0;                    // Guarded by mu_.
  std::map<std::string, oa::Session> sessions_;                // Guarded by mu_.
  std::vector<int> list_limits_;                               // Guarded by mu_.
  std::map<std::string, oa::EnvironmentStatus> environments_;  // Guarded by mu_.
  FaultQueue faults_;                                          // Guarded by mu_.
  int routine_environment_gets_ = 0;                           // Guarded by mu_.
  std::set<std::string> bound_;   // sessions a turn has run in. Guarded by mu_.
  bool strict_delete_ = true;     // Guarded by mu_.
  bool cancel_ends_turn_ = true;  // Guarded by mu_.
  bool auto_start_turns_ = true;  // Guarded by mu_.
  // The turn model, per session id. All guarded by mu_.
  std::map<std::string, std::vector<oa::Turn>> turns_;      // root turns, oldest first
  std::map<std::string, std::vector<oa::Item>> items_;      // saved root items, oldest first
  std::map<std::string, std::string> active_;               // the running root turn
  std::map<std::string, int64_t> output_index_;             // next output_index of the active turn
  std::map<std::string, std::set<std::string>> seen_keys_;  // Idempotency-Keys per session
  std::vector<std::string> idempotency_keys_;               // every key received, in order
  std::map<std::string, int> accepted_inputs_;
  std::map<std::string, int> deduped_;
  std::map<std::string, std::vector<std::string>> inputs_;
  std::vector<std::shared_ptr<Subscriber>> subscribers_;
};

}  // namespace sbx::testing
