// What a task consumed (DESIGN §8.2, issue #28): the token usage of its root turns, summed over
// its attempts into AgentTask.status.usage by the AgentTask reconciler as each attempt ends.
//
// The service's TokenUsage (reference §2.3): {input_tokens, input_tokens_details.cached_tokens,
// output_tokens, output_tokens_details.reasoning_tokens, total_tokens}. Cached tokens are part of
// the input, reasoning tokens part of the output; details the service leaves out count 0.
//
// Pure functions; thread-safe.
#pragma once

#include "api/resources.h"
#include "controller/cloud/openai/agents_api.h"

namespace sbx::controller {

// Adds one turn's usage to `totals`.
void AddUsage(api::TaskUsageTotals& totals, const openai::Usage& turn);

}  // namespace sbx::controller
