#include "controller/reconcilers/task_usage.h"

#include <cstdint>
#include <string>

namespace sbx::controller {
namespace {

int64_t Detail(const openai::Usage& u, const std::string& name) {
  auto it = u.details.find(name);
  return it == u.details.end() ? 0 : it->second;
}

}  // namespace

void AddUsage(api::TaskUsageTotals& totals, const openai::Usage& turn) {
  totals.input_tokens += turn.input_tokens;
  totals.cached_input_tokens += Detail(turn, "input_tokens_details.cached_tokens");
  totals.output_tokens += turn.output_tokens;
  totals.reasoning_tokens += Detail(turn, "output_tokens_details.reasoning_tokens");
}

}  // namespace sbx::controller
