-- The shared limit of permits: GCRA buckets of capacity `burst` (one per
-- limit), a pause, limits changed live. Every step is one atomic call.
-- KEYS[1]: the state, a hash: 'tat:<limit>' (theoretical arrival time, us,
--   at most 2e9 s past now)
--   per limit, while a pause lasts 'pause' (nothing is granted before it,
--   us), and while upstream's quotas of a limit last 'q:<limit>' (each
--   one's units left and its end, us: 'left until left until ...')
-- KEYS[2]: the limits changed by set_limit, a hash: '<limit>' -> 'T burst'
-- KEYS[3]: the audit list (grant times, us; a give's after a 'g', then its
--   units of the first limit: 'g<us> <units>', < 0 given back, > 0 charged),
--   written when ARGV[4] == '1'
-- KEYS[4]: global priority: each process's waiting demand, a hash:
--   '<process>' -> 'expiry c0 c1 ...' (us; waiters per level)
-- KEYS[5]: the line: each waiting process's turn, a hash:
--   '<process>' -> 'turn level place' (us, the turn at most 2e9 s past
--   now; its place: when it joined)
-- KEYS[6]: global shares: 'V' (the start of the last grant) and 'F<level>'
--   (the finish of the level's last grant), in units of virtual time
--   (all less V once one passes 2^52)
-- (KEYS[3] to KEYS[6] are named only by the calls that use them: a call
-- that audits; a take under global priority or in the line, and demand.)
-- ARGV[1]: take | give | pause | adopt | quota | rate | demand
-- ARGV[2]: now, us (read only by the script the tests run at chosen times)
-- ARGV[3]: take: the reserve; pause: its length, us; adopt, quota: us until
--   the reset; rate: the index of the limit changed
-- ARGV[4]: audit, 0 or 1; ARGV[5]: n, the number of limits
-- ARGV[2 + 4i .. 5 + 4i], limit i = 1..n: name, T = 1e6 / rate (us), burst,
--   and x: take: units asked; give: units given back (< 0) or charged
--   (> 0); adopt, quota: units the upstream says are left (-1: no word on it)
-- ARGV[6 + 4n], ARGV[7 + 4n]: rate: the new T and burst (-1: as it stands)
-- ARGV[6 + 4n .. 9 + 4n]: take and demand, under global priority: the
--   process, its demand's time to live (us), the level of the take, and the
--   process's waiters per level ('c0 c1 ...', the one taking included);
--   the process is '' without global priority
-- ARGV[10 + 4n]: take: book ahead, us (0: never book)
-- ARGV[11 + 4n]: take: lease, the most permits to take at once (1 by default)
-- ARGV[12 + 4n .. 15 + 4n]: take and demand: the process in the line ('' or
--   none: not in it), the level of the take, the process's waiters (the
--   one taking included; demand: 0, it leaves the line) and how long a
--   turn is kept once past (us)
-- ARGV[16 + 4n], ARGV[17 + 4n]: take, under global priority with shares: each
--   level's cost of one unit in virtual time ('c0 c1 ...', the lcm of the
--   weights over each weight; '' or none: strict priority), and the limit
--   whose units are shared (1 .. n)
-- Returns {taken, us, units left per limit...}: take: refused (0) with the
-- us until it would be allowed (-1: never, a cost above a burst), allowed
-- (1 or more, up to the lease) with the us until the same take again would
-- be (or until its turn, in the line), or booked (-1) with the us until its
-- permit's time; pause: the us until the pause ends. A take under global
-- shares (but one above a burst) answers two more: the level its permits
-- are owed to (-1: refused), and the level of the process owed the next
-- permit, to ask for next (-1: it waits no more). While KEYS[2] holds a
-- limit changed by set_limit (and in the reply to a change), every answer
-- ends with the limits it used, {'T', burst, ...} per limit (T as %.17g),
-- after the two of global shares (-1, -1 without them): the process takes
-- them as its own; none: those it sent, as it was opened.
-- (Globals read more than once are read once, into locals: each reading
-- of a global is a table look-up.)
local ARGV, KEYS, tonumber = ARGV, KEYS, tonumber
local max, min, floor, ceil = math.max, math.min, math.floor, math.ceil
local op = ARGV[1]
local time = @TIME@  -- {seconds, microseconds}
local now = time[1] * 1000000 + time[2]

