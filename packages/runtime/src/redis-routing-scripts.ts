/**
 * The Lua side of RedisRoutingTable: every operation that must be atomic is one script. The key
 * layout is documented in redis-routing-table.ts. Conventions shared by every script:
 *
 * - `KEYS[1]` is `<prefix>seq` (the generation counter); every other key is `<prefix>` + suffix, all
 *   under the table's Cluster hash tag, so they live in `KEYS[1]`'s slot.
 * - Numbers arrive as decimal strings (JavaScript's shortest round-trip form, which Lua's `tonumber`
 *   parses exactly) and leave as integers only: Redis truncates a Lua number reply to an integer, so
 *   selectAndReserve returns each candidate's overlap and load (integers, packed as little-endian
 *   doubles in one bulk string: exact, and far cheaper than 3n integer replies) and the caller
 *   recomputes the (fractional) scores with the same IEEE operations in the same order — bit-identical
 *   doubles.
 * - Errors the caller can act on are `SY_INVALID ...` (→ invalid_argument) and `SY_STAGE_LOST ...`
 *   (a snapshot being staged was dropped by a flush or its abandon timer: → unavailable).
 *
 * Blocks are indexed per **generation**, not per worker: a worker's blocks live in the set
 * `g:<gen>`, and each block's bitmap `b:<hash>` has bit `gen` set for every generation holding it.
 * A worker's record `w:<worker>` names its current generation; other generations are invisible to
 * matching. That makes `cleared`, `removeWorker` and the swap at the end of `replaceWorker` O(1):
 * the old generation goes to `dead`, `gc` clears its bits a bounded number of blocks per call, and
 * only then is its id (a bit offset) reused. Matching ANDs the bitmaps (a few MGETs) into a mask of the candidates' bits:
 * a handful of byte operations per block instead of one set lookup per candidate.
 */

