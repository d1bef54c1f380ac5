import Delivery
import RedisClient

/// The Lua scripts that make each queue transition one atomic step (DESIGN.md §3).
public enum QueueScripts {
    /// After the worker's lease may have lapsed: renews it, and says which of its batches are
    /// still there, in one step, so that no take-back comes between the answer and the sends.
    /// KEYS: workers, then the batches' lists. ARGV: worker id, lease ms. Returns 1 or 0 per batch.
    public static let confirmLease = RedisScript(
        """
        local now = redis.call('TIME')
        local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
        redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
        local out = {}
        for k = 2, #KEYS do out[#out + 1] = redis.call('EXISTS', KEYS[k]) end
        return out
        """)

    /// One call of `confirmLease` for `batches`.
    public static func confirmLeaseCall(_ keys: QueueKeys, worker: String, leaseMs: Int, batches: [TakenBatch]) -> RedisArgs {
        var args = RedisArgs(script: confirmLease, keys: [keys.workers] + batches.map { keys.batch(worker: worker, id: $0.id) })
        args.append(worker)
        args.append(leaseMs)
        return args
    }

    /// `confirmLease`'s answer: whether each batch is still there, in the order asked.
    public static func readConfirmation(_ reply: RedisFlatReply, batches: Int) throws(RedisError) -> [Bool] {
        guard reply.isArray(0), reply.count == batches + 1 else { throw .server("the lease confirmation answered no list") }
        return (0..<batches).map { reply.integer($0 + 1) != 0 }
    }

    /// The housekeeper's tick: renews this worker's lease, moves due retries and scheduled jobs
    /// to the consuming end of the list (a suspect to the suspects' list), and names the workers
    /// whose lease ran out.
    /// KEYS: workers, schedule, jobs, stats, suspects. ARGV: worker id, lease ms, most to promote.
    public static let tick = RedisScript(
        placeJob + "\n" + """
            local now = redis.call('TIME')
            local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
            redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
            local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms, 'LIMIT', 0, tonumber(ARGV[3]))
            for _, job in ipairs(due) do
              place(job, KEYS[3], KEYS[5])
              redis.call('ZREM', KEYS[2], job)
            end
            if #due > 0 then redis.call('HINCRBY', KEYS[4], 'promoted', #due) end
            local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. now_ms)
            local out = {}
            for _, w in ipairs(expired) do if w ~= ARGV[1] then out[#out + 1] = w end end
            return out
            """)

    /// One `tick` (run by a blocking connection): renews `worker`'s lease, promotes up to
    /// `promote` due jobs. Its answer: the workers whose lease ran out.
    public static func tickCall(_ keys: QueueKeys, worker: String, leaseMs: Int, promote: Int = 1000) -> RedisArgs {
        var args = RedisArgs(script: tick, keys: [keys.workers, keys.scheduled, keys.jobs, keys.stats, keys.suspects])
        args.append(worker)
        args.append(leaseMs)
        args.append(promote)
        return args
    }

    /// Requeues a dead letter atomically: the letter leaves its stream in the same step its job
    /// enters the queue. KEYS: dead letters, jobs. ARGV: the letter's entry id, the job. Returns 1
    /// or 0 (the letter was gone).
    public static let requeueDeadLetter = RedisScript(
        """
        if redis.call('XDEL', KEYS[1], ARGV[1]) == 1 then
          redis.call('LPUSH', KEYS[2], ARGV[2])
          return 1
        end
        return 0
        """)

    /// One call of `requeueDeadLetter`.
    public static func requeueDeadLetterCall(_ keys: QueueKeys, entry: String, job: [UInt8]) -> RedisArgs {
        var args = RedisArgs(script: requeueDeadLetter, keys: [keys.deadLetters, keys.jobs])
        args.append(entry)
        args.append(bytes: job)
        return args
    }

    /// Lua that puts a job back in line: a suspect (an envelope taken back twice or more) at the
    /// far end of the suspects' list, which fetchers take one at a time; any other job at the
    /// consuming end of the jobs list, to go next at full speed.
    static let placeJob = """
        local function place(job, jobs, suspects)
          local at = string.sub(job, 1, 10) == '{"_apnsw":' and string.find(job, ',"job":', 1, true)
          local n = at and tonumber(string.match(string.sub(job, 1, at), '"recoveries":(%d+)'))
          if n and n >= 2 then redis.call('LPUSH', suspects, job) else redis.call('RPUSH', jobs, job) end
        end
        """
}
