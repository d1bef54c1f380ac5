import RedisClient

/// The Lua scripts that make each queue transition one atomic step (DESIGN.md §3).
enum QueueScripts {
    /// Takes up to ARGV[1] jobs (the staged one first, then the oldest of the list) into the
    /// worker's in-flight hash under fresh handles, and renews the worker's lease.
    /// KEYS: jobs, inflight, handle counter, workers, staging. ARGV: max, worker id, lease ms.
    /// Returns a flat list: handle (an integer reply: no string to allocate), job, handle, job, …
    static let fetch = RedisScript("""
    local max = tonumber(ARGV[1])
    local taken = {}
    local staged = redis.call('LRANGE', KEYS[5], 0, -1)
    if #staged > 0 then redis.call('DEL', KEYS[5]) end
    for i = #staged, 1, -1 do taken[#taken + 1] = staged[i] end
    if #taken < max then
      local more = redis.call('RPOP', KEYS[1], max - #taken)
      if more then for _, job in ipairs(more) do taken[#taken + 1] = job end end
    end
    local now = redis.call('TIME')
    local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    redis.call('ZADD', KEYS[4], now_ms + tonumber(ARGV[3]), ARGV[2])
    if #taken == 0 then return {} end
    local last = redis.call('INCRBY', KEYS[3], #taken)
    local first = last - #taken
    local fields, out = {}, {}
    for i, job in ipairs(taken) do
      local handle = first + i
      fields[2 * i - 1] = tostring(handle) -- a field name must be text; Lua writes integers below 1e14 whole
      fields[2 * i] = job
      out[2 * i - 1] = handle
      out[2 * i] = job
    end
    redis.call('HSET', KEYS[2], unpack(fields))
    return out
    """)

    /// Records a batch of outcomes. A job leaves the in-flight hash in the same step that
    /// records its last outcome. A job no longer in the hash was recovered by another worker,
    /// which will record it, so nothing is written for it here.
    /// Recovery and hand-back empty the whole hash, and handles only grow: if the batch's lowest
    /// handle is still there, every handle of the batch is, and one HDEL acks them all (a call
    /// per job was the largest cost in Redis). Otherwise each job is checked on its own.
    /// KEYS: inflight, results, dead letters, invalid tokens, stats, schedule.
    /// ARGV: results cap, dead cap, invalid cap, lowest handle, number of jobs, then per job
    /// (handle, counter pair, kind, a, b), then (counter name, count) entries: the batch's
    /// totals if every job is owned. A job counts under entries 2p-1 and 2p of its pair p.
    /// Streams are trimmed once per batch, not per entry.
    /// Kinds: r = result a; d = result a, dead letter b; i = result a, invalid token b;
    /// s = schedule member a at b ("+ms" from now or "=unix ms"). Upper case: a fan-out piece
    /// that is not the job's last, so the job stays in flight.
    static let complete = RedisScript("""
    local call = redis.call
    local KIND = {r = 'r', d = 'd', i = 'i', s = 's', R = 'r', D = 'd', I = 'i', S = 's'}
    local first_counter = 6 + 5 * tonumber(ARGV[5])
    local names, counts = {}, {}
    for j = first_counter, #ARGV, 2 do
      names[#names + 1] = ARGV[j]
      counts[#counts + 1] = tonumber(ARGV[j + 1])
    end
    local inflight, results = KEYS[1], KEYS[2]
    local all = call('HEXISTS', inflight, ARGV[4]) == 1
    local acks, n_acks, acked, now_ms, added = {}, 0, 0, nil, {}
    for i = 6, first_counter - 1, 5 do
      local kind = ARGV[i + 2]
      local base = KIND[kind]
      local last = kind == base
      local owned = all
      if all then
        if last then n_acks = n_acks + 1; acks[n_acks] = ARGV[i] end
      elseif last then
        owned = call('HDEL', inflight, ARGV[i]) == 1
      else
        owned = call('HEXISTS', inflight, ARGV[i]) == 1
      end
      if owned then
        acked = acked + 1
        kind = base
        if kind == 's' then
          local at = ARGV[i + 4]
          local score = tonumber(string.sub(at, 2))
          if string.sub(at, 1, 1) == '+' then
            if not now_ms then
              local now = call('TIME')
              now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
            end
            score = now_ms + score
          end
          call('ZADD', KEYS[6], score, ARGV[i + 3])
        else
          call('XADD', results, '*', 'record', ARGV[i + 3])
          added[2] = true
          if kind == 'd' then call('XADD', KEYS[3], '*', 'record', ARGV[i + 4]); added[3] = true end
          if kind == 'i' then call('XADD', KEYS[4], '*', 'record', ARGV[i + 4]); added[4] = true end
        end
      else
        local p = tonumber(ARGV[i + 1])
        counts[2 * p - 1] = counts[2 * p - 1] - 1
        counts[2 * p] = counts[2 * p] - 1
      end
    end
    if n_acks > 0 then call('HDEL', inflight, unpack(acks)) end
    for k = 2, 4 do
      if added[k] then call('XTRIM', KEYS[k], 'MAXLEN', '~', ARGV[k - 1]) end
    end
    for j = 1, #names do
      if counts[j] > 0 then call('HINCRBY', KEYS[5], names[j], counts[j]) end
    end
    return acked
    """)

