// AgentsApi: the handlers of the OpenAI Agents API (beta) self-hosted session surface
// (reference/openai-agents-api.md §1, §2, §5, §6): sessions create/get/list/update/delete,
// POST …/events (input, cancel; held in the connection wait), GET …/events (SSE), turns, items
// and GET /v1/agents/environments/{id}. Each handler validates its request, then reads or
// writes the State; authentication, faults and routing are the Router's.
//
// Thread-safety: thread-safe (handlers take State::mu). Borrows the State and the TurnRunner,
// which must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "emulator/internal/http_server.h"
#include "emulator/openai/internal/api_error.h"
#include "emulator/openai/internal/state.h"
#include "emulator/openai/internal/turn_runner.h"

namespace sbx::emulator::internal::openai {

class AgentsApi {
 public:
  AgentsApi(State& state, TurnRunner& runner);

  HttpResponse CreateSession(const HttpRequest& req);
  HttpResponse GetSession(const std::string& id);
  HttpResponse UpdateSession(const std::string& id, const HttpRequest& req);
  HttpResponse DeleteSession(const std::string& id);
  HttpResponse ListSessions(const HttpRequest& req);
  // GET …/turns, …/turns/{id}, …/turns/{id}/items, …/items.
  HttpResponse Turns(const HttpRequest& req);
  HttpResponse GetEnvironment(const std::string& id);
  HttpResponse SendEvents(const std::string& id, const HttpRequest& req);
  // GET …/events: streams the session's events until it ends, the client goes or Stop().
  void StreamEvents(const std::string& id, HttpExchange& ex);

 private:
  // A page of `rows` (ascending by key) per the after/limit/order query parameters.
  HttpResponse Page(std::vector<std::pair<int64_t, json>> rows, const HttpRequest& req,
                    const std::function<std::optional<int64_t>(const std::string&)>& key_of);

  State& state_;
  TurnRunner& runner_;
};

}  // namespace sbx::emulator::internal::openai