/** Helpers prepended to every script. */
const PRELUDE = `
local P = string.sub(KEYS[1], 1, -4)
-- globals are slow in Redis's sandbox: hot ones as locals
local band, bor, bnot, lshift = bit.band, bit.bor, bit.bnot, bit.lshift
local sbyte, smatch, tonumber, ipairs, pairs = string.byte, string.match, tonumber, ipairs, pairs
local call, max, unpack = redis.call, math.max, unpack

local function int(x) return string.format('%d', x) end

-- A worker's record w:<worker>: its generation (-1: none), then the load reserved on it (active
-- blocks, pending prefill tokens, requests), four little-endian doubles. selectAndReserve reads every
-- candidate's in one MGET; a worker with neither a generation nor a request has no record, and \`ws\`
-- lists the workers that have one (for loads).
local spack, sunpack = struct.pack, struct.unpack
local NOREC = spack('<dddd', -1, 0, 0, 0)
local function recKey(worker) return P .. 'w:' .. worker end

-- gen (string or nil), active, pending, requests, the stored record (false: none)
local function getRec(worker)
  local v = call('GET', recKey(worker))
  if not v then return nil, 0, 0, 0, false end
  local g, a, p, r = sunpack('<dddd', v)
  if g < 0 then return nil, a, p, r, v end
  return int(g), a, p, r, v
end

-- Store a record (g: generation id string or nil); old: the record it replaces (false: none).
local function putRec(worker, old, g, a, p, r)
  if not g and r <= 0 then
    if old then
      call('DEL', recKey(worker))
      call('SREM', P .. 'ws', worker)
    end
  else
    call('SET', recKey(worker), spack('<dddd', g and tonumber(g) or -1, a, p, r))
    if not old then call('SADD', P .. 'ws', worker) end
  end
end

local function genOfWorker(worker) return (getRec(worker)) end

-- Point the worker at generation g (nil: none), keeping its load.
local function setGen(worker, g)
  local _, a, p, r, old = getRec(worker)
  putRec(worker, old, g, a, p, r)
end

-- A generation id is a small integer, the bit offset of its column in every block bitmap; ids are
-- reused (smallest first) once gc has cleared the old generation's bits, so bitmaps stay short.
local function newGen(worker)
  local free = call('ZPOPMIN', P .. 'free')
  local g
  if #free > 0 then g = free[1] else g = tostring(call('INCR', P .. 'seq') - 1) end
  if worker then setGen(worker, g) end
  return g
end

-- Index h under generation g; true if it was not there.
local function indexAdd(g, h)
  if call('SADD', P .. 'g:' .. g, h) == 1 then
    call('SETBIT', P .. 'b:' .. h, g, 1)
    return true
  end
  return false
end

-- Clear g's bit in h's bitmap (deleting an all-zero bitmap).
local function unindex(g, h)
  local bk = P .. 'b:' .. h
  call('SETBIT', bk, g, 0)
  if call('BITCOUNT', bk) == 0 then call('DEL', bk) end
end

local function indexRemove(g, h)
  if call('SREM', P .. 'g:' .. g, h) == 1 then unindex(g, h) end
end

local function retire(g)
  call('SADD', P .. 'dead', g)
end

-- Add to a worker's load; its last request gone, the load is 0 0 0.
local function addLoad(worker, da, dp, dr)
  local g, a, p, r, old = getRec(worker)
  a, p, r = a + da, p + dp, r + dr
  if r <= 0 then a, p, r = 0, 0, 0 end
  putRec(worker, old, g, max(a, 0), max(p, 0), r)
end

-- Drop one reservation and its load. r:<rid> = "<active>\\n<prefill>\\n<expiry>\\n<worker>".
local function dropReservation(rid)
  local rk = P .. 'r:' .. rid
  local rec = call('GET', rk)
  if not rec then return false end
  local a, p, _, w = string.match(rec, '^(%d+)\\n(%d+)\\n(%-?%d+)\\n(.*)$')
  call('DEL', rk)
  call('ZREM', P .. 'resx', rid)
  call('SREM', P .. 'rw:' .. w, rid)
  addLoad(w, -tonumber(a), -tonumber(p), -1)
  return true
end

-- The request's prompt no longer counts as pending prefill (its first token came).
local function prefillDone(rid)
  local rk = P .. 'r:' .. rid
  local rec = call('GET', rk)
  if not rec then return end
  local a, p, e, w = string.match(rec, '^(%d+)\\n(%d+)\\n(%-?%d+)\\n(.*)$')
  if tonumber(p) == 0 then return end
  addLoad(w, 0, -tonumber(p), 0)
  call('SET', rk, a .. '\\n0\\n' .. e .. '\\n' .. w)
end

-- The settlements a router queued since its last call (markPrefillDone, release: they ride on its
-- next script call instead of a round trip each), applied first, in the order they were made:
-- ARGV[1] = m, then m pairs (kind: 'p' prefill done | 'r' release, request id). Returns the ARGV
-- offset of the script's own arguments (its ARGV[k] is ARGV[off + k]).
local function settleQueued()
  local m = tonumber(ARGV[1])
  for k = 2, 2 * m, 2 do
    if ARGV[k] == 'r' then dropReservation(ARGV[k + 1]) else prefillDone(ARGV[k + 1]) end
  end
  return 1 + 2 * m
end

-- Expired reservations (expiry <= now), at most budget per call; returns how many were due (fewer
-- than budget: none is left).
local function pruneReservations(now, budget)
  local ids = call('ZRANGEBYSCORE', P .. 'resx', '-inf', now, 'LIMIT', 0, budget)
  for _, rid in ipairs(ids) do dropReservation(rid) end
  return #ids
end

-- Expired approximate-mode entries (expiry <= now), at most budget per call; returns how many
-- generations had some due (0: no generation has an expired entry left).
local function pruneApprox(now, budget)
  local due = call('ZRANGEBYSCORE', P .. 'axq', '-inf', now, 'LIMIT', 0, 8)
  local work = 0
  for _, g in ipairs(due) do
    local ak = P .. 'ax:' .. g
    local hs = call('ZRANGEBYSCORE', ak, '-inf', now, 'LIMIT', 0, budget - work)
    for _, h in ipairs(hs) do
      call('ZREM', ak, h)
      indexRemove(g, h)
    end
    work = work + #hs
    local first = call('ZRANGE', ak, 0, 0, 'WITHSCORES')
    if #first == 0 then call('ZREM', P .. 'axq', g) else call('ZADD', P .. 'axq', first[2], g) end
    if work >= budget then break end
  end
  return #due
end

-- Unindex dead generations and abandoned stagings, at most budget blocks per call.
local function gc(now, budget)
  local stale = call('ZRANGEBYSCORE', P .. 'stg', '-inf', now, 'LIMIT', 0, 16)
  for _, g in ipairs(stale) do
    call('ZREM', P .. 'stg', g)
    call('HDEL', P .. 'stgo', g)
    retire(g)
  end
  local work = 0
  while work < budget do
    local g = call('SRANDMEMBER', P .. 'dead')
    if not g then break end
    local gk = P .. 'g:' .. g
    local hs = call('SPOP', gk, budget - work)
    for _, h in ipairs(hs) do unindex(g, h) end
    work = work + #hs + 1
    if call('EXISTS', gk) == 0 then
      call('SREM', P .. 'dead', g)
      call('DEL', P .. 'ax:' .. g)
      call('ZREM', P .. 'axq', g)
      call('ZADD', P .. 'free', g, g)
    end
  end
end
`;

