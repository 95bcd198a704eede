#include "emulator/openai/internal/turn_runner.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "emulator/openai/internal/turn_script.h"

namespace sbx::emulator::internal::openai {
namespace {

using namespace std::chrono_literals;
using Duration = OpenAiEmulator::Duration;

// file:// URI of an absolute path (percent-encodes what is not unreserved or '/').
std::string FileUri(const std::string& path) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace

TurnRunner::TurnRunner(State& state, ExecutorRegistry& registry)
    : state_(state), registry_(registry) {}

TurnRunner::~TurnRunner() { Stop(); }

void TurnRunner::Stop() {
  std::vector<Runner> runners;
  {
    std::lock_guard lock(state_.mu);
    runners.swap(runners_);
  }
  for (auto& r : runners) {
    if (r.thread.joinable()) {
      r.thread.join();
    }
  }
}

// The 5-minute connection wait (reference §2.1): while no executor is connected, the session
// requires an environment_connection action and the POST is held. False if it timed out.
bool TurnRunner::WaitForExecutorLocked(std::unique_lock<std::mutex>& lock,
                                       const std::shared_ptr<SessionRec>& s, bool forced) {
  if (!forced && state_.ExecutorConnectedLocked(*s)) {
    return true;
  }
  if (s->waiting_for_executor++ == 0) {
    s->required_actions =
        json::array({{{"type", "environment_connection"}, {"environment_id", s->environment_id}}});
    if (!s->runner_active) {
      s->status = "requires_action";
    }
    state_.EmitLocked(*s, state_.SessionEvent(*s, "agent.session.requires_action"));
  }
  Duration wait = state_.options.connection_wait;
  if (forced && s->hold_release) {
    wait = std::min<Duration>(wait, *s->hold_release);
  }
  auto deadline = SteadyClock::now() + wait;
  bool woke = state_.cv.wait_until(lock, deadline, [&] {
    return state_.stopping || (!forced && state_.ExecutorConnectedLocked(*s)) ||
           state_.sessions.count(s->id) == 0 || s->status == "failed";
  });
  bool connected = state_.ExecutorConnectedLocked(*s) && !state_.stopping;
  if (forced) {
    connected = connected && s->hold_release.has_value() && !woke;
  } else {
    connected = connected && woke;
  }
  if (--s->waiting_for_executor == 0) {
    s->required_actions = json::array();
    if (s->status == "requires_action") {
      s->status = "idle";
    }
  }
  return connected;
}

void TurnRunner::EnqueueLocked(const std::shared_ptr<SessionRec>& s, PendingInput input) {
  s->pending.push_back(std::move(input));
  if (s->runner_active) {
    return;
  }
  s->runner_active = true;
  // Reap runners that have finished, then start one for this session.
  for (auto r = runners_.begin(); r != runners_.end();) {
    if (r->done->load()) {
      r->thread.join();  // already returned: does not block
      r = runners_.erase(r);
    } else {
      ++r;
    }
  }
  Runner runner;
  auto done = runner.done;
  runner.thread = std::thread([this, s, done] {
    RunTurns(s);
    done->store(true);
  });
  runners_.push_back(std::move(runner));
}

void TurnRunner::TerminateActiveLocked(SessionRec& s) {
  if (s.active_conn == 0 || s.active_process.empty()) {
    return;
  }
  auto c = state_.connections.find(s.active_conn);
  if (c == state_.connections.end()) {
    return;
  }
  int64_t rid = c->second.next_id++;
  registry_.Send(s.active_conn, json{{"id", rid},
                                     {"method", "process/terminate"},
                                     {"params", {{"processId", s.active_process}}}});
}

void TurnRunner::RunTurns(const std::shared_ptr<SessionRec>& s) {
  std::unique_lock lock(state_.mu);
  while (!state_.stopping && !s->pending.empty() && state_.sessions.count(s->id) &&
         s->status != "failed") {
    PendingInput in = std::move(s->pending.front());
    s->pending.pop_front();
    s->cancel_requested = false;
    RunTurnLocked(lock, s, in);
  }
  s->runner_active = false;
  s->pending.clear();
  state_.cv.notify_all();
}

// One turn in progress: where its records are and what it has produced so far.
struct TurnRunner::TurnContext {
  SessionRec& sr;
  size_t turn_index = 0;
  std::string turn_id{};
  int output_index = 0;
  std::vector<std::string> summaries{};  // one per command, for the final message
  int64_t input_chars = 0;
  int64_t output_chars = 0;  // command output and assistant text
  TurnRec& turn() { return sr.turns[turn_index]; }
};

void TurnRunner::RunTurnLocked(std::unique_lock<std::mutex>& lock,
                               const std::shared_ptr<SessionRec>& s, const PendingInput& in) {
  SessionRec& sr = *s;
  sr.turns.push_back(TurnRec{});
  TurnContext tc{sr, sr.turns.size() - 1};
  tc.turn().id = state_.NewId("turn_");
  tc.turn().created_at = NowUnix();
  tc.turn_id = tc.turn().id;
  tc.input_chars = static_cast<int64_t>(in.text.size());
  const std::string& turn_id = tc.turn_id;
  state_.CountLocked(sr, &InputCounters::turns_started);
  state_.EmitLocked(sr, state_.TurnEvent(sr, tc.turn(), "agent.session.turn.created"));
  json user_item = {{"id", state_.NewId("msg_")},
                    {"type", "message"},
                    {"role", "user"},
                    {"content", json::array({{{"type", "input_text"}, {"text", in.text}}})},
                    {"phase", nullptr},
                    {"status", "completed"},
                    {"turn_id", turn_id}};
  tc.turn().items.push_back(user_item);
  state_.EmitLocked(
      sr, state_.ItemEvent(sr, turn_id, "agent.session.turn.item.added", user_item, nullptr));
  sr.status = "in_progress";
  sr.last_active_at = NowUnix();
  state_.EmitLocked(sr, state_.SessionEvent(sr, "agent.session.in_progress"));
  tc.turn().status = "in_progress";
  tc.turn().started_at = NowUnix();
  state_.EmitLocked(sr, state_.TurnEvent(sr, tc.turn(), "agent.session.turn.in_progress"));

  // Input that arrived with the session (no POST to hold) waits for the executor here.
  bool connection_failed = in.connection_failed;
  if (!connection_failed && !state_.ExecutorConnectedLocked(sr)) {
    connection_failed = !WaitForExecutorLocked(lock, s);
  }
  if (connection_failed) {
    FinishTurnLocked(
        tc, "failed",
        {{"code", "connection_failed"},
         {"message", "No executor connected to environment " + sr.environment_id + " within " +
                         std::to_string(state_.options.connection_wait.count()) + " ms"}});
    return;
  }

  sr.root_bound = true;  // the turn runs with a connected executor
  const TurnScript script = ParseTurnScript(in.text);
  if (script.error) {
    FinishTurnLocked(tc, "failed", {{"code", "invalid_request"}, {"message", *script.error}});
    return;
  }
  auto interrupted = [&] {
    return sr.cancel_requested || state_.stopping || sr.status == "failed";
  };
  for (const TurnStep& step : script.steps) {
    if (interrupted()) {
      break;
    }
    switch (step.kind) {
      case TurnStep::Kind::kCommand:
        RunCommandItemLocked(lock, s, tc, step.command);
        break;
      case TurnStep::Kind::kFail:
        FinishTurnLocked(tc, "failed", {{"code", step.code}, {"message", step.message}});
        return;
      case TurnStep::Kind::kFlaky:
        if (state_.flaky_inputs_seen.insert(in.text).second) {
          FinishTurnLocked(tc, "failed", {{"code", step.code}, {"message", step.message}});
          return;
        }
        break;
      case TurnStep::Kind::kSubagent:
        EmitSubagentTurnLocked(tc, step.status);
        break;
      case TurnStep::Kind::kSleep:
        state_.cv.wait_until(lock, SteadyClock::now() + step.duration, interrupted);
        break;
      case TurnStep::Kind::kSay: {
        std::vector<std::string> words;
        std::istringstream in(step.command);
        for (std::string w; in >> w;) {
          words.push_back((words.empty() ? "" : " ") + w);
        }
        EmitAssistantMessageLocked(tc, words, "commentary");
        break;
      }
    }
  }
  if (sr.cancel_requested || state_.stopping) {
    FinishTurnLocked(tc, "cancelled", nullptr);
    return;
  }
  if (sr.status == "failed") {
    FinishTurnLocked(tc, "failed",
                     {{"code", "internal_error"}, {"message", sr.error.value_or("failed")}});
    return;
  }
  EmitFinalMessageLocked(tc, in.text);
  FinishTurnLocked(tc, "completed", nullptr);
}

// Deterministic token counts, about four characters a token (rounded up), so that a test can
// predict them from the input and the output.
json TurnRunner::UsageJson(int64_t input_chars, int64_t output_chars) {
  int64_t in = (input_chars + 3) / 4;
  int64_t out = (output_chars + 3) / 4;
  return {{"input_tokens", in},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", out},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", in + out}};
}

void TurnRunner::FinishTurnLocked(TurnContext& tc, const std::string& status, json error) {
  SessionRec& sr = tc.sr;
  tc.turn().status = status;
  tc.turn().completed_at = NowUnix();
  tc.turn().error = std::move(error);
  tc.turn().usage = UsageJson(tc.input_chars, tc.output_chars);
  state_.CloseInputLocked(sr);
  state_.EmitLocked(sr, state_.TurnEvent(sr, tc.turn(), "agent.session.turn." + status));
  sr.last_active_at = NowUnix();
  if (sr.status != "failed") {
    sr.status = sr.waiting_for_executor > 0 ? "requires_action" : "idle";
    state_.EmitLocked(sr, state_.SessionEvent(sr, "agent.session.idle"));
  }
}

void TurnRunner::RunCommandItemLocked(std::unique_lock<std::mutex>& lock,
                                      const std::shared_ptr<SessionRec>& s, TurnContext& tc,
                                      const std::string& command) {
  SessionRec& sr = *s;
  json item = {{"id", state_.NewId("cmd_")},
               {"type", "command_execution"},
               {"command", command},
               {"cwd", sr.workspace_directory},
               {"exit_code", nullptr},
               {"duration_ms", nullptr},
               {"output", ""},
               {"status", "in_progress"},
               {"turn_id", tc.turn_id}};
  state_.EmitLocked(
      sr, state_.ItemEvent(sr, tc.turn_id, "agent.session.turn.item.added", item, tc.output_index));
  auto started = SteadyClock::now();
  CommandOutcome out = RunCommandLocked(lock, s, tc.turn_id, item["id"].get<std::string>(),
                                        tc.output_index, command);
  item["output"] = out.output;
  item["status"] = out.status;
  item["exit_code"] = out.exit_code ? json(*out.exit_code) : json(nullptr);
  item["duration_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - started).count();
  tc.turn().items.push_back(item);
  state_.EmitLocked(
      sr, state_.ItemEvent(sr, tc.turn_id, "agent.session.turn.item.done", item, tc.output_index));
  ++tc.output_index;
  tc.output_chars += static_cast<int64_t>(out.output.size());
  tc.summaries.push_back(
      "`" + command + "` " +
      (out.exit_code ? "exited with code " + std::to_string(*out.exit_code) : out.status));
}

// A subagent's turn inside the root turn (reference §2.3, §2.4): its events carry
// turn.subagent_id, so a client must not take its terminal event as the root turn's outcome.
// The shape of the agent.session.subagent.* payloads is undocumented ("subagent object
// fields"); the emulator sends {subagent:{id, object, status}} with the root turn's id.
// Subagent turns are streamed only: GET …/turns lists root turns (as the client reads it).
void TurnRunner::EmitSubagentTurnLocked(TurnContext& tc, const std::string& status) {
  SessionRec& sr = tc.sr;
  const std::string subagent_id = state_.NewId("subagent_");
  auto subagent_event = [&](const std::string& type, const std::string& subagent_status) {
    json e = state_.Event(type);
    e["session_id"] = sr.id;
    e["turn_id"] = tc.turn_id;
    e["subagent"] = {
        {"id", subagent_id}, {"object", "agent.session.subagent"}, {"status", subagent_status}};
    return e;
  };
  state_.EmitLocked(sr, subagent_event("agent.session.subagent.created", "active"));
  TurnRec sub;
  sub.id = state_.NewId("turn_");
  sub.subagent_id = subagent_id;
  sub.created_at = NowUnix();
  state_.EmitLocked(sr, state_.TurnEvent(sr, sub, "agent.session.turn.created"));
  sub.status = "in_progress";
  sub.started_at = NowUnix();
  state_.EmitLocked(sr, state_.TurnEvent(sr, sub, "agent.session.turn.in_progress"));
  sub.status = status;
  sub.completed_at = NowUnix();
  if (status == "failed") {
    sub.error = {{"code", "internal_error"}, {"message", "subagent failed on request (!subagent)"}};
  }
  sub.usage = UsageJson(0, 0);
  state_.EmitLocked(sr, state_.TurnEvent(sr, sub, "agent.session.turn." + status));
  state_.EmitLocked(sr, subagent_event("agent.session.subagent.closed", "closed"));
}

// The final assistant message, streamed as the Responses API does (reference §2.3, §6):
// item.added, content_part.added, output_text.delta…, output_text.done, content_part.done,
// item.done.
void TurnRunner::EmitFinalMessageLocked(TurnContext& tc, const std::string& input) {
  std::vector<std::string> pieces;
  if (tc.summaries.empty()) {
    pieces.push_back("Received: " + input);
  } else {
    pieces.push_back("Ran " + std::to_string(tc.summaries.size()) + " command(s): ");
    for (size_t i = 0; i < tc.summaries.size(); ++i) {
      pieces.push_back(tc.summaries[i] + (i + 1 < tc.summaries.size() ? "; " : "."));
    }
  }
  EmitAssistantMessageLocked(tc, pieces, "final_answer");
}

void TurnRunner::EmitAssistantMessageLocked(TurnContext& tc, const std::vector<std::string>& pieces,
                                            const std::string& phase) {
  SessionRec& sr = tc.sr;
  std::string text;
  for (const auto& p : pieces) {
    text += p;
  }
  tc.output_chars += static_cast<int64_t>(text.size());
  json msg = {{"id", state_.NewId("msg_")}, {"type", "message"}, {"role", "assistant"},
              {"content", json::array()},   {"phase", phase},    {"status", "in_progress"},
              {"turn_id", tc.turn_id}};
  const int index = tc.output_index;
  state_.EmitLocked(sr,
                    state_.ItemEvent(sr, tc.turn_id, "agent.session.turn.item.added", msg, index));
  auto text_event = [&](const std::string& type) {
    json e = state_.Event(type);
    e.update({{"session_id", sr.id},
              {"turn_id", tc.turn_id},
              {"item_id", msg["id"]},
              {"output_index", index},
              {"content_index", 0}});
    return e;
  };
  json part_added = text_event("agent.session.turn.content_part.added");
  part_added["part"] = {{"type", "output_text"}, {"text", ""}};
  state_.EmitLocked(sr, part_added);
  for (const auto& p : pieces) {
    json delta = text_event("agent.session.turn.output_text.delta");
    delta["delta"] = p;
    state_.EmitLocked(sr, delta);
  }
  json done = text_event("agent.session.turn.output_text.done");
  done["text"] = text;
  state_.EmitLocked(sr, done);
  json part_done = text_event("agent.session.turn.content_part.done");
  part_done["part"] = {{"type", "output_text"}, {"text", text}};
  state_.EmitLocked(sr, part_done);
  msg["content"] = json::array({{{"type", "output_text"}, {"text", text}}});
  msg["status"] = "completed";
  tc.turn().items.push_back(msg);
  state_.EmitLocked(sr,
                    state_.ItemEvent(sr, tc.turn_id, "agent.session.turn.item.done", msg, index));
  ++tc.output_index;
}

TurnRunner::CommandOutcome TurnRunner::RunCommandLocked(std::unique_lock<std::mutex>& lock,
                                                        const std::shared_ptr<SessionRec>& s,
                                                        const std::string& turn_id,
                                                        const std::string& item_id,
                                                        int output_index,
                                                        const std::string& command) {
  CommandOutcome out;
  SessionRec& sr = *s;
  // An executor that just (re)connected may still be in its initialize handshake.
  auto ready_deadline =
      SteadyClock::now() + std::min<Duration>(state_.options.connection_wait, 30s);
  WsConnectionId conn = 0;
  state_.cv.wait_until(lock, ready_deadline, [&] {
    conn = state_.ReadyConnectionLocked(sr);
    return conn != 0 || state_.stopping || sr.cancel_requested || state_.NoiseOnlyLocked(sr);
  });
  if (conn == 0) {
    if (sr.cancel_requested || state_.stopping) {
      out.status = "incomplete";
    } else if (state_.NoiseOnlyLocked(sr)) {
      out.output = std::string("the connected executor speaks ") + kNoiseProfile +
                   "; the emulator runs commands only through the stand-in executor (" +
                   kPlainJsonRpcProfile + ")";
    } else {
      out.output = "exec-server transport disconnected: no executor connected";
    }
    return out;
  }
  RpcConnection& rc = state_.connections[conn];
  const std::string process_id = "proc-" + std::to_string(++state_.process_seq);
  auto watch = std::make_shared<ProcessWatch>();
  watch->session_id = sr.id;
  watch->turn_id = turn_id;
  watch->item_id = item_id;
  watch->output_index = output_index;
  rc.processes[process_id] = watch;
  int64_t rid = rc.next_id++;
  sr.active_conn = conn;
  sr.active_process = process_id;
  registry_.Send(conn, json{{"id", rid},
                            {"method", "process/start"},
                            {"params",
                             {{"processId", process_id},
                              {"argv", {"/bin/bash", "-c", command}},
                              {"cwd", FileUri(sr.workspace_directory)},
                              {"env", json::object()},
                              {"tty", false}}}});
  auto deadline = SteadyClock::now() + state_.options.command_timeout;
  bool terminated = false;
  auto conn_gone = [&] {
    auto c = state_.connections.find(conn);
    return c == state_.connections.end() || c->second.gone;
  };
  // Wait for the start response, then for process/closed.
  json start_error;
  state_.cv.wait_until(lock, deadline, [&] {
    auto c = state_.connections.find(conn);
    if (c == state_.connections.end() || c->second.gone || state_.stopping) {
      return true;
    }
    auto r = c->second.responses.find(rid);
    if (r == c->second.responses.end()) {
      return false;
    }
    if (r->second.contains("error")) {
      start_error = r->second["error"];
    }
    c->second.responses.erase(r);
    return true;
  });
  while (start_error.is_null() && !watch->closed && !conn_gone() && !state_.stopping) {
    if ((sr.cancel_requested || SteadyClock::now() >= deadline) && !terminated) {
      terminated = true;
      TerminateActiveLocked(sr);
      deadline = SteadyClock::now() + 5s;
    }
    if (terminated && SteadyClock::now() >= deadline) {
      break;
    }
    state_.cv.wait_until(lock,
                         terminated ? deadline : std::min(deadline, SteadyClock::now() + 100ms));
  }
  sr.active_conn = 0;
  sr.active_process.clear();
  if (auto c = state_.connections.find(conn); c != state_.connections.end()) {
    c->second.processes.erase(process_id);
  }

  std::sort(watch->chunks.begin(), watch->chunks.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [seq, bytes] : watch->chunks) {
    out.output += bytes;
  }
  out.exit_code = watch->exit_code;
  if (!start_error.is_null()) {
    out.output = start_error.value("message", std::string("process/start failed"));
    out.status = "failed";
  } else if (sr.cancel_requested) {
    out.status = "incomplete";
  } else if (terminated) {
    out.status = "failed";
    out.output += "\n[sbx-emulator: command timed out and was terminated]";
  } else if (!watch->closed) {
    out.status = "failed";
    out.output += "\nexec-server transport disconnected";
  } else {
    out.status = "completed";
  }
  return out;
}

}  // namespace sbx::emulator::internal::openai
