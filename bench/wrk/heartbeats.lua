-- wrk script: PUT /v1/agents/{id}/heartbeat for agent ids read from a file (one per line), in turn.
--
--   wrk -tT -c64 -d20s --latency -s bench/wrk/heartbeats.lua http://127.0.0.1:PORT -- IDS [START] [T]
--
-- The T threads (T as given to wrk, default 1) take the ids in turn from START (default 0): thread k
-- beats START+k, START+k+T, ..., so no agent is beaten by two threads in one pass. Every response is checked: status 200 and
-- a body naming the agent's "last_heartbeat". done() prints one line bench/registry_heartbeats.py
-- parses:   HEARTBEAT-CHECK ok=N bad_status=N bad_body=N

local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

function init(args)
   ids = {}
   assert(args[1], "usage: -- IDS_FILE [START]")
   for line in io.lines(args[1]) do
      if #line > 0 then
         table.insert(ids, line)
      end
   end
   assert(#ids > 0, "no ids in " .. args[1])
   headers = {["Content-Length"] = "0"}
   stride = tonumber(args[3]) or 1
   i = (tonumber(args[2]) or 0) + tid - stride
   ok, bad_status, bad_body = 0, 0, 0
end

function request()
   i = i + stride
   return wrk.format("PUT", "/v1/agents/" .. ids[(i % #ids) + 1] .. "/heartbeat", headers)
end

function response(status, headers, body)
   if status ~= 200 then
      bad_status = bad_status + 1
   elseif not string.find(body, '"last_heartbeat":', 1, true) then
      bad_body = bad_body + 1
   else
      ok = ok + 1
   end
end

function done(summary, latency, requests)
   local t = {ok = 0, bad_status = 0, bad_body = 0}
   for _, thread in ipairs(threads) do
      for k, _ in pairs(t) do
         t[k] = t[k] + (thread:get(k) or 0)
      end
   end
   io.write(string.format("HEARTBEAT-CHECK ok=%d bad_status=%d bad_body=%d\n",
                          t.ok, t.bad_status, t.bad_body))
end
