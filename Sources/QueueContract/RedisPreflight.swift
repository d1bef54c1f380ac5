import RedisClient

/// What a worker asks at start, and `apnsctl check-config` too, of the Redis it is given, so that
/// a mistake that will not fix itself is said once, naming what to fix, instead of being retried
/// forever: the ACL user's right to every command and key the queue uses, an eviction policy
/// that can drop jobs, a Redis that keeps nothing across a restart.
public enum RedisPreflight {
    public struct Finding: Sendable, Equatable {
        /// `fatal`: the worker cannot work so (exit 2); `warning`: it can, at a risk.
        public enum Severity: String, Sendable { case fatal, warning }
        public let severity: Severity
        /// The check's name in check-config's report: "redis_acl", "redis_eviction", "redis_persistence".
        public let check: String
        public let message: String
    }

    /// Runs every check on `r` (the queue's master). Nothing is written: each command is queued
    /// in a transaction that is discarded, which Redis checks against the user's ACL rules all
    /// the same; `admin`: the caller may try CONFIG GET (check-config), the worker does not.
    public static func check(_ r: BlockingRedisConnection, _ keys: QueueKeys, admin: Bool = false) throws(RedisError) -> [Finding] {
        var findings = try rights(r, keys)
        findings += try memoryAndPersistence(r, admin: admin)
        return findings
    }

    /// Each command with arguments of its shape, on the queue's own keys: the worker's and
    /// apnsctl's commands, and those their scripts run.
    static func probes(_ k: QueueKeys) -> [[String]] {
        let (list, other, zset, hash, set, stream, counter) = (
            k.jobs, k.suspects, k.scheduled, k.stats, k.prefix + ":preflight-set", k.results, k.handleCounter
        )
        return [
            ["EVALSHA", String(repeating: "0", count: 40), "1", list], ["EVAL", "return 1", "1", list], ["SCRIPT", "LOAD", "return 1"],
            ["BLMOVE", list, other, "RIGHT", "LEFT", "1"], ["LRANGE", list, "0", "-1"], ["LLEN", list], ["LINDEX", list, "0"],
            ["LPUSH", list, "x"], ["RPUSH", list, "x"], ["LTRIM", list, "0", "-1"], ["LMOVE", list, other, "RIGHT", "LEFT"],
            ["SORT", list, "BY", "nosort", "LIMIT", "0", "1", "STORE", other], ["ZADD", zset, "1", "x"],
            ["ZRANGEBYSCORE", zset, "0", "1"], ["ZREM", zset, "x"], ["ZSCORE", zset, "x"], ["ZRANGE", zset, "0", "1"], ["ZCARD", zset],
            ["INCR", counter], ["INCRBY", counter, "1"], ["PEXPIRE", counter, "60000"], ["HSET", hash, "x", "1"], ["HGET", hash, "x"],
            ["HDEL", hash, "x"], ["HEXISTS", hash, "x"], ["HKEYS", hash], ["HGETALL", hash], ["HINCRBY", hash, "x", "1"], ["HVALS", hash],
            ["SMEMBERS", set], ["SADD", set, "x"], ["SISMEMBER", set, "x"], ["DEL", set], ["EXISTS", set],
            ["XADD", stream, "*", "record", "x"], ["XTRIM", stream, "MAXLEN", "~", "1"], ["XRANGE", stream, "-", "+"],
            ["XREVRANGE", stream, "+", "-"], ["XLEN", stream], ["XDEL", stream, "0-1"], ["TIME"], ["ROLE"], ["PING"],
            ["GET", k.idempotency(key: "preflight")], ["SET", k.idempotency(key: "preflight"), "x", "EX", "1"],
        ]
    }

    /// NOPERM for any command or key names the rule to add; a command this Redis lacks names
    /// the version needed. WATCH, MULTI and EXEC are tried for real (an empty transaction).
    private static func rights(_ r: BlockingRedisConnection, _ k: QueueKeys) throws(RedisError) -> [Finding] {
        let probes = probes(k)
        let all = [["WATCH", k.jobs], ["UNWATCH"], ["MULTI"]] + probes + [["DISCARD"], ["MULTI"], ["EXEC"]]
        let replies = try r.pipeline(all.map { $0.map { Array($0.utf8) } })
        var denied: [String] = [], rules: [String] = [], unknown: [String] = []
        for (command, reply) in zip(all, replies) {
            guard case .error(let message) = reply else { continue }
            let name = command[0].lowercased() + (command[0] == "SCRIPT" ? "|load" : "")
            if message.hasPrefix("NOPERM") {
                let rule = message.contains("key") ? "~\(k.prefix.split(separator: ":").first ?? "apns"):*" : "+\(name)"
                if !rules.contains(rule) { rules.append(rule) }
                denied.append(command[0])
            } else if message.hasPrefix("ERR unknown command") {
                unknown.append(command[0])
            }
        }
        var findings: [Finding] = []
        if !denied.isEmpty {
            findings.append(
                Finding(
                    severity: .fatal, check: "redis_acl",
                    message: "the Redis user may not run \(denied.joined(separator: ", ")), which the queue needs:"
                        + " add \(rules.joined(separator: " ")) to its ACL rules (docs/redis-contract.md gives the whole line)"))
        }
        if !unknown.isEmpty {
            findings.append(
                Finding(
                    severity: .fatal, check: "redis_version",
                    message: "Redis does not know \(unknown.joined(separator: ", ")): it needs Redis 6.2 or later"))
        }
        return findings
    }

    /// `maxmemory-policy`: an `allkeys-*` policy evicts jobs when Redis fills (they are simply
    /// gone); `noeviction` keeps them and refuses new writes, and `volatile-*` evicts only keys
    /// with a TTL (the queue's short-lived take-back marks). And whether Redis keeps anything
    /// across its own restart.
    private static func memoryAndPersistence(_ r: BlockingRedisConnection, admin: Bool) throws(RedisError) -> [Finding] {
        var findings: [Finding] = []
        let memory = info(try r.command(["INFO", "memory"]))
        if let policy = memory["maxmemory_policy"], policy.hasPrefix("allkeys-") {
            findings.append(
                Finding(
                    severity: .fatal, check: "redis_eviction",
                    message: "Redis's maxmemory-policy is \(policy): when it fills it evicts queued jobs, which are then never sent;"
                        + " set maxmemory-policy noeviction (a full Redis then keeps every job and refuses new ones)"))
        }
        let persistence = info(try r.command(["INFO", "persistence"]))
        guard persistence["aof_enabled"] == "0" else { return findings }
        var snapshots: Bool? = nil
        if admin, case .array(let pair) = try r.command(["CONFIG", "GET", "save"]), pair.count == 2 { snapshots = pair[1].text?.isEmpty == false }
        switch snapshots {
        case false?:
            findings.append(
                Finding(
                    severity: .warning, check: "redis_persistence",
                    message: "Redis keeps nothing across a restart (appendonly no, save \"\"): every queued job would be lost; set appendonly yes"))
        default:
            findings.append(
                Finding(
                    severity: .warning, check: "redis_persistence",
                    message: "Redis runs without AOF: jobs pushed since its last RDB snapshot (all of them without one) are lost if it"
                        + " restarts; appendonly yes keeps them"))
        }
        return findings
    }

    /// INFO's `name:value` lines.
    private static func info(_ reply: RedisReply) -> [String: String] {
        var out: [String: String] = [:]
        for line in (reply.text ?? "").split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { out[String(parts[0])] = String(parts[1]) }
        }
        return out
    }
}
