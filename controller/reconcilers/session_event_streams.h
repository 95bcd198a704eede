// SessionEventStreams: one SSE event stream per agent session (GET /agents/sessions/{id}/events,
// reference §2.2), shared by all the AgentTasks of that session's worker, each on its own
// std::jthread. It is how a task's log gets its live events and how a task learns that its turn
// ended, without polling:
//
//  * Watch(session, task) opens the session's stream if none is open and waits (up to
//    open_wait) until the service has accepted the subscription, then binds the task to it. The
//    AgentTask reconciler calls it BEFORE it POSTs the task's input (reference §2.2: subscribe
//    first so early events are not missed). A worker runs one task at a time, so a stream has
//    at most one bound task.
//  * Events of the bound task's turn go to its log through the TaskLogWriter: assistant text
//    deltas, command lines (item.added), command output deltas, command results with exit codes
//    and whole assistant messages (item.done), and the turn's outcome as a status line. The
//    task's turn is the first ROOT turn seen after binding that is not `previous_turn_id`.
//    Duplicate deliveries are dropped by event_id.
//  * The ROOT turn's terminal event (completed/failed/cancelled, reference §2.4) is recorded as
//    the task's outcome and the task is enqueued, so the reconciler finishes it at once. Subagent
//    turns, `agent.session.idle` and a closed stream never end a task. turn.created of the task's
//    turn enqueues it too (the reconciler records turnId and Running).
//  * A dropped stream (EOF, error, idle timeout) is reopened after the engine's Backoff; on
//    every open with a task bound, the recovery procedure of reference §2.6 runs on the stream's
//    thread while the new stream buffers: re-read the session's turns (to find the task's turn),
//    the turn's saved items (into the log, deduped by item id: no gap the saved items can fill,
//    no duplicates) and the turn (terminal → outcome, enqueue). The same happens on
//    agent.session.failed and on a stream `error` event.
//  * A stream with no bound task for idle_close is closed (thousands of idle workers hold no
//    streams); Stop() (or the destructor) closes all of them.
// What the reconciler reads back (Observe) is only a hint: after an sbxd restart nothing is in
// memory, and the reconciler reads the turn once itself (the same §2.6 procedure).
//
// Thread-safety: every public method may be called from any thread. The writer, enqueuer,
// clock and every AgentsApi passed to Watch must outlive this object (CloudClients keep their
// clients for their lifetime).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>

#include "controller/base/backoff.h"
#include "controller/base/clock.h"
#include "controller/cloud/openai/agents_api.h"
#include "controller/engine/source.h"
#include "controller/reconcilers/task_log_writer.h"

namespace sbx::controller {

struct SessionEventStreamsOptions {
  // A stream no task has been bound to for this long is closed.
  std::chrono::milliseconds idle_close{std::chrono::seconds(60)};
  // How long Watch waits for a new stream to be accepted before it gives up (the task then
  // falls back to polling until the stream opens).
  std::chrono::milliseconds open_wait{std::chrono::seconds(5)};
  // Reconnect delays after a dropped or refused stream (the engine's Backoff).
  BackoffPolicy reconnect{std::chrono::seconds(1), std::chrono::seconds(30), 0.2};
};

class SessionEventStreams {
 public:
  // The task a stream logs for.
  struct Binding {
    api::ObjectKey task;
    std::string uid;
    std::string previous_turn_id;  // the session's newest root turn before the task's
    std::string turn_id;           // the task's turn once known ("" before)
  };
  // What the stream saw of the bound task's turn.
  struct View {
    bool open = false;                    // the stream is open now
    std::string turn_id;                  // "" until turn.created (or a recovery) named it
    std::optional<openai::Turn> outcome;  // the root turn's terminal state, once seen
  };
  struct WatchResult {
    bool open = false;   // the stream is open (events of the task's turn are being logged)
    bool bound = false;  // this call bound the task (it was not bound before)
  };

  SessionEventStreams(TaskLogWriter& log, Enqueuer& enqueuer, Clock& clock,
                      SessionEventStreamsOptions options = {});
  ~SessionEventStreams();
  SessionEventStreams(const SessionEventStreams&) = delete;
  SessionEventStreams& operator=(const SessionEventStreams&) = delete;

  // Opens the session's stream if needed, waits for it to open (at most open_wait, or until
  // `stop`), and binds `binding` to it unless that task is bound already (a different task
  // replaces the binding: the worker moved on). Safe to call on every reconcile.
  WatchResult Watch(openai::AgentsApi& agents, const std::string& session_id, Binding binding,
                    std::stop_token stop = {});
  // The bound task's view; nullopt when `task_uid` is not bound to the session's stream.
  std::optional<View> Observe(const std::string& session_id, const std::string& task_uid);
  // The reconciler found the task's turn by polling: the stream takes it from here.
  void SetTurn(const std::string& session_id, const std::string& task_uid,
               const std::string& turn_id);
  // The session's newest root turn, when this stream saw it created and ended and has been
  // open ever since (so no root turn came after it unseen): what a task about to be submitted
  // needs as its previous_turn_id, without a GET of the session's turns (issue #30). nullopt:
  // not known that way (no stream, reopened since, or its turn still running).
  std::optional<std::string> NewestRootTurn(const std::string& session_id);
  // The task is finished (or gone): unbinds it; the stream closes after idle_close unless
  // another task binds.
  void Unwatch(const std::string& session_id, const std::string& task_uid);

  TaskLogWriter& log() { return log_; }
  int open_streams() const;      // streams open now (sbx_session_streams_open)
  int64_t opened_total() const;  // subscriptions accepted since start, reconnects included
  void Stop();

 private:
  struct Stream;
  void Run(Stream& s, std::stop_token stop);
  void OnEvent(Stream& s, const openai::SessionEvent& event, std::stop_token stop);
  // Reference §2.6 for the bound task, on the stream's thread.
  void Recover(Stream& s, std::stop_token stop);
  // Records the outcome (once), logs it and enqueues the task.
  void Conclude(Stream& s, const Binding& b, const openai::Turn& turn);
  void Janitor(std::stop_token stop);
  void Reap(bool all);

  TaskLogWriter& log_;
  Enqueuer& enqueuer_;
  Clock& clock_;
  const SessionEventStreamsOptions options_;
  const Backoff reconnect_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;                          // a stream opened or closed
  std::map<std::string, std::shared_ptr<Stream>> streams_;  // by session id. Guarded by mu_.
  bool stopped_ = false;                                    // Guarded by mu_.
  std::atomic<int> open_{0};
  std::atomic<int64_t> opened_total_{0};
  std::jthread janitor_;
};

// The task's turn (reference §2.6): the oldest ROOT turn of the session newer than
// `previous_turn_id` among the 20 newest (a worker runs one turn at a time, so it is among
// them); "" when there is none yet.
api::StatusOr<std::string> FindTaskTurn(openai::AgentsApi& agents, const std::string& session_id,
                                        const std::string& previous_turn_id, std::stop_token stop);

}  // namespace sbx::controller