/**
 * applyEvents, for one or more batches (each a worker's events in id order; a worker may appear in
 * several, applied in ARGV order). ARGV: now, gcBudget, then per batch: worker, m (the ARGV entries its
 * events take), and per event: id, kind (s|r|c), n, n hashes (stored block hashes / removed block
 * hashes / none). Returns one result per batch: {'ok', applied, last} or {'gap', applied, last,
 * expected, got}. A gap stops that batch only.
 */
const APPLY_EVENTS = `
gc(tonumber(ARGV[1]), tonumber(ARGV[2]))
local results = {}
local j = 3
while j <= #ARGV do
  local worker = ARGV[j]
  local stop = j + 2 + tonumber(ARGV[j + 1])
  local last = tonumber(call('HGET', P .. 'last', worker) or '-1')
  local g = genOfWorker(worker)
  local hasAx = g and call('EXISTS', P .. 'ax:' .. g) == 1
  local applied = 0
  local i = j + 2
  local result = nil
  while i < stop do
    local id = tonumber(ARGV[i])
    local kind = ARGV[i + 1]
    local n = tonumber(ARGV[i + 2])
    local first = i + 3
    i = first + n
    if id > last then
      if id ~= last + 1 then
        result = {'gap', applied, last, last + 1, id}
        break
      end
      if not g then g = newGen(worker); hasAx = false end
      if kind == 's' then
        for k = first, i - 1 do
          local h = ARGV[k]
          indexAdd(g, h)
          -- a block an event stored is no longer subject to approximate-mode expiry
          if hasAx then call('ZREM', P .. 'ax:' .. g, h) end
        end
      elseif kind == 'r' then
        for k = first, i - 1 do
          local h = ARGV[k]
          indexRemove(g, h)
          if hasAx then call('ZREM', P .. 'ax:' .. g, h) end
        end
      else
        retire(g)
        g = newGen(worker)
        hasAx = false
      end
      last = id
      applied = applied + 1
    end
  end
  if applied > 0 then call('HSET', P .. 'last', worker, int(last)) end
  results[#results + 1] = result or {'ok', applied, last}
  j = stop
end
return results
`;

/**
 * replaceWorker, one chunk. ARGV: gen ('' = allocate), now, stagingTtlMs, commit (1|0), worker,
 * lastEventId, gcBudget, token, hashes... Stages the hashes under the generation; on commit, makes it
 * the worker's generation (retiring the old one) and sets its last event id. Returns the generation.
 * `token` (random per replaceWorker call) owns the staging: after a flush a generation id is handed
 * out again, and without the owner check a second staging's chunks could land in the first one's.
 */
const STAGE = `
local g = ARGV[1]
local now = tonumber(ARGV[2])
local token = ARGV[8]
local stgk = P .. 'stg'
if g == '' then
  g = newGen(nil)
  call('HSET', P .. 'stgo', g, token)
elseif not call('ZSCORE', stgk, g) or call('HGET', P .. 'stgo', g) ~= token then
  return redis.error_reply('SY_STAGE_LOST snapshot staging ' .. g .. ' was dropped (flush or abandoned)')
end
call('ZADD', stgk, now + tonumber(ARGV[3]), g)
for k = 9, #ARGV do indexAdd(g, ARGV[k]) end
if ARGV[4] == '1' then
  local worker = ARGV[5]
  call('ZREM', stgk, g)
  call('HDEL', P .. 'stgo', g)
  local old = genOfWorker(worker)
  if old then retire(old) end
  setGen(worker, g)
  call('HSET', P .. 'last', worker, ARGV[6])
  gc(now, tonumber(ARGV[7]))
end
return g
`;

