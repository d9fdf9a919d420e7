-- wrk script: blocking JSON-RPC SendMessage (A2A 1.0), a unique messageId per request.
--
--   wrk -t1 -c32 -d10s --latency -s bench/wrk/send_message.lua http://127.0.0.1:PORT/ -- calculate
--
-- Script argument: "calculate" (default) sends the data part
-- {"skill":"calculate","arguments":{"expression":"1+1"}}; "text" sends a text part "hello".
-- Every response is checked: HTTP status 2xx, no JSON-RPC "error" member, and the body contains
-- TASK_STATE_COMPLETED. done() prints one line the benchmark parses:
--   A2A-CHECK ok=N bad_status=N rpc_errors=N not_completed=N

local threads = {}

function setup(thread)
   thread:set("tid", #threads + 1)
   table.insert(threads, thread)
end

local parts = {
   calculate = '[{"data":{"skill":"calculate","arguments":{"expression":"1+1"}}}]',
   text = '[{"text":"hello"}]',
}

function init(args)
   local kind = args[1] or "calculate"
   part = assert(parts[kind], "unknown body kind " .. kind)
   math.randomseed(os.time() * 1000 + tid)
   -- per-thread, per-run prefix; the counter makes each id unique within the run
   prefix = string.format("%08x-%04x-4%03x-%04x-", math.random(0, 0x7fffffff),
                          math.random(0, 0xffff), tid % 0x1000, math.random(0x8000, 0xbfff))
   counter = 0
   ok, bad_status, rpc_errors, not_completed = 0, 0, 0, 0
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["A2A-Version"] = "1.0"
end

function request()
   counter = counter + 1
   local id = prefix .. string.format("%012x", counter)
   local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"SendMessage","params":'
      .. '{"message":{"messageId":"' .. id .. '","role":"ROLE_USER","parts":' .. part .. '}}}'
   return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
   if status < 200 or status > 299 then
      bad_status = bad_status + 1
   elseif string.find(body, '"error":', 1, true) and not string.find(body, '"result":', 1, true) then
      rpc_errors = rpc_errors + 1
   elseif not string.find(body, "TASK_STATE_COMPLETED", 1, true) then
      not_completed = not_completed + 1
   else
      ok = ok + 1
   end
end

function done(summary, latency, requests)
   local t = {ok = 0, bad_status = 0, rpc_errors = 0, not_completed = 0}
   for _, thread in ipairs(threads) do
      for k, _ in pairs(t) do
         t[k] = t[k] + (thread:get(k) or 0)
      end
   end
   io.write(string.format("A2A-CHECK ok=%d bad_status=%d rpc_errors=%d not_completed=%d\n",
                          t.ok, t.bad_status, t.rpc_errors, t.not_completed))
end
