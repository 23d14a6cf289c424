-- wrk script: the agent's heartbeat POST, from 1000 nodes in turn, with the
-- bearer token from SHARDNET_BENCH_TOKEN. Shared by the broker benchmarks.
local token = os.getenv("SHARDNET_BENCH_TOKEN") or ""
local n = 0
request = function()
  n = n + 1
  local body = '{"run":"bench","attempt":1,"cluster":"alpha","node":"node' .. (n % 1000) ..
    '","job":1,"step":"0","seq":' .. n .. ',"time":1.0,"interval":10,"state":"running","ranks":[{"rank":0,"local_rank":0,"pid":1,"step":' .. n .. ',"exit":null}]}'
  return wrk.format("POST", "/v1/heartbeats", {["Content-Type"]="application/json", ["Authorization"]="Bearer " .. token}, body)
end
