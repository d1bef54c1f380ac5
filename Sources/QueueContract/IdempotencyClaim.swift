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

    /// `SET <key> <claim> NX GET EX <window>`: takes the key for `claim` if it is free, and
    /// answers the holder's claim (nil if it was free), atomically (Redis 7).
    public static func call(_ keys: QueueKeys, key: String, claim: String, windowSeconds: Int) -> RedisArgs {
        RedisArgs(["SET", keys.idempotency(key: key), claim, "NX", "GET", "EX", String(windowSeconds)])
    }

    /// The answers to calls sent in one write for `claims`, in order. An error answer is thrown.
    public static func read(_ reply: RedisFlatReply, claims: [String]) throws(RedisError) -> [Answer] {
        if let error = reply.firstError { throw .server(error) }
        guard reply.count == claims.count else { throw .server("the idempotency claims answered \(reply.count) items for \(claims.count)") }
        return claims.indices.map { i in
            guard let holder = reply.bytes(i).map({ String(decoding: $0, as: UTF8.self) }), holder != claims[i] else { return .ours }
            return .duplicate(of: holder)
        }
    }
}
