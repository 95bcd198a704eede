// The boot marker, shared by the Sandbox and AgentWorker reconcilers: a random id in a file
// outside /home/sandbox-agent. A stop wipes everything but the home dir, so a new id means the
// sandbox booted again (its processes are gone, setup must run again). Whichever exec-sync needs
// the marker first writes it; the first writer wins, so two racing scripts agree on the id.
// Constants only; thread-safe.
#pragma once

namespace sbx::controller::reconcilers_internal {

inline constexpr char kDefaultBootMarker[] = "/tmp/.sbx-boot-id";

// Shell fragment: makes sure the file named by the shell variable `m` holds a boot id. An empty
// file (a write cut short) is replaced. The AgentWorker's scripts/executor.sh, a complete file,
// holds the same lines: keep the two alike.
inline constexpr char kEnsureBootMarkerSh[] =
    R"sh(if [ ! -s "$m" ]; then
  { read -r u < /proc/sys/kernel/random/uuid || u=$(date +%s%N); } 2>/dev/null
  printf '%s\n' "$u" > "$m.$$" &&
    { ln "$m.$$" "$m" 2>/dev/null || [ -s "$m" ] || mv -f "$m.$$" "$m"; }
  rm -f "$m.$$"
fi
)sh";

}  // namespace sbx::controller::reconcilers_internal
