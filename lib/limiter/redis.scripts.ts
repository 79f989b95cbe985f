/**
 * The Lua scripts of the Redis limiter (docs/design.md §16.3), as named constants: the Redis analogue of
 * lib/sql. Each runs atomically on one Redis (single-node: the scripts span keys). The clock is
 * Redis `TIME`, in ms. Redis ≥ 5 (effects replication makes TIME before writes safe).
 */
export interface RedisScript {
  /** Command name ioredis defines for the script. */
  readonly name: string;
  readonly lua: string;
}

function script(name: string, lua: string): RedisScript {
  return Object.freeze({ name, lua: lua.trim() });
}

/**
 * Admission, one atomic script. KEYS = the gate sorted sets `<prefix>conc:<key>` (ng of them), the
 * rate hashes `<prefix>rate:<key>` (nr), the seed marker, then the closed marks
 * `<prefix>closed:conc:<key>` of the gates (ng) and `<prefix>closed:rate:<key>` of the buckets
 * (nr). ARGV = ng, nr, leaseTtl ms, then per
 * gate its capacity, per bucket its rate (tokens/s) and burst, then the entry count and per
 * entry: holder name (`id:seq`, the member it becomes), gate index (0 = none), bucket index
 * (0 = none), weight.
 * - No seed marker (Redis restarted empty or was flushed): answers {-1} and changes nothing;
 *   the caller re-adds the holders Postgres knows, then retries (docs/design.md §26.9).
 * - Closed (docs/design.md §16.5): a gate or bucket whose closed mark exists (a throttle set it,
 *   CLOSE_SCRIPT; it expires at the deadline) admits nothing: free 0, bucket shut.
 * - Gate: scores ≤ now are pruned (crashed holders expire with their lease); free = cap − size.
 *   In order, a gated entry reserves a rank while free is positive (kept even if its bucket
 *   denies) and is added, score now + leaseTtl, only if finally admitted.
 * - Bucket `{t, s}`: cold = burst; tokens = min(burst, s + Δms·rate/1000); granted in order
 *   while tokens ≥ weight; after one denial the key denies the rest. Written back with a TTL
 *   of burst/rate s + 1 s (1 h at rate 0).
 * Answers one code per entry: 1 admitted, 2 denied by its gate, 3 denied by its bucket.
 */
export const ADMIT_SCRIPT = script(
  'gdAdmit',
  `
local ng = tonumber(ARGV[1])
local nr = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
if redis.call('EXISTS', KEYS[ng + nr + 1]) == 0 then return {-1} end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local p = 4
local free = {}
for i = 1, ng do
  local cap = tonumber(ARGV[p]); p = p + 1
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  free[i] = cap - redis.call('ZCARD', KEYS[i])
  if redis.call('EXISTS', KEYS[ng + nr + 1 + i]) == 1 then free[i] = 0 end
end
local tokens, rate, burst, shut, used = {}, {}, {}, {}, {}
for j = 1, nr do
  rate[j] = tonumber(ARGV[p]); burst[j] = tonumber(ARGV[p + 1]); p = p + 2
  local h = redis.call('HMGET', KEYS[ng + j], 't', 's')
  if h[1] and h[2] then
    local elapsed = now - tonumber(h[1])
    if elapsed < 0 then elapsed = 0 end
    tokens[j] = math.min(burst[j], tonumber(h[2]) + elapsed * rate[j] / 1000)
  else
    tokens[j] = burst[j]
  end
  shut[j] = redis.call('EXISTS', KEYS[ng + nr + 1 + ng + j]) == 1
  used[j] = false
end
local n = tonumber(ARGV[p]); p = p + 1
local out = {}
for k = 1, n do
  local id = ARGV[p]
  local gi = tonumber(ARGV[p + 1])
  local ri = tonumber(ARGV[p + 2])
  local w = tonumber(ARGV[p + 3])
  p = p + 4
  local code = 1
  if gi > 0 then
    if free[gi] > 0 then free[gi] = free[gi] - 1 else code = 2 end
  end
  if code == 1 and ri > 0 then
    if (not shut[ri]) and tokens[ri] >= w then
      tokens[ri] = tokens[ri] - w
      used[ri] = true
    else
      shut[ri] = true
      code = 3
    end
  end
  if code == 1 and gi > 0 then redis.call('ZADD', KEYS[gi], now + lease, id) end
  out[k] = code
end
for j = 1, nr do
  if used[j] then
    local key = KEYS[ng + j]
    redis.call('HSET', key, 't', tostring(now), 's', tostring(tokens[j]))
    local ttl = 3600000
    if rate[j] > 0 then ttl = math.ceil(burst[j] / rate[j] * 1000) + 1000 end
    redis.call('PEXPIRE', key, ttl)
  end
end
return out
`,
);