/** removeWorker. ARGV: worker, now, gcBudget. */
const REMOVE_WORKER = `
local worker = ARGV[1]
local g = genOfWorker(worker)
if g then retire(g) end
call('HDEL', P .. 'last', worker)
local rwk = P .. 'rw:' .. worker
for _, rid in ipairs(call('SMEMBERS', rwk)) do
  call('DEL', P .. 'r:' .. rid)
  call('ZREM', P .. 'resx', rid)
end
call('DEL', rwk)
call('DEL', recKey(worker))
call('SREM', P .. 'ws', worker)
gc(tonumber(ARGV[2]), tonumber(ARGV[3]))
return 1
`;

/** lastEventId + blockCount of one worker: {last, count}. ARGV: worker. */
const WORKER_STATE = `
local worker = ARGV[1]
local last = tonumber(call('HGET', P .. 'last', worker) or '-1')
local g = genOfWorker(worker)
local count = 0
if g then count = call('SCARD', P .. 'g:' .. g) end
return {last, count}
`;

/**
 * selectAndReserve. ARGV: the queued settlements (settleQueued: applied first, so the decision sees
 * this router's own releases), then requestId, promptTokens, blockSize, overlapWeight, scoring (kv|load),
 * temperature, random, now, reservationTtlMs, approxTtlMs (-1: not approximate), pruneBudget,
 * n, form ('L' packed | '' unpacked), the number of block keys, then the n candidates' record keys
 * (`<prefix>w:<worker>`) and the prompt's block bitmap keys (`<prefix>b:<hash>`), both built by the
 * caller: no string building per candidate or block here. Packed (every key shorter than 128 bytes):
 * two more ARGV, the record keys and the block keys, each key preceded by its length in one byte — a
 * handful of arguments instead of hundreds, far cheaper for the client to encode, and split here by
 * struct.unpack many keys a call. Unpacked: one ARGV per record key, then one per block key.
 * Returns two binary strings of little-endian doubles (exact for every integer the script handles):
 * the chosen index (1-based) and every candidate's overlap; then every candidate's record as
 * stored in `w:<worker>` (generation, reserved active blocks, pending prefill tokens, requests;
 * before this request). Two bulk strings instead of 1 + 3n integers keep the reply cheap to build,
 * send and parse, and copying the stored records builds no string per candidate.
 *
 * Redis calls in the common case (no settlement queued, no expired entry, no tie): ZRANGEBYSCORE ×2
 * (pruning), one MGET of the records, MGETs of the prompt's blocks (16 at a time, a quarter of the
 * depth matched once that is over 64), then SET NX + ZADD + SADD + SET to reserve.
 *
 * Cost model (Redis 7's Lua, callgrind): a loop iteration ~50 instructions per bytecode, any function
 * call (Lua or C) ~400, a new string ~1,000 for a 32-byte key (every byte hashed), a key read by MGET
 * ~1,700 plus ~3,600 per call. Per candidate and per block, tables, calls and strings are what to spare.
 */
