-- POST /v1/agents for card URLs <cards>/agents/<n>/card.json, n unique across threads:
-- thread t of T sends n = offset + t, offset + t + T, ... (args: cards base URL, offset, T).
-- Any answer other than 200/201 is counted and printed once at the end.
local threads = {}
local counter = 0

function setup(thread)
  thread:set("index", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  cards, offset, total = args[1], tonumber(args[2]), tonumber(args[3])
  n = offset + index
  bad = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if args[4] then wrk.headers["Authorization"] = "Bearer " .. args[4] end
end

function request()
  local body = '{"card_url":"' .. cards .. '/agents/' .. n .. '/card.json"}'
  n = n + total
  return wrk.format(nil, "/v1/agents", nil, body)
end

function response(status, headers, body)
  if status ~= 200 and status ~= 201 then
    bad = bad + 1
    if bad == 1 then io.stderr:write("first refused registration: " .. status .. " " .. body .. "\n") end
  end
end

function done(summary, latency, requests)
  local refused, last = 0, 0
  for _, t in ipairs(threads) do
    refused = refused + t:get("bad")
    last = math.max(last, t:get("n"))
  end
  io.write(string.format("REFUSED %d\nNEXT %d\n", refused, last))
end
