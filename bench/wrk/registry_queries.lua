-- wrk script: GET registry search paths read from a file (one path per line), in rotation.
--
--   wrk -t1 -c32 -d10s --latency -s bench/wrk/registry_queries.lua http://127.0.0.1:PORT -- PATHS
--
-- Each thread starts at a different offset of the list. Every response is checked: status 200 and
-- a body holding the listing's "agents" member. done() prints one line the benchmarks parse:
--   REGISTRY-CHECK ok=N bad_status=N bad_body=N

local threads = {}

function setup(thread)
   thread:set("tid", #threads)
   table.insert(threads, thread)
end

function init(args)
   paths = {}
   assert(args[1], "usage: -- PATHS_FILE")
   for line in io.lines(args[1]) do
      if #line > 0 then
         table.insert(paths, line)
      end
   end
   assert(#paths > 0, "no paths in " .. args[1])
   i = tid * 7919
   ok, bad_status, bad_body = 0, 0, 0
end

function request()
   i = i + 1
   return wrk.format("GET", paths[(i % #paths) + 1])
end

function response(status, headers, body)
   if status ~= 200 then
      bad_status = bad_status + 1
   elseif not string.find(body, '"agents":', 1, true) then
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
   io.write(string.format("REGISTRY-CHECK ok=%d bad_status=%d bad_body=%d\n",
                          t.ok, t.bad_status, t.bad_body))
end
