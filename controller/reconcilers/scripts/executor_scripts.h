// The scripts the AgentWorker and AgentTask reconcilers run inside a sandbox, each a complete
// file beside this header (executor.sh, stop_executor.sh, collect_file.sh) whose top states its
// positional and environment contract. The build embeds the files' text (cmake/EmbedText.cmake
// generates the definitions), so what runs is exactly what is in the tree. Constants only;
// thread-safe.
#pragma once

#include <string_view>

namespace sbx::controller::scripts {

// executor.sh: probes ($0 = sbx-probe) or launches ($0 = sbx-launch) the executor and reports.
extern const std::string_view kExecutor;
// stop_executor.sh: stops the executor of the running boot ($0 = sbx-stop).
extern const std::string_view kStopExecutor;
// collect_file.sh: reads one AgentTask collect path, size-capped, as base64 ($0 = sbx-collect).
extern const std::string_view kCollectFile;

}  // namespace sbx::controller::scripts
