#include "controller/reconcilers/session_event_streams.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace sbx::controller {
namespace {

using LogKind = Store::TaskLogKind;
using openai::EventKind;

// How many recent event ids a stream remembers to drop duplicate deliveries.
constexpr size_t kSeenEvents = 4096;

}  // namespace

api::StatusOr<std::string> FindTaskTurn(openai::AgentsApi& agents, const std::string& session_id,
                                        const std::string& previous_turn_id, std::stop_token stop) {
  openai::ListParams recent;
  recent.limit = 20;
  recent.order = openai::ListOrder::kDesc;
  ASSIGN_OR_RETURN(openai::TurnPage page, agents.ListTurns(session_id, recent, stop));
  std::string ours;
  for (const openai::Turn& turn : page.data) {
    if (turn.id == previous_turn_id) {
      break;
    }
    if (turn.is_root()) {
      ours = turn.id;
    }
  }
  return ours;
}

struct SessionEventStreams::Stream {
  std::string session_id;
  openai::AgentsApi* agents = nullptr;
  // Guarded by SessionEventStreams::mu_.
  bool open = false;
  std::optional<Binding> binding;
  std::optional<openai::Turn> outcome;  // of the bound task's turn
  Clock::SteadyTime idle_since{};
  // The newest root turn seen created since the stream (re)opened, and whether its end was seen.
  std::string newest_root;
  bool newest_ended = false;
  // The stream's own thread only.
  std::set<std::string> seen;
  std::deque<std::string> seen_order;
  std::jthread thread;
};

SessionEventStreams::SessionEventStreams(TaskLogWriter& log, Enqueuer& enqueuer, Clock& clock,
                                         SessionEventStreamsOptions options)
    : log_(log),
      enqueuer_(enqueuer),
      clock_(clock),
      options_(options),
      reconnect_(options.reconnect) {
  janitor_ = std::jthread([this](std::stop_token stop) { Janitor(stop); });
}

SessionEventStreams::~SessionEventStreams() { Stop(); }

void SessionEventStreams::Stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (janitor_.joinable()) {
    janitor_.request_stop();
    janitor_.join();
  }
  Reap(/*all=*/true);
}

SessionEventStreams::WatchResult SessionEventStreams::Watch(openai::AgentsApi& agents,
                                                            const std::string& session_id,
                                                            Binding binding, std::stop_token stop) {
  std::unique_lock lock(mu_);
  if (stopped_) {
    return {};
  }
  std::shared_ptr<Stream>& slot = streams_[session_id];
  if (slot == nullptr) {
    slot = std::make_shared<Stream>();
    slot->session_id = session_id;
    slot->agents = &agents;
    slot->idle_since = clock_.Steady();
    Stream* raw = slot.get();  // the map owns it; Reap joins the thread before dropping it
    slot->thread = std::jthread([this, raw](std::stop_token own) { Run(*raw, own); });
  }
  std::shared_ptr<Stream> s = slot;
  cv_.wait_for(lock, stop, options_.open_wait, [&] { return s->open || stopped_; });
  WatchResult result;
  result.open = s->open;
  if (!s->binding || s->binding->uid != binding.uid) {
    s->binding = std::move(binding);
    s->outcome.reset();
    result.bound = true;
  } else if (s->binding->turn_id.empty() && !binding.turn_id.empty()) {
    s->binding->turn_id = binding.turn_id;
  }
  return result;
}

std::optional<SessionEventStreams::View> SessionEventStreams::Observe(const std::string& session_id,
                                                                      const std::string& task_uid) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(session_id);
  if (it == streams_.end() || !it->second->binding || it->second->binding->uid != task_uid) {
    return std::nullopt;
  }
  const Stream& s = *it->second;
  return View{s.open, s.binding->turn_id, s.outcome};
}

void SessionEventStreams::SetTurn(const std::string& session_id, const std::string& task_uid,
                                  const std::string& turn_id) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(session_id);
  if (it != streams_.end() && it->second->binding && it->second->binding->uid == task_uid &&
      it->second->binding->turn_id.empty()) {
    it->second->binding->turn_id = turn_id;
  }
}

std::optional<std::string> SessionEventStreams::NewestRootTurn(const std::string& session_id) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(session_id);
  if (it == streams_.end() || !it->second->open || it->second->newest_root.empty() ||
      !it->second->newest_ended) {
    return std::nullopt;
  }
  return it->second->newest_root;
}