-- The plain take of one limit, the call the limiter makes most: no global
-- priority, line, booking, lease or audit (the request stops at ARGV[9]),
-- and, as read, no pause, quota or live limit, nor a cost above the burst.
-- It decides exactly as the general steps below (allowed_at, the charge,
-- store, answer), spelled out for one limit: those steps build a table per
-- limit and three closures, which cost Redis more than the decision
-- (spelled out, an uncontended take costs Redis a third fewer instructions).
-- Any other call, or this one finding any of those, goes on to the general
-- steps with what it read (the same fields, in the same order). (`s + 0`
-- reads a number from a string that holds one as tonumber does, at half
-- its cost: tonumber converts it twice; a comparison costs less than a
-- call of max or min.)
local state, live
if op == 'take' and ARGV[5] == '1' and ARGV[10] == nil and ARGV[4] == '0' then
  local name = ARGV[6]
  local field = 'tat:' .. name
  state = redis.call('HMGET', KEYS[1], 'pause', field, 'q:' .. name)
  live = redis.call('HMGET', KEYS[2], name)
  local T, burst, x = ARGV[7] + 0, ARGV[8] + 0, ARGV[9] + 0
  if not (state[1] or state[3] or live[1]) and x <= burst then
    local tat = state[2] and state[2] + 0 or now
    if not (tat <= 9007199254740992 and tat >= -9007199254740992) then  -- (as number() fails)
      error('permits: the field ' .. field .. ' holds ' .. string.format('%q', state[2])
        .. ', no number it stores')
    end
    if tat < now then tat = now end
    -- (a take of no units takes nothing from the limit: nothing holds it)
    local need, at = 0, now
    if x > 0 then
      need = x + ARGV[3]
      if need > burst then need = burst end
      at = tat - (burst - need) * T
    end
    if at > now then
      return {0, ceil(at - now), floor((burst * T - (tat - now)) / T)}
    end
    -- (allowed: at most burst * T past now, 1e9 s at most: within store()'s bound)
    tat = tat + x * T
    if tat > now then
      redis.call('HSET', KEYS[1], field, string.format(tat % 1 == 0 and '%d' or '%.17g', tat))
      local keep = ceil((tat - now) / 1000) + @SLACK@  -- as store() keeps it
      if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep + 1000) end
    else
      redis.call('DEL', KEYS[1])
    end
    local again = now
    if x > 0 then
      again = tat - (burst - need) * T
      if again < now then again = now end
    end
    return {1, ceil(again - now), floor((burst * T - (tat - now)) / T)}
  end
end

-- A number the script stored, as read back: one a field holds that is none
-- (something else wrote the key), or none Redis's times could reach (not
-- finite, or beyond 2^53 in size), fails the script, saying which field: read
-- as absent it would start a bucket full, end a pause, forget a quota. (The
-- plain take above fails so without it: a closure made at every call costs.)
local function number(s, field)
  local v = tonumber(s)
  if not (v and v >= -9007199254740992 and v <= 9007199254740992) then
    error('permits: the field ' .. field .. ' holds ' .. string.format('%q', s)
      .. ', no number it stores')
  end
  return v
end
local arg = tonumber(ARGV[3])
local n = tonumber(ARGV[5])
local names, T, burst, x, tat, fields = {}, {}, {}, {}, {}, {'pause'}
for i = 1, n do
  names[i] = ARGV[2 + 4 * i]
  T[i] = tonumber(ARGV[3 + 4 * i])
  burst[i] = tonumber(ARGV[4 + 4 * i])
  x[i] = tonumber(ARGV[5 + 4 * i])
  fields[i + 1] = 'tat:' .. names[i]
  fields[n + i + 1] = 'q:' .. names[i]
