# Per-worker timeline of an sbxd convergence, from sbxd's JSON debug log (`--log-level debug
# --log-format json`): the "timeline" lines the reconcilers' milestones write
# (controller/reconcilers/milestones.h), e.g.
#   {"ts":"2026-12-01T07:00:00.123Z","level":"debug","event":"timeline","object":"AgentWorker/default/aw-001","step":"ready"}
# Joins a worker's Sandbox and AgentWorker by name (the inline template's Sandbox is named after
# its worker) and prints one JSON object: for each step of
#   apply → create_sent → created → running_observed → session_created → launch_sent
#   → launch_answered → connected_seen → ready
# the p50/p90/max of its duration over the workers, in seconds, and the same for the whole way
# (apply → ready). Only the first occurrence of a step per worker counts, but for the *_sent
# steps until the step after them: a call whose wait for its pacing token was given back to the
# work queue (issue #30) logs its *_sent again when its reconcile comes back and sends it.
#   awk -v start=SECONDS_OF_DAY_UTC -f bench/timeline.awk sbxd.log
# (`start`: when `sbxctl apply` began, as seconds since midnight UTC: `date -u +%s.%N` mod 86400.)
function sod(ts,   t, h, m, s) {
  t = substr(ts, index(ts, "T") + 1)
  h = substr(t, 1, 2) + 0; m = substr(t, 4, 2) + 0; s = substr(t, 7) + 0
  return h * 3600 + m * 60 + s
}
function field(line, key,   i, rest) {
  i = index(line, "\"" key "\":\"")
  if (i == 0) return ""
  rest = substr(line, i + length(key) + 4)
  return substr(rest, 1, index(rest, "\"") - 1)
}
function sort(a, n,   i, j, v) {
  for (i = 2; i <= n; i++) { v = a[i]; for (j = i - 1; j >= 1 && a[j] > v; j--) a[j + 1] = a[j]; a[j + 1] = v }
}
function q(a, n, p,   k) {
  k = int(p * (n - 1) + 0.5) + 1
  return a[k]
}
function stat(name, from, to,   w, n, d, v) {
  n = 0
  for (w in workers) {
    if ((w, from) in at && (w, to) in at) { d = at[w, to] - at[w, from]; if (d < -43200) d += 86400; v[++n] = d }
  }
  if (n == 0) return sprintf("\"%s\":{}", name)
  sort(v, n)
  return sprintf("\"%s\":{\"n\":%d,\"p50\":%.3f,\"p90\":%.3f,\"max\":%.3f}", name, n, q(v, n, 0.5), q(v, n, 0.9), v[n])
}
/"event":"timeline"/ {
  obj = field($0, "object"); step = field($0, "step"); ts = field($0, "ts")
  n = split(obj, parts, "/"); w = parts[n]
  workers[w] = 1
  if (!((w, step) in at) || (step ~ /_sent$/ && !((w, after[step]) in at))) at[w, step] = sod(ts)
}
BEGIN { after["create_sent"] = "created"; after["launch_sent"] = "launch_answered" }
END {
  for (w in workers) at[w, "apply"] = start
  steps = "apply create_sent created running_observed session_created launch_sent launch_answered connected_seen ready"
  k = split(steps, s, " ")
  out = ""
  for (i = 1; i < k; i++) out = out (i > 1 ? "," : "") stat(s[i] "_to_" s[i + 1], s[i], s[i + 1])
  out = out "," stat("apply_to_ready", "apply", "ready")
  print "{" out "}"
}
