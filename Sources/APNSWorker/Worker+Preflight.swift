import Configuration
import QueueContract
import RedisClient
import Telemetry

/// A setting that cannot work: the worker does not start (exit 2), and says what to fix.
public struct StartRefusal: Error, CustomStringConvertible {
    public let description: String
}

extension Worker {
    /// The shards to serve beyond `configuration.shards`, at start (`ShardRecord`): after a
    /// rollback to fewer shards, those that still hold jobs are served until a start finds them
    /// empty. A Redis that does not answer yet leaves them for the next start, and says so.
    public static func shardsToDrain(_ configuration: WorkerConfiguration, logger: Logger) throws -> Int {
        do throws(RedisError) {
            let (serve, holding) = try ShardRecord.shardsToServe(queue: configuration.queue, configured: configuration.shards) {
                (set) throws(RedisError) in try BlockingRedisConnection(configuration.redis.routed(toKey: set.jobs), timeoutMs: 5000)
            }
            guard serve > configuration.shards else { return 0 }
            logger.warning(
                "the queue had more shards than this worker is set to: it serves those that still hold jobs until they are empty",
                [
                    "shards": .int(configuration.shards), "served": .int(serve),
                    "draining": .string(holding.keys.sorted().map { "\(configuration.queue).\($0): \(holding[$0]!)" }.joined(separator: ", ")),
                ])
            return serve
        } catch {
            if let fix = error.mistake { throw StartRefusal(description: "cannot use Redis (\(error.description)): \(fix)") }
            logger.warning(
                "cannot read the queue's shard record: shards beyond the setting wait for the next start", ["error": .string(error.description)])
            return 0
        }
    }

    /// Asks Redis, once before starting, what a worker would otherwise learn by failing every
    /// call (`RedisPreflight`): a certificate or password that Redis refuses, a missing ACL
    /// right, an eviction policy that drops jobs. A Redis that does not answer yet is no mistake:
    /// the worker starts and keeps trying, as it does after any outage.
    /// Runs before anything else asks Redis (the shard record), so that a missing right is
    /// named whole, not by the first command that meets it.
    public static func checkRedis(_ configuration: WorkerConfiguration, logger: Logger) throws {
        let keys = configuration.servedKeys[0]
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