const SELECT_AND_RESERVE = `
local o = settleQueued()
local rid = ARGV[o + 1]
local promptTokens = tonumber(ARGV[o + 2])
local bs = tonumber(ARGV[o + 3])
local weight = tonumber(ARGV[o + 4])
local loadMode = ARGV[o + 5] == 'load'
local temperature = tonumber(ARGV[o + 6])
local random = tonumber(ARGV[o + 7])
local now = tonumber(ARGV[o + 8])
local resTtl = tonumber(ARGV[o + 9])
local approxTtl = tonumber(ARGV[o + 10])
local budget = tonumber(ARGV[o + 11])
local n = tonumber(ARGV[o + 12])
local nkeys = tonumber(ARGV[o + 14])
local rkeys
-- the prompt's block keys split so far (keys[1..nk]); packed ones not split yet: kstr from kpos on
-- (matching usually stops long before the last key)
local keys, nk = {}, 0
local kstr, kpos
local ssub, srep = string.sub, string.rep
-- Packed: each key prefixed with its length (one byte), so struct.unpack splits a run of them in one
-- call (format 'Bc0' per key: the length read, then that many bytes) — a call per key would cost more
-- than the key's own read.
local function split(s, pos, count)
  local out = {sunpack('<' .. srep('Bc0', count), s, pos)}
  local nextPos = out[count + 1]
  out[count + 1] = nil
  return out, nextPos
end
if ARGV[o + 13] == '' then
  rkeys = {unpack(ARGV, o + 15, o + 14 + n)}
  keys = {unpack(ARGV, o + 15 + n)}
  nk = #keys
else
  local s = ARGV[o + 15]
  local pos = 1
  if n <= 1024 then
    rkeys, pos = split(s, 1, n)
  else
    rkeys = {}
    for i = 1, n, 1024 do
      local part
      part, pos = split(s, pos, math.min(i + 1023, n) - i + 1)
      for j = 1, #part do rkeys[i + j - 1] = part[j] end
    end
  end
  if pos ~= #s + 1 then return redis.error_reply('SY_INVALID malformed candidate list') end
  if nkeys > 0 then kstr, kpos = ARGV[o + 16], 1 end
end
if #rkeys ~= n then return redis.error_reply('SY_INVALID malformed candidate list') end
-- split packed keys until keys holds the first upto ones (or all), at most 1024 per call (the C stack)
local function need(upto)
  while kpos and nk < upto do
    local c = math.min(upto, nkeys, nk + 1024) - nk
    local part
    part, kpos = split(kstr, kpos, c)
    for j = 1, c do keys[nk + j] = part[j] end
    nk = nk + c
    if nk >= nkeys then kpos = nil end
  end
end
-- candidate i's worker id (its record key without the prefix)
local wfrom = #P + 3
local function cand(i) return ssub(rkeys[i], wfrom) end

local pruned = pruneReservations(now, budget)
local approxDue = pruneApprox(now, budget)
-- More expired reservations than one call prunes (a replica died with many in flight): the
-- candidates' own expired ones go now, so none counts in this decision (the rest go in later calls).
if pruned >= budget and #call('ZRANGEBYSCORE', P .. 'resx', '-inf', now, 'LIMIT', 0, 1) > 0 then
  for i = 1, n do
    for _, r in ipairs(call('SMEMBERS', P .. 'rw:' .. cand(i))) do
      local e = call('ZSCORE', P .. 'resx', r)
      if e and tonumber(e) <= now then dropReservation(r) end
    end
  end
end

-- every candidate's record (generation and load) in one read; a worker may be listed twice: both
-- entries score the same
local recs
if n <= 4096 then
  recs = call('MGET', unpack(rkeys))
else
  recs = {}
  for i = 1, n, 4096 do
    local part = call('MGET', unpack(rkeys, i, math.min(i + 4095, n)))
    for j = 1, #part do recs[i + j - 1] = part[j] end
  end
end
for i = 1, n do if not recs[i] then recs[i] = NOREC end end
-- the records side by side (also the reply's tail), unpacked a few calls at a time rather than one
-- call per candidate: 256 records (1024 values) per call, within the C stack's limit
local recstr = table.concat(recs)
local f
if n <= 256 then
  f = {sunpack('<' .. string.rep('d', 4 * n), recstr)}
else
  f = {}
  for i = 1, n, 256 do
    local c = math.min(i + 255, n) - i + 1
    local part = {sunpack('<' .. string.rep('d', 4 * c), recstr, 32 * (i - 1) + 1)}
    for q = 1, 4 * c do f[4 * (i - 1) + q] = part[q] end
  end
end
-- f holds candidate i's record at f[4i-3 .. 4i]: generation (-1: none), active, pending, requests.
-- The mask of the candidates' generations, one number per bitmap byte: mask[k] has bit b (0 = most
-- significant, as SETBIT numbers them) set for generation 8(k-1)+b; bytes lists the k in use. A worker
-- listed twice (or two sharing a generation) is one bit. No table per candidate and no call per bit:
-- in Redis's Lua every table insert and every call costs far more than arithmetic.
local BIT = {128, 64, 32, 16, 8, 4, 2, 1}
local mask, bytes, nb = {}, {}, 0
local nAlive = 0
for i = 1, 4 * n, 4 do
  local s = f[i]
  if s >= 0 then
    local r = s % 8
    local k = (s - r) / 8 + 1
    local bv = BIT[r + 1]
    local m = mask[k]
    if not m then
      nb = nb + 1
      bytes[nb] = k
      mask[k] = bv
      nAlive = nAlive + 1
    elseif m % (bv + bv) < bv then
      mask[k] = m + bv
      nAlive = nAlive + 1
    end
  end
end

-- overlap of each matched generation (slot)
local ovSlot = {}
local function settle(k, bits, depth)
  for b = 0, 7 do
    if band(bits, BIT[b + 1]) ~= 0 then
      ovSlot[(k - 1) * 8 + b] = depth
      nAlive = nAlive - 1
    end
  end
end

-- overlap: leading hashes held. Each block's bitmap (bit g = generation g holds it) is ANDed into
-- the mask of surviving candidate generations; blocks are fetched by MGET, 32 first, then batches
-- that double (fewer calls for a long match, few keys fetched past a short one).
local depth = 0
local prev = nil
while nAlive > 0 do
  -- a batch of a quarter of the depth matched so far, at least 16 (at most 1024: unpack's stack
  -- limit): a key costs more than a call's share, so few are fetched past the end of the match, and
  -- a long match still takes few calls
  local batch = depth < 64 and 16 or math.min(math.floor(depth / 4), 1024)
  need(depth + batch)
  local last = math.min(depth + batch, nk)
  if last <= depth then break end
  local vals = call('MGET', unpack(keys, depth + 1, last))
  for j = 1, #vals do
    local v = vals[j] or ''
    -- the same bitmap as the block before (interned strings: one pointer compare) drops nobody
    if v ~= prev then for q = 1, nb do
      local k = bytes[q]
      local m = mask[k]
      if m ~= 0 then
        local kept = band(m, sbyte(v, k) or 0)
        if kept ~= m then
          settle(k, band(m, bnot(kept)), depth)
          mask[k] = kept
        end
      end
    end end
    prev = v
    if nAlive == 0 then break end
    depth = depth + 1
  end
end
for _, k in ipairs(bytes) do
  if mask[k] ~= 0 then settle(k, mask[k], depth) end
end

-- Approximate-mode entries past their expiry that pruning (a bounded batch per call) has not reached
-- yet must not count, as in the memory table: a generation whose earliest expiry has passed gets its
-- matched prefix checked entry by entry — O(depth), and only while it has such a backlog (none when
-- pruning found no generation with an expired entry: pruning never makes one due).
if approxDue > 0 then
  local backlog = {}
  for _, g in ipairs(call('ZRANGEBYSCORE', P .. 'axq', '-inf', now)) do backlog[g] = true end
  if next(backlog) then for s, ov in pairs(ovSlot) do
    if ov > 0 then
      local g = int(s)
      if backlog[g] then
        need(ov)
        local ak, from = P .. 'ax:' .. g, #P + 3
        for d = 1, ov do
          local e = call('ZSCORE', ak, ssub(keys[d], from))
          if e and tonumber(e) <= now then
            ovSlot[s] = d - 1
            break
          end
        end
      end
    end
  end end
end

local cost = {}
local ovs = {}
local reqBlocks = math.ceil(promptTokens / bs)
local cmin, cmax = math.huge, -math.huge
for i = 1, n do
  local b = 4 * i
  local s = f[b - 3]
  local ov = s >= 0 and ovSlot[s] or 0
  ovs[i] = ov
  local c
  if loadMode then
    c = f[b - 2] + f[b - 1] / bs
  else
    -- max(x, 0) inline: a call per candidate costs more than the arithmetic
    local u, d = promptTokens - ov * bs, reqBlocks - ov
    if u < 0 then u = 0 end
    if d < 0 then d = 0 end
    c = weight * ((f[b - 1] + u) / bs) + (f[b - 2] + d)
  end
  cost[i] = c
  if c < cmin then cmin = c end
  if c > cmax then cmax = c end
end

-- selection: selector.ts chooseCandidate, step for step
local chosen = n
if temperature <= 0 then
  local tied = {}
  for i = 1, n do
    if cost[i] == cmin then tied[#tied + 1] = i end
  end
  -- among the cheapest, the fewest indexed blocks (tree size) win; one cheapest needs no sizes
  if #tied > 1 then
    local fewest = math.huge
    local ties = {}
    for _, i in ipairs(tied) do
      local s = f[4 * i - 3]
      local size = 0
      if s >= 0 then size = call('SCARD', P .. 'g:' .. int(s)) end
      if size < fewest then fewest = size; ties = {i}
      elseif size == fewest then ties[#ties + 1] = i end
    end
    tied = ties
  end
  chosen = tied[math.min(#tied - 1, math.floor(random * #tied)) + 1]
elseif cmax == cmin then
  chosen = math.min(n - 1, math.floor(random * n)) + 1
else
  local w = {}
  local total = 0
  for i = 1, n do
    w[i] = math.exp(-(cost[i] - cmin) / ((cmax - cmin) * temperature))
    total = total + w[i]
  end
  local target = random * total
  local acc = 0
  for i = 1, n do
    acc = acc + w[i]
    if acc > target then chosen = i; break end
  end
end

-- reserve (SET NX first: a request id already reserved is refused before anything is written)
local worker = cand(chosen)
local s = f[4 * chosen - 3]
if s < 0 then s = nil end
local ov = ovs[chosen]
local rec = recs[chosen]
local active, pending, requests = f[4 * chosen - 2], f[4 * chosen - 1], f[4 * chosen]
local uncached = max(promptTokens - ov * bs, 0)
local expiry = now + resTtl
-- "assume KV reuse" (Dynamo): blocks the worker already caches are shared, not new load
local newBlocks = max(reqBlocks - ov, 0)
if not call('SET', P .. 'r:' .. rid, int(newBlocks) .. '\\n' .. int(uncached) .. '\\n' .. int(expiry) .. '\\n' .. worker, 'NX') then
  return redis.error_reply('SY_INVALID request id ' .. rid .. ' is already reserved')
end
call('ZADD', P .. 'resx', int(expiry), rid)
call('SADD', P .. 'rw:' .. worker, rid)
call('SET', rkeys[chosen], spack('<dddd', s or -1, active + newBlocks, pending + uncached, requests + 1))
if rec == NOREC then call('SADD', P .. 'ws', worker) end

-- approximate mode: the chosen worker now caches the prompt until now + ttl (refreshed by reuse)
if approxTtl >= 0 then need(math.huge) end
local nh = nk
if approxTtl >= 0 and nh > 0 then
  local g = s and int(s) or newGen(worker)
  local ak = P .. 'ax:' .. g
  local exp = int(now + approxTtl)
  local from = #P + 3
  for k = 1, nh do
    local h = string.sub(keys[k], from)
    if indexAdd(g, h) then
      call('ZADD', ak, exp, h)
    elseif call('ZSCORE', ak, h) then
      call('ZADD', ak, exp, h)
    end
  end
  call('ZADD', P .. 'axq', 'LT', exp, g)
end

-- the chosen index and the overlaps as doubles (256 per pack call: unpack's stack limit), and the
-- records as read: two bulk strings, not joined (a joined copy would be hashed again)
local head
if n < 256 then
  head = spack('<' .. string.rep('d', n + 1), chosen, unpack(ovs))
else
  local packed = {spack('<d', chosen)}
  for i = 1, n, 256 do
    local j = math.min(i + 255, n)
    packed[#packed + 1] = spack('<' .. string.rep('d', j - i + 1), unpack(ovs, i, j))
  end
  head = table.concat(packed)
end
return {head, recstr}
`;

