// Wire format of the OpenAI Agents API (reference/openai-agents-api.md §1.3–§1.6, §2.1, §2.3):
// JSON bodies to and from the structs of agents_api.h. Pure functions, no I/O; thread-safe.
//
// Decoding is forward-compatible: unknown fields are ignored, unknown enum values map to
// k*Unknown with the raw string kept, null means absent. A body that is not JSON, or a known
// field of the wrong JSON type, is kInternal ("the server sent something we cannot read") naming
// the field path and quoting a short excerpt of the body. The Encode* functions of server-side
// shapes (EncodeSession, EncodeEnvironment, EncodeSessionEvent) exist for fakes and round-trip
// tests; they write every modelled field.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "controller/cloud/openai/agents_api.h"

namespace sbx::controller::openai {

// Request bodies.
std::string EncodeCreateSessionRequest(const CreateSessionRequest& request);
// {"agent": {"model": …, "instructions": …}} for POST /agents/sessions/{id}.
std::string EncodeUpdateSessionAgentRequest(const std::string& model,
                                            const std::string& instructions);
// {"events":[…]}: user messages as agent.session.input.message, cancels as
// agent.session.input.cancel.
std::string EncodeInputEvents(const std::vector<InputEvent>& events);
// Query string for GET /agents/sessions ("?limit=…&after=…"), "" when nothing is set.
std::string EncodeListSessionsQuery(const ListSessionsParams& params);
// Query string for the turn and item lists ("?limit=…&after=…&order=…"), "" when nothing is set.
std::string EncodeListQuery(const ListParams& params);

// Response bodies.
StatusOr<Session> DecodeSession(std::string_view body);
StatusOr<SessionPage> DecodeSessionPage(std::string_view body);
StatusOr<Environment> DecodeEnvironment(std::string_view body);
// Turn (reference §2.3); kInternal without an `id`. `subagent_id` absent or null → root turn.
StatusOr<Turn> DecodeTurn(std::string_view body);
// List envelopes {object:"list", data, has_more, first_id, last_id}; null ids → "".
StatusOr<TurnPage> DecodeTurnPage(std::string_view body);
// Item; kInternal without an `id`. An unknown `type` is ItemType::kOther, not an error.
StatusOr<Item> DecodeItem(std::string_view body);
StatusOr<ItemPage> DecodeItemPage(std::string_view body);
// {"id","object":"agent.session.deleted","deleted":true} → OK; deleted:false → kInternal.
Status DecodeSessionDeleted(std::string_view body);

// One SSE `data:` payload of the session event stream. kInternal unless it is a JSON object
// with a string `type`.
StatusOr<SessionEvent> DecodeSessionEvent(std::string_view data);
EventKind ClassifyEventType(std::string_view type);

// Server-side shapes, for fakes and tests.
std::string EncodeSession(const Session& session);
std::string EncodeEnvironment(const Environment& environment);
std::string EncodeTurn(const Turn& turn);
// A kOther item is written with its type_raw and the common fields only.
std::string EncodeItem(const Item& item);
std::string EncodeTurnPage(const TurnPage& page);
std::string EncodeItemPage(const ItemPage& page);
// Writes the fields of `event` that its kind carries (not raw_json).
std::string EncodeSessionEvent(const SessionEvent& event);
StatusOr<std::vector<InputEvent>> DecodeInputEvents(std::string_view body);

}  // namespace sbx::controller::openai
