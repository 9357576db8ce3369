-- wrk script: authenticated, audited reads rotating over API keys (and
-- endpoint ids), as docs/benchmarks.md describes.
--
--   KEYS_FILE=keys.txt IDS_FILE=ids.txt wrk -t2 -c64 -d30s \
--     -s docs/bench/audited-reads.lua http://127.0.0.1:8080
--
-- KEYS_FILE: one API key value a line (backstop admin seed-bench --keys-file).
-- IDS_FILE:  optional, one endpoint id a line; each request then reads
--            GET /api/v1/endpoints/{id}. Without it, GET /api/v1/version.
-- Every answer other than 200 is counted and reported at the end: a 429
-- means the per-key rate limit (600 per 10 minutes by default) was reached;
-- raise it for the run with SERVICE_API_RATE_LIMIT.

local function lines(path)
  local out = {}
  if path == nil or path == "" then return out end
  local f = assert(io.open(path, "r"), "cannot open " .. path)
  for l in f:lines() do
    if l ~= "" then out[#out + 1] = l end
  end
  f:close()
  return out
end

local keys, ids = {}, {}
local counter = 0
local threads = {}
errors = 0 -- global: done() reads it from each thread

function setup(thread)
  thread:set("id", #threads + 1)
  threads[#threads + 1] = thread
end

function init(args)
  keys = lines(os.getenv("KEYS_FILE"))
  ids = lines(os.getenv("IDS_FILE"))
  assert(#keys > 0, "KEYS_FILE names no keys")
  counter = id * 7919 -- threads start at different keys
end

function request()
  counter = counter + 1
  local key = keys[(counter % #keys) + 1]
  local path = "/api/v1/version"
  if #ids > 0 then
    path = "/api/v1/endpoints/" .. ids[(counter * 31 % #ids) + 1]
  end
  return wrk.format("GET", path, { ["Authorization"] = "Bearer " .. key })
end

function response(status, headers, body)
  if status ~= 200 then
    errors = errors + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do
    bad = bad + (t:get("errors") or 0)
  end
  io.write(string.format("keys rotated: %d; non-200 answers: %d\n", #lines(os.getenv("KEYS_FILE")), bad))
  io.write(string.format("latency p50 %.2f ms, p99 %.2f ms\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
