-- wrk script for scripts/server_check.sh: every connection sends
-- streaming and non-streaming chat and text completions in turn; a
-- response counts as failed unless it is a 200 whose body is complete (a
-- stream ends with data: [DONE], a whole answer carries a finish_reason).
-- done() prints one JSON line with the counts and latency percentiles.
local bodies = {
  '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":24,"stream":true,"stream_options":{"include_usage":true}}',
  '{"prompt":"Lily and Tom","max_tokens":24}',
  '{"messages":[{"role":"user","content":"The cat"}],"max_tokens":24}',
  '{"prompt":"One day","max_tokens":24,"stream":true}',
}
local paths = { "/v1/chat/completions", "/v1/completions", "/v1/chat/completions", "/v1/completions" }
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  n, failed, incomplete, statuses = 0, 0, 0, {}
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. (os.getenv("PVLLM_API_KEY") or "")
end

function request()
  n = n + 1
  local i = n % #bodies + 1
  return wrk.format("POST", paths[i], nil, bodies[i])
end

function response(status, headers, body)
  if status ~= 200 then
    failed = failed + 1
    statuses[status] = (statuses[status] or 0) + 1
  elseif body:find("data: ", 1, true) then
    if not body:find("data: [DONE]", 1, true) or not body:find('"finish_reason":"', 1, true) then
      incomplete = incomplete + 1
    end
  elseif not body:find('"finish_reason":"', 1, true) then
    incomplete = incomplete + 1
  end
end

function done(summary, latency, requests)
  local f, inc, codes = 0, 0, {}
  for _, t in ipairs(threads) do
    f = f + t:get("failed")
    inc = inc + t:get("incomplete")
    for code, count in pairs(t:get("statuses")) do
      codes[#codes + 1] = string.format('"%d":%d', code, count)
    end
  end
  io.write(string.format(
    '{"requests":%d,"seconds":%.3f,"requests_per_second":%.2f,"failed":%d,"incomplete":%d,' ..
    '"socket_errors":%d,"statuses":{%s},"latency_ms":{"p50":%.1f,"p90":%.1f,"p99":%.1f,"max":%.1f}}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6), f, inc,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    table.concat(codes, ","), latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3))
end