/** Queued settlements alone (a router with no decision to carry them): ARGV as settleQueued's. */
const SETTLE = `
settleQueued()
return 1
`;

/**
 * loads. ARGV: now, pruneBudget. Returns worker, "<active> <prefill> <requests>", … for every worker
 * with a request reserved.
 */
const LOADS = `
pruneReservations(tonumber(ARGV[1]), tonumber(ARGV[2]))
local out = {}
for _, w in ipairs(call('SMEMBERS', P .. 'ws')) do
  local _, a, p, r = getRec(w)
  if r > 0 then
    out[#out + 1] = w
    out[#out + 1] = int(a) .. ' ' .. int(p) .. ' ' .. int(r)
  end
end
return out
`;

const script = (body: string): string => PRELUDE + body;

/** Script name → Lua source (ioredis `defineCommand`, one key each). */
export const ROUTING_SCRIPTS = {
  syApplyEvents: script(APPLY_EVENTS),
  syStage: script(STAGE),
  syRemoveWorker: script(REMOVE_WORKER),
  syWorkerState: script(WORKER_STATE),
  sySelectAndReserve: script(SELECT_AND_RESERVE),
  sySettle: script(SETTLE),
  syLoads: script(LOADS),
} as const;

export type RoutingScriptName = keyof typeof ROUTING_SCRIPTS;
