#!/usr/bin/env bash
# Baseline for bench/converge.sh: the sequential, application-managed flow a script would run
# without sbx, one worker after the other, with curl:
#   create session (self_hosted) → create sandbox → poll GET until RUNNING (every 250 ms)
#   → exec-sync launch of the executor (detached, CODEX_API_KEY in envs)
#   → poll the environment until `connected` (what sbx's AgentWorker Ready also waits for).
# 429 answers are retried after their Retry-After (as any sane script would). Uses the same
# emulator set-up as converge.sh (latency, PENDING delay, rate limit), started here.
#   bench/baseline_script.sh 10 100
#   SBX_BENCH_LATENCY=20ms SBX_BENCH_RPS=20 bench/baseline_script.sh 10
# Prints JSON lines. A benchmark, not a test: needs curl, awk, sed (no python: see lib.sh).
source "$(dirname "$0")/lib.sh"

sizes=("$@")
((${#sizes[@]})) || sizes=(10 100)
latency=${SBX_BENCH_LATENCY:-20ms}
rps=${SBX_BENCH_RPS:-20}

bench_build
machine_line
trap bench_cleanup EXIT

# call METHOD URL [BODY] — prints the body; retries 429/503 after Retry-After (default 1 s).
call() {
  local method=$1 url=$2 body=${3:-}
  local auth
  if [[ "$url" == "$openai_url"* ]]; then
    auth=(-H "Authorization: Bearer sk-bench-app" -H "OpenAI-Beta: agents=v1")
  else
    auth=(-H "Authorization: Bearer dapi-bench")
  fi
  for _ in $(seq 1 200); do
    [[ -n "${SBX_BENCH_TRACE:-}" ]] && echo "$(date +%T.%N) $method $url" >&2
    local out
    out=$(curl -s -D "$bench_tmp/headers" -X "$method" "${auth[@]}" \
      -H "Content-Type: application/json" ${body:+-d "$body"} "$url")
    local code
    code=$(awk 'NR == 1 { print $2 }' "$bench_tmp/headers")
    if [[ "$code" == 429 || "$code" == 503 ]]; then
      local wait
      wait=$(awk 'tolower($1) == "retry-after:" { print $2 + 0 }' "$bench_tmp/headers")
      sleep "${wait:-1}"
      continue
    fi
    if [[ "$code" != 2* ]]; then
      echo "HTTP $code from $method $url: $out" >&2
      return 1
    fi
    printf '%s' "$out"
    return 0
  done
  return 1
}

# field KEY — the first string value of "KEY" in the JSON on stdin (flat, compact JSON).
field() { grep -o "\"$1\":\"[^\"]*\"" | head -n1 | sed 's/.*:"\(.*\)"/\1/'; }

for n in "${sizes[@]}"; do
  bench_tmp=$(mktemp -d /tmp/sbx-bench-baseline.XXXXXX)
  bench_start_emulator --openai-port 0 --pending-delay 1s --max-sandboxes 0 --rate-limit "$rps"
  curl -sf -X POST "$emu_url/_emulator/latency" -d "{\"endpoint\":\"*\",\"latency\":\"$latency\"}" >/dev/null
  reset_counters
  start=$(now)
  for i in $(seq -w 1 "$n"); do
    id="baseline-$i"
    session=$(call POST "$openai_url/agents/sessions" \
      '{"agent":{"model":"gpt-5-codex"},"environment":{"type":"self_hosted","workspace_directory":"/home/sandbox-agent"}}')
    environment=$(sed 's/.*"environment":{\([^}]*\)}.*/\1/' <<<"$session")
    env_id=$(field id <<<"$environment")
    remote=$(field remote_url <<<"$environment")
    call POST "$emu_url/api/2.0/sandboxes?sandbox_id=$id" \
      "{\"display_name\":\"baseline $i\",\"spec\":{\"compute\":{\"inactivity_timeout\":\"3600s\"}}}" >/dev/null
    until [[ "$(call GET "$emu_url/api/2.0/sandboxes/$id" | field state)" == SANDBOX_STATE_RUNNING ]]; do
      sleep 0.25
    done
    launch="mkdir -p /home/sandbox-agent/.exec; cd /home/sandbox-agent; setsid nohup codex exec-server --remote \"\$R\" --environment-id \"\$E\" > /home/sandbox-agent/.exec/log 2>&1 < /dev/null & echo launched"
    body="{\"cmd\":\"/bin/bash\",\"args\":[\"-c\",\"${launch//\"/\\\"}\"],\"envs\":{\"R\":\"$remote\",\"E\":\"$env_id\",\"CODEX_API_KEY\":\"sk-bench-executor\"},\"execution_timeout\":\"30s\"}"
    call POST "$emu_url/api/2.0/sandbox-exec/sandboxes/$id/exec-sync" "$body" >/dev/null
    until [[ "$(call GET "$openai_url/agents/environments/$env_id" | field status)" == connected ]]; do
      sleep 0.25
    done
  done
  elapsed=$(since "$start")
  echo "{\"n\":$n,\"flow\":\"baseline_script\",\"latency\":\"$latency\",\"rate_limit_rps\":$rps,\"seconds_to_all_connected\":$elapsed,\"calls\":$(counters)}"
  bench_cleanup
done
