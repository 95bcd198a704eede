// `sbxctl describe KIND [NAME…] | KIND/NAME…`: a human summary of objects, like kubectl
// describe — metadata, spec (YAML), status fields, a Conditions table and the Events of the
// object. Without a name, describes every object of the kind in the namespace. An AgentTask's
// status shows its phase, worker, session and turn, timings, the result message, the error code
// and message, the token usage and its artifacts (path, bytes, sha256 or the error). Not
// thread-safe.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "cli/commands/command_context.h"

namespace CLI {
class App;
}  // namespace CLI

namespace sbx::cli {

struct DescribeCommandOptions {
  std::vector<std::string> args;
};

int RunDescribe(CommandContext& ctx, const DescribeCommandOptions& options);
void AddDescribeCommand(CLI::App& app, CommandContext& ctx);

// Objects a description lists besides the object itself: an AgentPool's replicas and the tasks
// waiting for one.
struct Related {
  std::vector<api::Object> replicas;
  std::vector<api::Object> queued;
};

// Writes the description of one object, what is related to it, and its events.
void Describe(std::ostream& out, const api::Object& object,
              const std::vector<controller::Store::Event>& events,
              std::chrono::system_clock::time_point now, const Related& related = {});

}  // namespace sbx::cli
