import RedisClient

/// Idempotency keys (README "Idempotency keys"): the first job to claim a key within the
/// window is sent; a job that finds the key held by another's claim is a duplicate. A claim is
/// the handle the job was first taken under, carried in its envelopes (`JobEnvelope.Meta.claim`,
/// written by the worker and by the take-back scripts), so that a job taken again after a crash
/// finds the key held by itself.
public enum IdempotencyClaim {
    /// What a claim found.
    public enum Answer: Equatable, Sendable {
        /// The key is this job's: taken now, or by this job on an earlier take.
        case ours
        /// Another job holds the key; its claim (its handle).
        case duplicate(of: String)
    }

    /// The shard a producer pushes a keyed job to, so that the key has one home: FNV-1a (32
    /// bits) of the key's UTF-8 bytes, modulo the shards (the example producers do the same).
    public static func shard(ofKey key: String, shards: Int) -> Int {
        var h: UInt32 = 0x811C_9DC5
        for b in key.utf8 { h = (h ^ UInt32(b)) &* 0x0100_0193 }
        return Int(h % UInt32(max(1, shards)))
    }

    /// Takes each free key for its claim, for the window, and answers each key's holder ("" for
    /// one taken now), in one atomic step (the keys share the queue's hash tag). A script, not
    /// `SET NX GET`, which Redis 6.2 lacks. KEYS: the keys. ARGV: window (s), then the claims.
    public static let script = RedisScript(
        """
        local out = {}
        for i, key in ipairs(KEYS) do
          local holder = redis.call('GET', key)
          if holder then
            out[i] = holder
          else
            redis.call('SET', key, ARGV[i + 1], 'EX', ARGV[1])
            out[i] = ''
          end
        end
        return out
        """)

    /// One call of `script` for `keys` (the producers' keys) and their claims.
    public static func call(_ queue: QueueKeys, keys: [String], claims: [String], windowSeconds: Int) -> RedisArgs {
        var args = RedisArgs(script: script, keys: keys.map { queue.idempotency(key: $0) })
        args.append(windowSeconds)
        for c in claims { args.append(c) }
        return args
    }

    /// The script's answer for `claims`, in order. An error answer is thrown.
    public static func read(_ reply: RedisFlatReply, claims: [String]) throws(RedisError) -> [Answer] {
        if let error = reply.firstError { throw .server(error) }
        guard reply.isArray(0), reply.count == claims.count + 1 else {
            throw .server("the idempotency claims answered \(reply.count - 1) items for \(claims.count)")
        }
        return claims.indices.map { i in
            let holder = reply.bytes(i + 1).map { String(decoding: $0, as: UTF8.self) } ?? ""
            return holder.isEmpty || holder == claims[i] ? .ours : .duplicate(of: holder)
        }
    }
}
