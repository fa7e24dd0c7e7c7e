-- wrk script: POST one MCP tools/call per request.
-- MCP_BODY: the JSON-RPC body; MCP_HEADERS: "Name: value" lines; MCP_VARY=N: replace "{n}" in the body by
-- 1..N in turn (distinct arguments per request, across all threads). Counts answers that are not HTTP 200 with "isError":false.
wrk.method = "POST"
wrk.body = os.getenv("MCP_BODY")
for line in string.gmatch(os.getenv("MCP_HEADERS") or "", "[^\n]+") do
  local name, value = line:match("^([^:]+):%s*(.*)$")
  if name then wrk.headers[name] = value end
end

local vary = tonumber(os.getenv("MCP_VARY") or "0")
local threads = {}
bad = 0
-- Thread i of MCP_THREADS sends values i, i + MCP_THREADS, ...: threads never send the same arguments at
-- about the same time (which would make the second a cache hit).
local stride = tonumber(os.getenv("MCP_THREADS") or "1")
counter = 0

function setup(thread)
  thread:set("counter", #threads)  -- wrk runs setup before it starts that thread
  table.insert(threads, thread)
end

if vary > 0 then
  local template = wrk.body
  function request()
    counter = counter + stride
    local body = template:gsub("{n}", tostring(counter % vary + 1))
    return wrk.format(nil, nil, nil, body)
  end
end

function response(status, headers, body)
  if status ~= 200 or not body:find('"isError":false', 1, true) then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local total_bad = 0
  for _, thread in ipairs(threads) do
    total_bad = total_bad + thread:get("bad")
  end
  io.write(string.format("BAD_RESPONSES %d\n", total_bad))
  io.write(string.format("LATENCY_P50_US %d\n", latency:percentile(50)))
  io.write(string.format("LATENCY_P99_US %d\n", latency:percentile(99)))
end
