-- wrk script: one *call* is what a client does to hold a completed task with its result.
--
--   wrk -t32 -c32 -d10s --timeout 10s -s bench/wrk/peer_calls.lua http://127.0.0.1:PORT/ -- MODE RESULT
--
-- Run it with as many threads as connections (-tN -cN): each thread then owns one connection, so
-- request() and response() alternate and a call can span several requests.
--
-- MODE
--   send     one blocking SendMessage; its answer must be the completed task.
--   stream   one SendStreamingMessage; the response (SSE) ends when the task ends and must carry
--            the completed status and the artifact.
--   sendget  SendMessage, then GetTask on the task it returns until the task is completed (for a
--            server whose SendMessage always answers a submitted task); a call is every request of it.
-- RESULT: "calc" (an artifact part {"data": 2.0}: 1+1 computed) or "echo" (the SDK echo server's text).
--
-- Every body is the A2A 1.0 JSON-RPC request with the data part
-- {"skill":"calculate","arguments":{"expression":"1+1"}} and a unique messageId per call.
-- Every response is checked: HTTP 2xx, no JSON-RPC error, the task completed (or, in sendget, still
-- submitted or working, then polled), the right result. The latency of a call is measured here (a
-- monotonic clock, from its first request to its last response). done() prints one line:
--   PEER-CHECK calls=N ok=N polls=N bad_status=N rpc_errors=N not_completed=N wrong_result=N
--              overlaps=N p50_us=N p99_us=N

local ffi = require("ffi")
ffi.cdef [[
   typedef struct { long tv_sec; long tv_nsec; } peer_calls_timespec;
   int clock_gettime(int clock_id, peer_calls_timespec *tp);
]]
local ts = ffi.new("peer_calls_timespec")
local CLOCK_MONOTONIC = 1

local function now_ms()
   ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
   return tonumber(ts.tv_sec) * 1e3 + tonumber(ts.tv_nsec) / 1e6
end

local threads = {}

function setup(thread)
   thread:set("tid", #threads + 1)
   table.insert(threads, thread)
end

local PART = '[{"data":{"skill":"calculate","arguments":{"expression":"1+1"}}}]'
local RESULTS = {
   calc = '"parts":%s*%[{"data":%s*2%.0}%]',
   echo = '"text":%s*"echo: ',
}
local MODES = { send = "SendMessage", stream = "SendStreamingMessage", sendget = "SendMessage" }

function init(args)
   mode = args[1] or "send"
   method = assert(MODES[mode], "unknown mode " .. mode)
   expect = assert(RESULTS[args[2] or "calc"], "unknown result kind " .. tostring(args[2]))
   math.randomseed(os.time() * 1000 + tid)
   prefix = string.format("%08x-%04x-4%03x-%04x-", math.random(0, 0x7fffffff),
                          math.random(0, 0xffff), tid % 0x1000, math.random(0x8000, 0xbfff))
   counter = 0
   calls, ok, polls, bad_status, rpc_errors, not_completed, wrong_result, overlaps =
      0, 0, 0, 0, 0, 0, 0, 0
   lat = {}
   pending = nil -- the task a sendget call polls
   in_flight = false
   responses = 0
   wrk.method = "POST"
   wrk.headers["Content-Type"] = "application/json"
   wrk.headers["A2A-Version"] = "1.0"
end

function request()
   if in_flight then
      if responses > 0 then
         overlaps = overlaps + 1 -- a second request before the answer: -t must equal -c
      else
         calls = calls - 1 -- wrk's own trial call of request() on thread 1, never sent
      end
      pending = nil
   end
   in_flight = true
   counter = counter + 1
   local body
   if pending then
      polls = polls + 1
      body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"GetTask","params":{"id":"'
         .. pending .. '"}}'
   else
      calls = calls + 1
      started = now_ms()
      local id = prefix .. string.format("%012x", counter)
      body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"' .. method .. '","params":'
         .. '{"message":{"messageId":"' .. id .. '","role":"ROLE_USER","parts":' .. PART .. '}}}'
   end
   return wrk.format(nil, nil, nil, body)
end

local function has(body, text)
   return string.find(body, text, 1, true) ~= nil
end

function response(status, headers, body)
   in_flight = false
   responses = responses + 1
   local polling = pending
   pending = nil
   if status < 200 or status > 299 then
      bad_status = bad_status + 1
   elseif has(body, '"error":') and not has(body, '"result":') then
      rpc_errors = rpc_errors + 1
   elseif has(body, "TASK_STATE_COMPLETED") then
      if string.find(body, expect) then
         ok = ok + 1
         lat[#lat + 1] = now_ms() - started
      else
         wrong_result = wrong_result + 1
      end
   elseif mode == "sendget" and (has(body, "TASK_STATE_SUBMITTED") or has(body, "TASK_STATE_WORKING")) then
      pending = polling or string.match(body, '"task":%s*{%s*"id":%s*"([^"]+)"')
      if not pending then
         not_completed = not_completed + 1
      end
   else
      not_completed = not_completed + 1
   end
end

function done(summary, latency, requests)
   local t = { calls = 0, ok = 0, polls = 0, bad_status = 0, rpc_errors = 0, not_completed = 0,
               wrong_result = 0, overlaps = 0 }
   local all = {}
   for _, thread in ipairs(threads) do
      for k, _ in pairs(t) do
         t[k] = t[k] + (thread:get(k) or 0)
      end
      for _, v in ipairs(thread:get("lat") or {}) do
         all[#all + 1] = v
      end
   end
   table.sort(all)
   local function pct(p)
      if #all == 0 then return 0 end
      return all[math.max(1, math.ceil(#all * p))] * 1000
   end
   io.write(string.format(
      "PEER-CHECK calls=%d ok=%d polls=%d bad_status=%d rpc_errors=%d not_completed=%d "
         .. "wrong_result=%d overlaps=%d p50_us=%d p99_us=%d\n",
      t.calls, t.ok, t.polls, t.bad_status, t.rpc_errors, t.not_completed, t.wrong_result,
      t.overlaps, pct(0.50), pct(0.99)))
end
