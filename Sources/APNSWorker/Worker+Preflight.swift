import QueueContract
import RedisClient

/// A setting that cannot work: the worker does not start (exit 2), and says what to fix.
public struct StartRefusal: Error, CustomStringConvertible {
    public let description: String
}

extension Worker {
    /// Asks Redis, once before starting, what a worker would otherwise learn by failing every
    /// call (`RedisPreflight`): a certificate or password that Redis refuses, a missing ACL
    /// right, an eviction policy that drops jobs. A Redis that does not answer yet is no mistake:
    /// the worker starts and keeps trying, as it does after any outage.
    public func checkRedis() throws {
        let endpoint = configuration.redis.routed(toKey: keys.jobs)
        let findings: [RedisPreflight.Finding]
        do throws(RedisError) {
            let r = try BlockingRedisConnection(endpoint, timeoutMs: min(5000, configuration.redisReplyTimeoutMs + 1000))
            findings = try RedisPreflight.check(r, keys)
        } catch {
            guard let fix = error.mistake else {
                return logger.warning("Redis does not answer yet; the worker starts and keeps trying", ["error": .string(error.description)])
            }
            throw StartRefusal(description: "cannot use Redis (\(error.description)): \(fix)")
        }
        for finding in findings where finding.severity == .warning { logger.warning(finding.message, ["check": .string(finding.check)]) }
        let fatal = findings.filter { $0.severity == .fatal }.map(\.message)
        if !fatal.isEmpty { throw StartRefusal(description: fatal.joined(separator: "; ")) }
    }
}
