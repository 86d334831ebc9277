#!/usr/bin/env bash
# Drives the built pvllm-server with real clients (docs/server.md):
#   1. the official openai npm package against every endpoint, streaming
#      and not, and its errors, and structured output (response_format)
#      validated with ajv (tests/server/openai.test.mjs);
#   2. the chat page in Debian's headless Chromium through playwright-core:
#      a prompt typed and answered, a screenshot, the text checked against
#      the API's answer (tests/server/chat_page.mjs);
#   3. a loopback load test with wrk: 64 connections for
#      PVLLM_LOAD_SECONDS (default 30) s of streaming and whole chat and
#      text completions; no error and every response complete, with its
#      p50 and p99 latencies printed;
#   4. SIGTERM: the server drains and exits 0.
# The server serves the repository's stories260K with a chat template, an
# API key, and a writes log. Outputs (logs, the screenshot, the load
# figures as JSON) go to build/server-check/.
# Usage: scripts/server_check.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
build="$(cd "${1:-build}" && pwd)"
server="$build/tools/pvllm-server"
out="$build/server-check"
fail() { echo "server_check: FAIL: $*" >&2; exit 1; }
[ -x "$server" ] || fail "no $server (configure with go and golang-github-prometheus-client-golang-dev)"
for tool in node npm wrk; do command -v $tool >/dev/null || fail "no $tool"; done
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || fail "no Chromium at ${CHROMIUM:-/usr/bin/chromium}"
rm -rf "$out"
mkdir -p "$out/model"

# The clients and ajv, pinned (tests/server/package-lock.json).
clients="$build/server-clients"
mkdir -p "$clients"
if ! cmp -s tests/server/package-lock.json "$clients/package-lock.json" || [ ! -d "$clients/node_modules" ]; then
  cp tests/server/package.json tests/server/package-lock.json "$clients/"
  (cd "$clients" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
cp tests/server/*.mjs tests/server/load.lua "$clients/"

# stories260K with a chat template: the turns' texts, one after the other
# (a story model has no chat format; its continuation is real English).
cp models/stories260K/stories260K.bin models/stories260K/tok512.model "$out/model/"
printf '%s' '{% for m in messages %}{% if not loop.first %} {% endif %}{{ m.content }}{% endfor %}' \
  >"$out/model/chat_template.jinja"
export PVLLM_API_KEY="server-check-key"
export PVLLM_MODEL=stories260K
"$server" --model "$out/model/stories260K.bin" --served-model-name "$PVLLM_MODEL" --port 0 \
  --device cpu --max-concurrency 64 >"$out/server.out" 2>"$out/server.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
addr=""
for _ in $(seq 200); do
  addr="$(sed -n 's/.*"address":"\([^"]*\)".*"msg":"serving".*/\1/p' "$out/server.log")"
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$out/server.log" >&2; fail "the server exited at start"; }
  sleep 0.1
done
[ -n "$addr" ] || fail "the server did not listen"
export PVLLM_SERVER_URL="http://$addr"
echo "server_check: serving at $PVLLM_SERVER_URL"

echo "server_check: 1. the openai package"
(cd "$clients" && node --test openai.test.mjs) >"$out/openai.log" 2>&1 ||
  { cat "$out/openai.log" >&2; fail "the openai client tests"; }
grep -E '^# (tests|pass|fail)' "$out/openai.log" | tr '\n' ' '
echo

echo "server_check: 2. the chat page in headless Chromium"
(cd "$clients" && node chat_page.mjs "$PVLLM_SERVER_URL" "$PVLLM_API_KEY" "$out/chat_page.png") ||
  fail "the chat page"
[ "$(stat -c %s "$out/chat_page.png")" -gt 10000 ] || fail "the screenshot is nearly empty"

seconds="${PVLLM_LOAD_SECONDS:-30}"
echo "server_check: 3. wrk, 64 connections for $seconds s"
wrk -t 2 -c 64 -d "${seconds}s" --timeout 30s -s "$clients/load.lua" "$PVLLM_SERVER_URL" \
  >"$out/wrk.log" 2>&1 || { cat "$out/wrk.log" >&2; fail "wrk"; }
tail -n 1 "$out/wrk.log" >"$out/load.json"
python3 - "$out/load.json" <<'PY' || { cat "$out/wrk.log" >&2; fail "the load test"; }
import json, sys
r = json.load(open(sys.argv[1]))
print(f"server_check: {r['requests']} requests in {r['seconds']:.1f} s "
      f"({r['requests_per_second']:.1f}/s), {r['failed']} failed, {r['incomplete']} incomplete, "
      f"{r['socket_errors']} socket errors; latency p50 {r['latency_ms']['p50']:.1f} ms, "
      f"p90 {r['latency_ms']['p90']:.1f} ms, p99 {r['latency_ms']['p99']:.1f} ms, "
      f"max {r['latency_ms']['max']:.1f} ms")
sys.exit(0 if r["requests"] > 0 and r["failed"] == 0 and r["incomplete"] == 0
         and r["socket_errors"] == 0 else 1)
PY
# The server's own view of the load: its latency histograms' quantiles
# (interpolated within buckets, as Prometheus' histogram_quantile does).
python3 - "$PVLLM_SERVER_URL/metrics" "$out/load_metrics.json" <<'PY' || fail "reading /metrics"
import json, re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1]).read().decode()
def value(name):
    m = re.search("^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")
out = {}
for metric in ["time_to_first_token", "time_per_output_token", "e2e_request_latency"]:
    name = f"pvllm_{metric}_seconds"
    rows = {}
    for ep, le, v in re.findall("^" + name + r'_bucket\{endpoint="([a-z]+)",le="([^"]+)"\} (\S+)$',
                                text, re.M):
        rows.setdefault(ep, []).append((float("inf") if le == "+Inf" else float(le), float(v)))
    for ep, buckets in rows.items():
        total = buckets[-1][1]
        def q(p):
            rank, prev_le, prev_c = p * total, 0.0, 0.0
            for le, c in buckets:
                if c >= rank:
                    if le == float("inf"):
                        return prev_le
                    return prev_le + (le - prev_le) * (rank - prev_c) / max(c - prev_c, 1e-12)
                prev_le, prev_c = le, c
        out[f"{metric}_{ep}"] = {"count": total, "p50_ms": 1e3 * q(0.5), "p99_ms": 1e3 * q(0.99)}
out["num_requests_running"] = value("pvllm_num_requests_running")
out["kv_blocks_used"] = value('pvllm_kv_blocks{state="used"}')
json.dump(out, open(sys.argv[2], "w"), indent=1)
for k, v in out.items():
    if isinstance(v, dict):
        print(f"server_check: {k}: {int(v['count'])} choices, p50 {v['p50_ms']:.2f} ms, "
              f"p99 {v['p99_ms']:.2f} ms")
print(f"server_check: after the load: {out['num_requests_running']:.0f} running, "
      f"{out['kv_blocks_used']:.0f} KV blocks used")
sys.exit(0 if out["num_requests_running"] == 0 and out["kv_blocks_used"] == 0 else 1)
PY

echo "server_check: 4. SIGTERM"
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
trap - EXIT
[ "$status" -eq 0 ] || fail "the server exited $status after SIGTERM"
grep -q '"msg":"stopped"' "$out/server.log" || fail "no stopped line in the log"
lines="$(grep -c '"msg":"request"' "$out/server.log")"
python3 - "$out/server.log" <<'PY' || fail "the log is not one JSON object per line"
import json, sys
for line in open(sys.argv[1]):
    json.loads(line)
PY
echo "server_check: OK ($lines requests logged as JSON lines; outputs in $out)"