    /// Gives back a stopping worker's unfinished jobs: they go to the consuming end of the
    /// list so they are taken next, and the worker leaves the registry. Touching the take-back
    /// key aborts any completion transaction of that worker that WATCHes it.
    /// KEYS: inflight, staging, jobs, workers, take-back. ARGV: worker id. Returns how many went back.
    static let handBack = RedisScript("""
    redis.call('INCR', KEYS[5])
    redis.call('PEXPIRE', KEYS[5], 60000)
    local jobs = redis.call('HVALS', KEYS[1])
    local staged = redis.call('LRANGE', KEYS[2], 0, -1)
    for i = 1, #staged do jobs[#jobs + 1] = staged[i] end
    for _, job in ipairs(jobs) do redis.call('RPUSH', KEYS[3], job) end
    redis.call('DEL', KEYS[1], KEYS[2])
    redis.call('ZREM', KEYS[4], ARGV[1])
    return #jobs
    """)

    /// The housekeeper's tick: renews this worker's lease, moves due retries and scheduled jobs
    /// to the consuming end of the list, and names the workers whose lease ran out.
    /// KEYS: workers, schedule, jobs, stats. ARGV: worker id, lease ms, most to promote.
    static let tick = RedisScript("""
    local now = redis.call('TIME')
    local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
    local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[3]))
    for _, job in ipairs(due) do
      redis.call('RPUSH', KEYS[3], job)
      redis.call('ZREM', KEYS[2], job)
    end
    if #due > 0 then redis.call('HINCRBY', KEYS[4], 'promoted', #due) end
    local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms)
    local out = {}
    for _, w in ipairs(expired) do if w ~= ARGV[1] then out[#out + 1] = w end end
    return out
    """)

    /// Takes back the jobs of a worker whose lease ran out (or of this worker's previous life):
    /// each goes to the consuming end of the list with its recovery count raised, or, past the
    /// limit, to the dead letters as a poison pill. Only a still-expired lease is recovered,
    /// so two workers never recover the same one twice.
    /// Touching the take-back key aborts a completion transaction the worker may have under way.
    /// KEYS: inflight, staging, jobs, workers, dead letters, results, stats, take-back.
    /// ARGV: worker id, max recoveries, dead cap, results cap, "force" to skip the lease check.
    static let recover = RedisScript("""
    local now = redis.call('TIME')
    local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    local lease = redis.call('ZSCORE', KEYS[4], ARGV[1])
    if ARGV[5] ~= 'force' and (not lease or tonumber(lease) >= now_ms) then return {0, 0} end
    redis.call('INCR', KEYS[8])
    redis.call('PEXPIRE', KEYS[8], 60000)
    local jobs = redis.call('HVALS', KEYS[1])
    local staged = redis.call('LRANGE', KEYS[2], 0, -1)
    for i = #staged, 1, -1 do jobs[#jobs + 1] = staged[i] end
    local requeued, poisoned = 0, 0
    for _, job in ipairs(jobs) do
      local n, wrapped, inner = 1, nil, job
      if string.sub(job, 1, 10) == '{"_apnsw":' then
        local ok, env = pcall(cjson.decode, job)
        local at = string.find(job, ',"job":', 1, true)
        if ok and type(env) == 'table' and type(env._apnsw) == 'table' and at then
          local meta = env._apnsw
          n = (tonumber(meta.recoveries) or 0) + 1
          meta.recoveries = n
          inner = string.sub(job, at + 7, -2)
          wrapped = '{"_apnsw":' .. cjson.encode(meta) .. string.sub(job, at)
        end
      end
      if not wrapped then wrapped = '{"_apnsw":{"recoveries":1},"job":' .. job .. '}' end
      if n > tonumber(ARGV[2]) then
        local detail = 'taken back from dead workers ' .. n .. ' times: it may be what kills them'
        local rec = '{"v":1,"worker":' .. cjson.encode(ARGV[1]) .. ',"time_ms":' .. now_ms ..
          ',"status":"dead_letter","reason":"PoisonPill","detail":' .. cjson.encode(detail) ..
          ',"recoveries":' .. n .. ',"attempts":[],"job_text":' .. cjson.encode(inner) .. '}'
        redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[3], '*', 'record', rec)
        redis.call('XADD', KEYS[6], 'MAXLEN', '~', ARGV[4], '*', 'record', rec)
        poisoned = poisoned + 1
      else
        redis.call('RPUSH', KEYS[3], wrapped)
        requeued = requeued + 1
      end
    end
    redis.call('DEL', KEYS[1], KEYS[2])
    if ARGV[5] ~= 'force' then redis.call('ZREM', KEYS[4], ARGV[1]) end
    if requeued > 0 then redis.call('HINCRBY', KEYS[7], 'recovered', requeued) end
    if poisoned > 0 then redis.call('HINCRBY', KEYS[7], 'dead_lettered', poisoned); redis.call('HINCRBY', KEYS[7], 'poison_pills', poisoned) end
    return {requeued, poisoned}
    """)
}