/**
 * Throttle (docs/design.md §16.5). KEYS = per closure its closed mark, then its gate sorted set or
 * rate hash; ARGV = per closure its ms, its kind (`rate` / `conc`) and, for a bucket, the TTL
 * its hash gets past the deadline (its refill time, ms). Sets the mark to expire `ms` from now
 * unless a later deadline is set already; a bucket's hash is drained to 0 tokens stamped at
 * the deadline, so it reopens empty and refills at its rate (as the PostgreSQL limiter does).
 */
export const CLOSE_SCRIPT = script(
  'gdClose',
  `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
for i = 1, #KEYS / 2 do
  local mark = KEYS[i * 2 - 1]
  local ms = tonumber(ARGV[i * 3 - 2])
  local left = redis.call('PTTL', mark)
  if left < ms then
    redis.call('SET', mark, tostring(now + ms), 'PX', ms)
    left = ms
  end
  if ARGV[i * 3 - 1] == 'rate' then
    local data = KEYS[i * 2]
    redis.call('HSET', data, 't', tostring(now + left), 's', '0')
    redis.call('PEXPIRE', data, left + tonumber(ARGV[i * 3]))
  end
end
return #KEYS / 2
`,
);

/**
 * Credit of slots rebuilt from a row (a fenced cancel, which knows the row but not the claim's
 * holder name): removes every holder of each row id, the bare id (a holder re-seeded from an
 * older build) and any `id:seq`. KEYS = gate sorted sets, ARGV = one row id per key (same
 * order). A gate set holds at most its capacity of live members plus expired ones, so the scan
 * of each is small.
 */
export const CREDIT_ROW_SCRIPT = script(
  'gdCreditRow',
  `
local removed = 0
for i = 1, #KEYS do
  local id = ARGV[i]
  local prefix = id .. ':'
  removed = removed + redis.call('ZREM', KEYS[i], id)
  for _, m in ipairs(redis.call('ZRANGE', KEYS[i], 0, -1)) do
    if string.sub(m, 1, #prefix) == prefix then removed = removed + redis.call('ZREM', KEYS[i], m) end
  end
end
return removed
`,
);

/**
 * Heartbeat renewal: raises the score of live holders to now + leaseTtl and never re-adds a
 * member that is gone (ZADD XX GT). KEYS = gate sorted sets, ARGV = leaseTtl ms, then one
 * holder name (`id:seq`) per key (same order).
 */
export const RENEW_SCRIPT = script(
  'gdRenew',
  `
local time = redis.call('TIME')
local score = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', 'GT', score, ARGV[i + 1])
end
return #KEYS
`,
);

/**
 * Re-seeding after Redis lost its data (docs/design.md §26.9). KEYS = the seed marker, then one gate
 * sorted set per holder; ARGV = per holder its name (`id:seq`) and remaining lease in ms (from
 * Postgres).
 * Adds each holder that is not there yet (ZADD NX; a live score is never lowered), then sets
 * the marker, in one atomic step: no admit runs between the re-add and the marker. The marker
 * lives a day, so a database that is gone leaves nothing behind; the daily re-seed it causes
 * is idempotent.
 */
export const SEED_SCRIPT = script(
  'gdSeed',
  `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], 'NX', now + tonumber(ARGV[(i - 2) * 2 + 2]), ARGV[(i - 2) * 2 + 1])
end
redis.call('SET', KEYS[1], tostring(now), 'PX', 86400000)
return #KEYS - 1
`,
);