end
state = state or redis.call('HMGET', KEYS[1], unpack(fields))
live = live or redis.call('HMGET', KEYS[2], unpack(names))
local pause = max(now, state[1] and number(state[1], 'pause') or now)
local stored = false  -- KEYS[2] holds a limit changed: the answer says them
for i = 1, n do
  if live[i] then
    stored = true
    local sep = string.find(live[i], ' ', 1, true)
    if not sep then number(live[i], names[i] .. ' of the changed limits') end  -- (fails)
    T[i] = number(string.sub(live[i], 1, sep - 1), names[i] .. ' of the changed limits')
    burst[i] = number(string.sub(live[i], sep + 1), names[i] .. ' of the changed limits')
  end
  tat[i] = max(now, state[i + 1] and number(state[i + 1], fields[i + 1]) or now)
end
-- The upstream's quotas of each limit in force: each {units left, end}
-- (each charge takes its units from every one). Read, and heeded, only
-- when some limit has one or one is given now (`quoted`).
local quotas, quoted = nil, op == 'quota'
for i = 1, n do
  if state[n + i + 1] then quoted = true end
end
if quoted then
  quotas = {}
  for i = 1, n do
    quotas[i] = {}
    if state[n + i + 1] then
      local words = {}
      for word in string.gmatch(state[n + i + 1], '%S+') do
        words[#words + 1] = number(word, fields[n + i + 1])
      end
      if #words == 0 or #words % 2 == 1 then  -- (stored as pairs, or not at all)
        error('permits: the field ' .. fields[n + i + 1] .. ' holds '
          .. string.format('%q', state[n + i + 1]) .. ', no quotas it stores')
      end
      for j = 1, #words, 2 do
        if words[j + 1] > now then quotas[i][#quotas[i] + 1] = {words[j], words[j + 1]} end
      end
    end
  end
end

local told  -- global shares: {the level a take's permits are owed to, the one to ask for next}
local function answer(allowed, wait)
  local out = {allowed, wait}
  for i = 1, n do
    out[i + 2] = floor((burst[i] * T[i] - (tat[i] - now)) / T[i])
  end
  if told then out[n + 3], out[n + 4] = told[1], told[2] end
  if stored then
    if not told then out[n + 3], out[n + 4] = -1, -1 end
    local used = {}
    for i = 1, n do
      used[2 * i - 1], used[2 * i] = string.format('%.17g', T[i]), burst[i]
    end
    out[n + 5] = used
  end
  return out
end

-- When every limit holds what a take of x needs: its units and `reserve`
-- more (never more than the burst), and with `headroom` (a lease's extra
-- permit) at least half its burst more; a limit it takes nothing from
-- holds it in no way, whatever its debt or quota (P96). Never before the
-- pause ends, nor, for units a quota does not leave, before the quota's end.
local function allowed_at(reserve, headroom)
  local at = pause
  for i = 1, n do
    if x[i] > 0 then  -- (a limit the take takes nothing from holds it in no way)
      local keep = reserve
      if headroom then keep = max(reserve, floor(burst[i] / 2)) end
      local need = min(x[i] + keep, burst[i])
      at = max(at, tat[i] - (burst[i] - need) * T[i])
      if quoted then
        for _, q in ipairs(quotas[i]) do
          if x[i] > q[1] then at = max(at, q[2]) end
        end
      end
    end
  end
  return at
end

-- Global priority: the process ('' without it), its demand's time to live,
-- the level of the take and its waiters per level. Global shares: each
-- level's cost of a unit, the limit shared, and the levels' tags. The line:
-- the process in it ('' : none), its level, its waiters and the grace of a
-- turn.
local process, ttl, level, counts = ARGV[6 + 4 * n] or '', 0, 0, nil
local costs, shared, tags = nil, 1, nil
local me, rank, waiting, grace = ARGV[12 + 4 * n] or '', 0, 0, 0

-- Their steps, read and built only for a call that uses them (a take
-- without them does not pay for them).
local waiting_elsewhere, start, soonest, publish, turn
if process ~= '' or me ~= '' then
  counts, costs, tags = {}, {}, {}
  if process ~= '' and (op == 'take' or op == 'demand') then
    ttl = tonumber(ARGV[7 + 4 * n])
    level = tonumber(ARGV[8 + 4 * n])
    for word in string.gmatch(ARGV[9 + 4 * n], '%S+') do counts[#counts + 1] = tonumber(word) end
  end
  shared = tonumber(ARGV[17 + 4 * n]) or 1
  if ARGV[16 + 4 * n] then
    for word in string.gmatch(ARGV[16 + 4 * n], '%S+') do costs[#costs + 1] = tonumber(word) end
  end
  if me ~= '' then
    rank = tonumber(ARGV[13 + 4 * n])
    waiting = tonumber(ARGV[14 + 4 * n])
    grace = tonumber(ARGV[15 + 4 * n])
  end
  -- levels order the line only under global priority: without it nothing
  -- orders levels across processes
  if process == '' then rank = 0 end

  -- Global priority: the waiters of other live processes, per level from 1
  -- (forgetting the demand of processes gone quiet), and when the last of
  -- the entries with waiters at each level expires (us).
  function waiting_elsewhere(process)
    local waits, expires = {}, {}
    local entries = redis.call('HGETALL', KEYS[4])
    for j = 1, #entries, 2 do
      if entries[j] ~= process then
        local words = {}
        for word in string.gmatch(entries[j + 1], '%S+') do
          words[#words + 1] = number(word, entries[j] .. ' of the demand')
        end
        if words[1] <= now then
          redis.call('HDEL', KEYS[4], entries[j])
        else
          for l = 1, #words - 1 do
            waits[l] = (waits[l] or 0) + words[l + 1]
            if words[l + 1] > 0 then expires[l] = max(expires[l] or 0, words[1]) end
          end
        end
      end
    end
    return waits, expires
  end

  -- Global shares: start-time fair queuing over the levels, in units of the
  -- shared limit. A level's next grant starts at the later of its last
  -- grant's finish and the start of the last grant anywhere, and each unit
  -- it takes moves its finish on by its cost.
  function start(l)  -- the start of level l's next grant (l from 0)
    return max(tonumber(tags[l + 2]) or 0, tonumber(tags[1]) or 0)
  end
  -- Of the levels a process waits at (`first`, and those with `counts`), the
  -- one whose next grant starts soonest (`first` among equals, then the most
  -- urgent); -1 if none.
  function soonest(first, counts)
    local best = first
    for l = 1, #costs do
      if (counts[l] or 0) > 0 and (best < 0 or start(l - 1) < start(best)) then best = l - 1 end
    end
    return best
  end

  -- Publish this process's waiters per level, to live `ttl` us.
  function publish(process, ttl, counts)
    local total = 0
    for l = 1, #counts do total = total + counts[l] end
    if total <= 0 then
      redis.call('HDEL', KEYS[4], process)
      return
    end
    local words = {string.format('%d', now + ttl)}
    for l = 1, #counts do words[l + 1] = string.format('%d', counts[l]) end
    redis.call('HSET', KEYS[4], process, table.concat(words, ' '))
    local keep = ceil(ttl / 1000) + @SLACK@
    if redis.call('PTTL', KEYS[4]) < keep then redis.call('PEXPIRE', KEYS[4], keep) end
  end

  -- The line: a process that must wait is told its turn, so that each asks
  -- when a permit falls due for it rather than all at once when the next one
  -- does. Its turn is when the buckets allow its take, one step (its units'
  -- interval on its slowest limit) later for each process ahead of it in the
  -- line (under global strict priority: of the same level or a more urgent
  -- one; under global shares: of a level whose next grant starts no later),
  -- each to take one permit first. A process asking again keeps its
  -- place; a newcomer, or one granted with more waiters, goes to the end. A
  -- turn more than `grace` us past is dropped (its process did not come).
  function turn(at)
    local place, ahead, latest = nil, 0, at
    local entries = redis.call('HGETALL', KEYS[5])
    local others = {}
    for j = 1, #entries, 2 do
      local words = {}
      for word in string.gmatch(entries[j + 1], '%S+') do
        words[#words + 1] = number(word, entries[j] .. ' of the line')
      end
      if words[1] < now - grace then
        redis.call('HDEL', KEYS[5], entries[j])
      elseif entries[j] == me then
        if words[2] == rank or #costs > 0 then place = words[3] end  -- shares: any level
      else
        latest = max(latest, words[1])
        if words[2] <= rank or #costs > 0 then
          others[#others + 1] = {words[2], words[3], entries[j]}
        end
      end
    end
    -- the processes ahead of this one: of a more urgent level (under shares:
    -- one whose next grant starts sooner), or of its level (one that starts
    -- as soon) and in the line before it (all of them, for a newcomer)
    for _, o in ipairs(others) do
      local sooner, alike = o[1] < rank, o[1] == rank
      if #costs > 0 then sooner, alike = start(o[1]) < start(rank), start(o[1]) == start(rank) end
      if sooner or (alike and (place == nil or o[2] < place or (o[2] == place and o[3] < me))) then
        ahead = ahead + 1
      end
    end
    -- one step: the take's units' interval on the limit that holds it
    -- back, the one whose bucket is the last to allow it (the slowest of
    -- those, on a tie); not the slowest limit, whose step is hours for a
    -- day's quota with room for many beside a rate a second
    local step, last = 0, nil
    for i = 1, n do
      if x[i] > 0 then
        local held = tat[i] - (burst[i] - min(x[i] + arg, burst[i])) * T[i]
        if last == nil or held > last or (held == last and x[i] * T[i] > step) then
          step, last = x[i] * T[i], held
        end
      end
    end
    -- never more than 2e9 s past now, as a bucket's time (store()): steps
    -- of up to 1e9 s each for the processes ahead passed 2^53 us, a turn
    -- its process's next take then failed to read; one told this asks
    -- then and is told its turn again, its place kept
    at = min(at + ahead * step, now + 2e15)
    if place == nil then place = now end  -- a newcomer's: now, the end
    redis.call('HSET', KEYS[5], me, string.format('%.17g %d %d', at, rank, place))
    latest = max(latest, at)
    redis.call('PEXPIRE', KEYS[5], ceil((latest - now + grace) / 1000) + @SLACK@)
    return at
  end
end

-- Write the state back, the pause and each quota only while they last; it
-- expires within a second after every bucket is full again and the pause
-- and quotas are over.
local function store()
  local args, last, over = {}, pause, nil  -- over: the fields to delete, if any
  for i = 1, n do
    -- never more than 2e9 s past now: the longest reset (1e9 s) and then
    -- the longest refill (1e9 s) hold it so long, settles, bookings and a
    -- change to a slower rate no longer (added up, they passed 2^53 us, a
    -- time every take then failed to read)
    tat[i] = min(tat[i], now + 2e15)
    args[2 * i - 1] = fields[i + 1]
    -- %d where whole: the digits %.17g would write, written sooner
    args[2 * i] = string.format(tat[i] % 1 == 0 and '%d' or '%.17g', tat[i])
    last = max(last, tat[i])
  end
  if pause > now then
    args[2 * n + 1], args[2 * n + 2] = 'pause', string.format('%d', pause)
  elseif state[1] then
    over = {'pause'}  -- over
  end
  if quoted then
    for i = 1, n do
      if #quotas[i] > 0 then
        local words = {}
        for _, q in ipairs(quotas[i]) do
          words[#words + 1] = string.format('%d %d', q[1], q[2])
          last = max(last, q[2])
        end
        args[#args + 1], args[#args + 2] = fields[n + i + 1], table.concat(words, ' ')
      elseif state[n + i + 1] then
        over = over or {}
        over[#over + 1] = fields[n + i + 1]  -- over
      end
    end
  end
  if last > now then
    if over then redis.call('HDEL', KEYS[1], unpack(over)) end
    redis.call('HSET', KEYS[1], unpack(args))
    -- kept at least until `last`; lengthened only when shorter than that,
    -- and then by a second more, so that the takes of the next second need
    -- not lengthen it again (PTTL costs Redis a third of PEXPIRE)
    local keep = ceil((last - now) / 1000) + @SLACK@
    if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep + 1000) end
  else
    redis.call('DEL', KEYS[1])
  end
end

if op == 'take' then
  for i = 1, n do
    if x[i] > burst[i] then return answer(0, -1) end
  end
  local at = allowed_at(arg)
  local held = pause > now  -- by a pause, or by more urgent waiters elsewhere
  if process ~= '' then
    local waits, expires = waiting_elsewhere(process)
    local ahead, last = 0, now  -- last: when the entries holding it expire
    if #costs > 0 then
      -- shares: not while any live process, this one included, waits at a
      -- level whose next grant starts sooner than the take's level's; the
      -- process is told which of its levels to ask for instead
      local fields = {'V'}
      for l = 1, #costs do fields[l + 1] = 'F' .. (l - 1) end
      tags = redis.call('HMGET', KEYS[6], unpack(fields))
      for j = 1, #fields do
        if tags[j] then tags[j] = number(tags[j], fields[j] .. ' of the shares') end
      end
      local mine = soonest(level, counts)
      told = {-1, mine}
      held = held or mine ~= level
      for l = 1, #costs do
        if (waits[l] or 0) > 0 and start(l - 1) < start(mine) then
          ahead, last = ahead + 1, max(last, expires[l])
        end
      end
    else
      -- strict: not while a level more urgent than this one, and than every
      -- waiter of this process, waits in another live process (a process
      -- whose own policy serves a less urgent level first is not held by
      -- the waiters in between: one of the two must go on)
      local urgent = level
      for l = 1, level do
        if (counts[l] or 0) > 0 then urgent = l - 1 break end
      end
      for l = 1, urgent do ahead, last = ahead + (waits[l] or 0), max(last, expires[l] or now) end
    end
    -- at best, each of those takes one interval of the fastest limit; at
    -- the latest, they hold it until their entries expire (those of
    -- processes gone quiet: then it is asked again at once)
    if ahead > 0 then
      local fastest = T[1]
      for i = 2, n do fastest = min(fastest, T[i]) end
      at = max(at, min(now + ahead * fastest, last))
      held = true
    end
  end
  -- A take the buckets alone would allow within `book` us is booked:
  -- charged now, the taker's at `at`.
  local book = tonumber(ARGV[10 + 4 * n]) or 0
  if at > now and (held or at - now > book) then
    if process ~= '' then publish(process, ttl, counts) end
    if me ~= '' then
      if told then rank = told[2] end  -- in the line for the level it asks next
      at = turn(at)
    end
    return answer(0, ceil(at - now))
  end
  if told and told[2] ~= level then
    -- allowed now, but another level of this process is owed first: it
    -- asks for that one at once (its place in the line kept)
    publish(process, ttl, counts)
    return answer(0, 0)
  end
  -- every limit charged its part, at once; if allowed now (not booked), a
  -- lease: more of the same, as long as they are allowed now with half of
  -- each burst left for the others
  local lease, taken = tonumber(ARGV[11 + 4 * n]) or 1, 0
  repeat
    for i = 1, n do
      tat[i] = tat[i] + x[i] * T[i]
      if quoted then
        for _, q in ipairs(quotas[i]) do q[1] = q[1] - x[i] end  -- the quotas' units
      end
    end
    taken = taken + 1
  until at > now or taken >= lease or allowed_at(arg, true) > now
  store()
  if process ~= '' then
    counts[level + 1] = max(0, counts[level + 1] - taken)
    publish(process, ttl, counts)
    if #costs > 0 then
      local begin, grant = start(level), taken * x[shared] * costs[level + 1]
      if begin + grant <= 4503599627370496 then
        tags[1], tags[level + 2] = begin, begin + grant
        redis.call('HSET', KEYS[6], 'V', string.format('%d', begin),
          'F' .. level, string.format('%d', begin + grant))
      else
        -- grown past 2^52 (months of unbroken load; past 2^53 a time was
        -- unreadable): all of them less this grant's start, so that every
        -- level's next start moves by as much and their order holds (a
        -- finish before it, which counts as V does, as an absent one, to 0)
        local args = {}
        for j = 1, #costs + 1 do
          tags[j] = j == level + 2 and grant or max(0, (tags[j] or 0) - begin)
          args[2 * j - 1] = j == 1 and 'V' or 'F' .. (j - 2)
          args[2 * j] = string.format('%d', tags[j])
        end
        redis.call('HSET', KEYS[6], unpack(args))
      end
      redis.call('PEXPIRE', KEYS[6], ceil(ttl / 1000) + @SLACK@)
      told = {level, soonest(-1, counts)}
    end
  end
  if ARGV[4] == '1' then
    local times = {}
    for j = 1, taken do times[j] = string.format('%.17g', max(now, at)) end
    redis.call('RPUSH', KEYS[3], unpack(times))
    redis.call('PEXPIRE', KEYS[3], 3600000)
  end
  if at > now then  -- booked: its process has its turn
    if me ~= '' then redis.call('HDEL', KEYS[5], me) end
    return answer(-1, ceil(at - now))
  end
  local again = allowed_at(arg)
  if me ~= '' then
    -- granted: out of the line; back at its end if more wait, and must
    -- (the same take is not allowed now, or others wait in the line for
    -- the permits there are)
    redis.call('HDEL', KEYS[5], me)
    if waiting > taken and (again > now or redis.call('HLEN', KEYS[5]) > 0) then
      again = turn(again)  -- (for the level taken: a sooner one makes turns come early)
    end
  end
  return answer(taken, ceil(again - now))
elseif op == 'give' then
  for i = 1, n do
    tat[i] = max(now, tat[i] + x[i] * T[i])
    -- units charged count against a quota; units given back are not
    -- returned to it (they may have been charged before it)
    if quoted and x[i] > 0 then
      for _, q in ipairs(quotas[i]) do q[1] = q[1] - x[i] end
    end
  end
  if ARGV[4] == '1' then
    redis.call('RPUSH', KEYS[3], 'g' .. string.format('%d %d', now, x[1]))
  end
elseif op == 'pause' then
  pause = max(pause, now + arg)
  store()
  return answer(1, ceil(pause - now))
elseif op == 'adopt' then
  -- at the reset, at most x units left: TAT >= reset + (burst - x) * T
  for i = 1, n do
    if x[i] >= 0 then tat[i] = max(tat[i], now + arg + (burst[i] - x[i]) * T[i]) end
  end
elseif op == 'quota' then
  -- at most x more until the reset, beside the quotas in force; one that
  -- another makes redundant (no more left, lasting no shorter) is dropped;
  -- beyond @QUOTAS@ (the core's MAX_QUOTAS), the two that end first become
  -- one, the lesser left until the later end (never more available)
  for i = 1, n do
    if x[i] >= 0 and arg > 0 then
      local all, kept = {{x[i], now + arg}}, {}
      for _, q in ipairs(quotas[i]) do all[#all + 1] = q end
      for j, q in ipairs(all) do
        local redundant = false
        for k, o in ipairs(all) do
          if k ~= j and o[1] <= q[1] and o[2] >= q[2] and (o[1] < q[1] or o[2] > q[2] or k < j) then
            redundant = true
          end
        end
        if not redundant then kept[#kept + 1] = q end
      end
      table.sort(kept, function(a, b) return a[2] < b[2] end)
      while #kept > @QUOTAS@ do
        kept[2] = {min(kept[1][1], kept[2][1]), kept[2][2]}
        table.remove(kept, 1)
      end
      quotas[i] = kept
    end
  end
elseif op == 'rate' then
  -- the units in the bucket carry over (never more than the new burst);
  -- the time they fall short by is rounded up to a whole microsecond
  local newT, newb = tonumber(ARGV[6 + 4 * n]), tonumber(ARGV[7 + 4 * n])
  if newT < 0 then newT = T[arg] end  -- not given: as it stands
  if newb < 0 then newb = burst[arg] end
  -- a full bucket refilled within 1e9 s (_LONGEST_S; the client checks a
  -- change that gives both): its times stay whole microseconds below 2^53
  if newb * newT > 1e15 then
    return redis.error_reply(string.format('permits: limit %s: a full bucket of %d '
      .. 'would take more than 1e9 s to refill', names[arg], newb))
  end
  local short = (newb - burst[arg]) * newT + (tat[arg] - now) * newT / T[arg]
  tat[arg] = now + max(0, ceil(short))
  T[arg], burst[arg] = newT, newb
  redis.call('HSET', KEYS[2], names[arg], string.format('%.17g %d', newT, newb))
  stored = true
elseif op == 'demand' then
  if process ~= '' then publish(process, ttl, counts) end
  if me ~= '' and waiting == 0 then redis.call('HDEL', KEYS[5], me) end
  return answer(1, 0)
else
  return redis.error_reply('permits: unknown operation ' .. tostring(op))
end
store()
return answer(1, 0)