void SessionEventStreams::Unwatch(const std::string& session_id, const std::string& task_uid) {
  std::lock_guard lock(mu_);
  auto it = streams_.find(session_id);
  if (it != streams_.end() && it->second->binding && it->second->binding->uid == task_uid) {
    it->second->binding.reset();
    it->second->outcome.reset();
    it->second->idle_since = clock_.Steady();
  }
}

int SessionEventStreams::open_streams() const { return open_.load(); }

int64_t SessionEventStreams::opened_total() const { return opened_total_.load(); }

void SessionEventStreams::Run(Stream& s, std::stop_token stop) {
  int failures = 0;
  while (!stop.stop_requested()) {
    openai::StreamCallbacks callbacks;
    callbacks.on_open = [&] {
      bool bound = false;
      {
        std::lock_guard lock(mu_);
        s.open = true;
        s.newest_root.clear();  // what came while it was closed is unknown
        bound = s.binding.has_value();
      }
      ++open_;
      ++opened_total_;
      cv_.notify_all();
      failures = 0;
      if (bound) {
        // Reopened (or opened late) under a task: what the gap missed is in the saved items.
        Recover(s, stop);
      }
    };
    callbacks.on_event = [&](const openai::SessionEvent& event) {
      OnEvent(s, event, stop);
      return true;
    };
    (void)s.agents->StreamEvents(s.session_id, callbacks, stop);
    {
      std::lock_guard lock(mu_);
      if (s.open) {
        s.open = false;
        --open_;
      }
    }
    cv_.notify_all();
    if (stop.stop_requested()) {
      break;
    }
    // Any end is a drop: the service documents no stream lifetime (reference §2.2), and the
    // recovery on the next open fills what the gap missed.
    ++failures;
    if (!clock_.SleepUntil(clock_.Steady() + reconnect_.Delay(failures), stop)) {
      break;
    }
  }
}

void SessionEventStreams::OnEvent(Stream& s, const openai::SessionEvent& e, std::stop_token stop) {
  if (!e.event_id.empty()) {
    if (!s.seen.insert(e.event_id).second) {
      return;  // a duplicate delivery (reference §2.6: dedupe by event_id)
    }
    s.seen_order.push_back(e.event_id);
    if (s.seen_order.size() > kSeenEvents) {
      s.seen.erase(s.seen_order.front());
      s.seen_order.pop_front();
    }
  }
  Binding b;
  bool concluded = false;
  {
    std::lock_guard lock(mu_);
    if (e.turn && e.turn->is_root()) {
      if (e.kind == EventKind::kTurnCreated) {
        s.newest_root = e.turn->id;
        s.newest_ended = false;
      } else if (e.turn->id == s.newest_root && openai::IsRootTurnTerminal(e)) {
        s.newest_ended = true;
      }
    }
    if (!s.binding) {
      return;
    }
    b = *s.binding;
    concluded = s.outcome.has_value();
  }
  switch (e.kind) {
    case EventKind::kSessionFailed:
    case EventKind::kError:
      // The turn may have ended without its own event reaching us: read it.
      Recover(s, stop);
      return;
    case EventKind::kTurnCreated:
    case EventKind::kTurnInProgress:
    case EventKind::kTurnCompleted:
    case EventKind::kTurnFailed:
    case EventKind::kTurnCancelled: {
      if (!e.turn || !e.turn->is_root()) {
        return;  // a subagent's turn never ends the task (reference §2.4)
      }
      if (b.turn_id.empty()) {
        if (e.turn->id == b.previous_turn_id) {
          return;
        }
        {
          std::lock_guard lock(mu_);
          if (s.binding && s.binding->uid == b.uid && s.binding->turn_id.empty()) {
            s.binding->turn_id = e.turn->id;
          }
        }
        b.turn_id = e.turn->id;
        enqueuer_.Enqueue(b.task);  // the reconciler records turnId and Running
      }
      if (e.turn->id == b.turn_id && openai::IsRootTurnTerminal(e)) {
        openai::Turn turn = *e.turn;
        if (!turn.usage && e.usage) {
          turn.usage = e.usage;
        }
        Conclude(s, b, turn);
      }
      return;
    }
    default:
      break;
  }
  if (b.turn_id.empty() || concluded ||
      (e.turn_id.has_value() && !e.turn_id->empty() && *e.turn_id != b.turn_id)) {
    return;
  }
  std::vector<Store::TaskLogEntry> entries;
  switch (e.kind) {
    case EventKind::kItemAdded:
      if (e.item && e.item->type == openai::ItemType::kCommandExecution) {
        entries.push_back(TaskLogLine(LogKind::kCommand, "$ " + e.item->command, e.item->id));
      }
      break;
    case EventKind::kItemDone:
      if (e.item) {
        entries = ItemLogEntries({*e.item}, /*final=*/true);
      }
      break;
    case EventKind::kOutputTextDelta:
      entries.push_back(TaskLogLine(LogKind::kAssistantDelta, e.text, e.item_id));
      break;
    case EventKind::kCommandOutputDelta:
      entries.push_back(TaskLogLine(LogKind::kOutputDelta, e.text, e.item_id));
      break;
    default:
      break;
  }
  if (!entries.empty()) {
    (void)log_.Append(b.task, b.uid, entries);  // the log is information
  }
}

