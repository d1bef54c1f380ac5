import RedisClient

/// The Lua scripts that make each queue transition one atomic step (DESIGN.md §3).
enum QueueScripts {
    /// Takes up to ARGV[1] jobs (the staged one first, then the oldest of the list) into the
    /// worker's in-flight hash under fresh handles, and renews the worker's lease.
    /// KEYS: jobs, inflight, handle counter, workers, staging. ARGV: max, worker id, lease ms.
    /// Returns a flat list: handle, job, handle, job, …
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
      local handle = tostring(first + i)
      fields[#fields + 1] = handle
      fields[#fields + 1] = job
      out[#out + 1] = handle
      out[#out + 1] = job
    end
    redis.call('HSET', KEYS[2], unpack(fields))
    return out
    """)

    /// Acks a batch: each job leaves the in-flight hash in the same step that records its
    /// outcome. A job no longer in the hash was recovered by another worker, which will
    /// record it, so nothing is written for it here.
    /// KEYS: inflight, results, dead letters, invalid tokens, stats.
    /// ARGV: results cap, dead cap, invalid cap, then groups of (handle, stat, result, dead, invalid);
    /// an empty record is not written. Returns how many jobs were acked.
    static let complete = RedisScript("""
    local acked = 0
    local counts = {}
    for i = 4, #ARGV, 5 do
      if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
        acked = acked + 1
        counts[ARGV[i + 1]] = (counts[ARGV[i + 1]] or 0) + 1
        if ARGV[i + 2] ~= '' then redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'record', ARGV[i + 2]) end
        if ARGV[i + 3] ~= '' then redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'record', ARGV[i + 3]) end
        if ARGV[i + 4] ~= '' then redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'record', ARGV[i + 4]) end
      end
    end
    for name, n in pairs(counts) do redis.call('HINCRBY', KEYS[5], name, n) end
    return acked
    """)

    /// Gives back a stopping worker's unfinished jobs: they go to the consuming end of the
    /// list so they are taken next, and the worker leaves the registry.
    /// KEYS: inflight, staging, jobs, workers. ARGV: worker id. Returns how many went back.
    static let handBack = RedisScript("""
    local jobs = redis.call('HVALS', KEYS[1])
    local staged = redis.call('LRANGE', KEYS[2], 0, -1)
    for i = 1, #staged do jobs[#jobs + 1] = staged[i] end
    for _, job in ipairs(jobs) do redis.call('RPUSH', KEYS[3], job) end
    redis.call('DEL', KEYS[1], KEYS[2])
    redis.call('ZREM', KEYS[4], ARGV[1])
    return #jobs
    """)
}
