import RedisClient

/// The queue remembers the most shards a worker has served it with (`QueueKeys.shardsRecord`), so
/// that lowering `shards` strands nothing: a worker set to fewer still serves the shards beyond
/// its setting while they hold anything (jobs, schedules, suspects, a worker's lease), and
/// apnsctl and the dashboard show them as draining. Once they are all empty at a worker's start,
/// the record comes down to that worker's count.
public enum ShardRecord {
    /// Records `shards` if it is the most so far; returns the most.
    static let record = RedisScript(
        """
        local seen = tonumber(redis.call('HGET', KEYS[1], 'max')) or 1
        if tonumber(ARGV[1]) > seen then redis.call('HSET', KEYS[1], 'max', ARGV[1]); seen = tonumber(ARGV[1]) end
        return seen
        """)

    /// The shards beyond `configured` (all of them when `configured` is 1, which uses none)
    /// up to `recorded`.
    public static func beyond(configured: Int, recorded: Int) -> Range<Int> {
        guard recorded > 1, recorded > configured else { return 0..<0 }
        return (configured > 1 ? configured : 0)..<recorded
    }

    /// At a worker's start: records its `configured` count, and returns how many shards it
    /// serves (at least `configured`) and what the ones beyond hold. `connect` gives the
    /// connection for a key set (on a cluster, its slot's master).
    public static func shardsToServe(
        queue: String, configured: Int, connect: (QueueKeys) throws(RedisError) -> BlockingRedisConnection
    ) throws(RedisError) -> (serve: Int, holding: [Int: Int64]) {
        let own = QueueKeys(queue: queue)
        let r = try connect(own)
        let seen = Int(try r.run(record, keys: [own.shardsRecord], args: [Array(String(configured).utf8)]).integer ?? 1)
        var holding: [Int: Int64] = [:]
        var needed = 0
        for i in beyond(configured: configured, recorded: seen) {
            let set = QueueKeys(queue: queue, shard: i)
            let held = try held(in: set, on: connect(set))
            if held > 0 {
                holding[i] = held
                needed = i + 1
            }
        }
        // The shards past the last that holds anything are done with: the record comes down.
        let keep = max(configured, needed)
        if keep < seen { _ = try r.command(["HSET", own.shardsRecord, "max", String(keep)]) }
        return (keep, holding)
    }

    /// What a key set still holds: queued, scheduled and suspect jobs, and live or dead workers'
    /// leases (whose batches a take-back would return there).
    public static func held(in set: QueueKeys, on r: BlockingRedisConnection) throws(RedisError) -> Int64 {
        let replies = try r.pipeline(
            [["LLEN", set.jobs], ["ZCARD", set.scheduled], ["LLEN", set.suspects], ["ZCARD", set.workers]].map { $0.map { Array($0.utf8) } })
        return replies.reduce(0) { $0 + ($1.integer ?? 0) }
    }
}