void SessionEventStreams::Recover(Stream& s, std::stop_token stop) {
  Binding b;
  {
    std::lock_guard lock(mu_);
    if (!s.binding || s.outcome) {
      return;
    }
    b = *s.binding;
  }
  if (b.turn_id.empty()) {
    api::StatusOr<std::string> found =
        FindTaskTurn(*s.agents, s.session_id, b.previous_turn_id, stop);
    if (!found.ok() || found->empty()) {
      return;  // no turn yet: its events are still to come on this stream
    }
    {
      std::lock_guard lock(mu_);
      if (!s.binding || s.binding->uid != b.uid) {
        return;
      }
      if (s.binding->turn_id.empty()) {
        s.binding->turn_id = *found;
      }
      b.turn_id = s.binding->turn_id;
    }
    enqueuer_.Enqueue(b.task);
  }
  // The turn first, then its items: read after a terminal turn, the items are final.
  api::StatusOr<openai::Turn> turn = s.agents->GetTurn(s.session_id, b.turn_id, stop);
  const bool over = turn.ok() && openai::IsTerminal(turn->status);
  api::StatusOr<std::vector<openai::Item>> items =
      s.agents->ListAllTurnItems(s.session_id, b.turn_id, {.order = openai::ListOrder::kAsc}, stop);
  if (items.ok()) {
    (void)log_.Append(b.task, b.uid, ItemLogEntries(*items, over));
  }
  if (over) {
    Conclude(s, b, *turn);
  }
}

void SessionEventStreams::Conclude(Stream& s, const Binding& b, const openai::Turn& turn) {
  {
    std::lock_guard lock(mu_);
    if (!s.binding || s.binding->uid != b.uid || s.outcome) {
      return;
    }
    s.outcome = turn;
  }
  std::string line = "turn " + turn.id + " " + std::string(openai::TurnStatusName(turn.status));
  if (turn.error && !turn.error->code.empty()) {
    line += ": " + turn.error->code + " " + turn.error->message;
  }
  (void)log_.Append(b.task, b.uid, {TaskLogLine(LogKind::kStatus, std::move(line))});
  enqueuer_.Enqueue(b.task);
}

void SessionEventStreams::Janitor(std::stop_token stop) {
  const auto period = std::clamp<std::chrono::milliseconds>(
      options_.idle_close / 4, std::chrono::milliseconds(50), std::chrono::seconds(5));
  while (clock_.SleepUntil(clock_.Steady() + period, stop)) {
    Reap(/*all=*/false);
  }
}

void SessionEventStreams::Reap(bool all) {
  std::vector<std::shared_ptr<Stream>> doomed;
  {
    std::lock_guard lock(mu_);
    const auto now = clock_.Steady();
    for (auto it = streams_.begin(); it != streams_.end();) {
      const Stream& s = *it->second;
      if (all || (!s.binding && now - s.idle_since >= options_.idle_close)) {
        doomed.push_back(std::move(it->second));
        it = streams_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& s : doomed) {
    s->thread.request_stop();  // ends StreamEvents (kCancelled) or the reconnect wait
  }
  for (auto& s : doomed) {
    s->thread.join();
  }
}

}  // namespace sbx::controller
