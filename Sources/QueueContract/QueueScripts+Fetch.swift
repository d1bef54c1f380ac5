import RedisClient

/// Taking jobs: the fetch and its lost-reply look-up, their calls, and their replies read.
extension QueueScripts {
    /// Moves up to ARGV[1] jobs (the staged ones first, then the oldest of the list) into a new
    /// batch list, registers the batch with its first handle, and renews the worker's lease.
    /// The jobs never pass through Lua: SORT … STORE copies them inside Redis (BY nosort keeps a
    /// list's order; DESC reads from the consuming end). Copying each job into Lua and back cost
    /// Redis more than everything else a fetch does. The worker reads the batch with an LRANGE
    /// sent in the same write.
    /// With ARGV[7] "1" it takes one suspect (a job taken back twice or more) alone instead.
    /// A fetch sent on a connection the fetcher has since given up takes nothing: `lookUpLost`
    /// raised the fetcher's fence (ARGV[5], a field of the batches hash) past its epoch.
    /// KEYS: jobs, batch, batches, workers, staging, handle counter, suspects.
    /// ARGV: max, worker id, lease ms, batch id, fence field, connection epoch, a suspect ("1"/"0").
    /// Returns {first handle, number of jobs, suspects waiting}.
    public static let fetch = RedisScript(
        """
        local call = redis.call
        local fence = call('HGET', KEYS[3], ARGV[5])
        if fence and tonumber(fence) > tonumber(ARGV[6]) then return {0, 0, 0} end
        local n = 0
        if ARGV[7] == '1' then
          if call('LMOVE', KEYS[7], KEYS[2], 'RIGHT', 'LEFT') then n = 1 end
        else
          local max = tonumber(ARGV[1])
          local staged = call('LLEN', KEYS[5])
          if max > staged then
            n = call('SORT', KEYS[1], 'BY', 'nosort', 'DESC', 'LIMIT', 0, max - staged, 'STORE', KEYS[2])
            if n > 0 then call('LTRIM', KEYS[1], 0, -n - 1) end
          end
          for _ = 1, staged do call('LMOVE', KEYS[5], KEYS[2], 'LEFT', 'LEFT') end
          n = n + staged
        end
        local now = call('TIME')
        local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
        call('ZADD', KEYS[4], now_ms + tonumber(ARGV[3]), ARGV[2])
        local suspects = call('LLEN', KEYS[7])
        if n == 0 then return {0, 0, suspects} end
        local first = call('INCRBY', KEYS[6], n) - n + 1
        call('HSET', KEYS[3], ARGV[4], first)
        return {first, n, suspects}
        """)

    /// Looks up a batch whose fetch reply was lost: its first handle if the fetch ran, else 0.
    /// First it raises the fetcher's fence to the new connection's epoch, so that a fetch still
    /// on its way on an old connection takes nothing: one field per fetcher, never one per batch.
    /// KEYS: batches. ARGV: batch id, fence field, epoch.
    public static let lookUpLost = RedisScript(
        """
        redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
        return tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0
        """)

    /// One call of `fetch`, its keys and arguments in the script's order.
    public static func fetchCall(
        _ keys: QueueKeys, worker: String, batch: String, max: Int, leaseMs: Int, fence: String, epoch: Int, suspect: Bool
    ) -> RedisArgs {
        var args = RedisArgs(
            script: fetch,
            keys: [
                keys.jobs, keys.batch(worker: worker, id: batch), keys.batches(worker: worker), keys.workers,
                keys.staging(worker: worker), keys.handleCounter, keys.suspects,
            ])
        args.append(max)
        args.append(worker)
        args.append(leaseMs)
        args.append(batch)
        args.append(fence)
        args.append(epoch)
        args.append(suspect ? 1 : 0)
        return args
    }

    /// One call of `lookUpLost`.
    public static func lookUpLostCall(_ keys: QueueKeys, worker: String, batch: String, fence: String, epoch: Int) -> RedisArgs {
        var args = RedisArgs(script: lookUpLost, keys: [keys.batches(worker: worker)])
        args.append(batch)
        args.append(fence)
        args.append(epoch)
        return args
    }

    /// The batch's jobs, sent after `fetch` or `lookUpLost` in the same write.
    public static func batchListCall(_ keys: QueueKeys, worker: String, batch: String) -> RedisArgs {
        RedisArgs(["LRANGE", keys.batch(worker: worker, id: batch), "0", "-1"])
    }

    /// An empty queue: Redis holds the request up to `timeout` seconds for the next job, and moves
    /// it to the worker's staging list, which the next fetch takes first.
    public static func blockingWaitCall(_ keys: QueueKeys, worker: String, timeout: String) -> RedisArgs {
        RedisArgs(["BLMOVE", keys.jobs, keys.staging(worker: worker), "RIGHT", "LEFT", timeout])
    }
}

/// The jobs one fetch took, in order: job i has handle `first + i`.
public struct TakenJobs {
    public var first: Int64 = 0
    /// Suspects waiting in their list, as the fetch script saw it.
    public var suspectsWaiting = 0
    /// The jobs end to end in one buffer, and each one's range: a batch's jobs cost one
    /// allocation, and share it until the last is done.
    public var bytes: [UInt8] = []
    public var ranges: [Range<Int>] = []

    public var count: Int { ranges.count }
    public var isEmpty: Bool { ranges.isEmpty }

    /// Two replies read flat: the fetch script's {first handle, count, suspects} (or the lost batch's
    /// first handle, 0 if its fetch never ran), then the batch's list.
    public init(_ reply: RedisFlatReply) throws(RedisError) {
        guard reply.count > 0 else { throw .server("no reply to the fetch") }
        let list: Int
        if reply.isArray(0) {
            guard let first = reply.integer(1) else { throw .server("the fetch script answered no handle") }
            self.first = first
            suspectsWaiting = Int(reply.integer(3) ?? 0)
            list = 4
        } else {
            first = reply.integer(0) ?? 0
            list = 1
        }
        guard first > 0 else { return }
        guard list < reply.count, reply.isArray(list) else { throw .server("the batch's jobs came back as no list") }
        (bytes, ranges) = reply.sharedStrings((list + 1)..<reply.count)
    }
}
