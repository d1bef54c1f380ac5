import Configuration
import QueueContract
import RedisClient
import Telemetry

/// A setting that cannot work: the worker does not start (exit 2), and says what to fix.
public struct StartRefusal: Error, CustomStringConvertible {
    public let description: String
}

extension Worker {
    /// The shards of `queue` to serve beyond its setting, at start (`ShardRecord`): after a
    /// rollback to fewer shards, those that still hold jobs are served until a start finds them
    /// empty. A Redis that does not answer yet leaves them for the next start, and says so.
    public static func shardsToDrain(_ queue: ServedQueue, _ configuration: WorkerConfiguration, logger: Logger) throws -> Int {
        do throws(RedisError) {
            let (serve, holding) = try ShardRecord.shardsToServe(queue: queue.name, configured: queue.shards) {
                (set) throws(RedisError) in try BlockingRedisConnection(configuration.redis.routed(toKey: set.jobs), timeoutMs: 5000)
            }
            guard serve > queue.shards else { return 0 }
            logger.warning(
                "the queue had more shards than this worker is set to: it serves those that still hold jobs until they are empty",
                [
                    "queue": .string(queue.name), "shards": .int(queue.shards), "served": .int(serve),
                    "draining": .string(holding.keys.sorted().map { "\(queue.name).\($0): \(holding[$0]!)" }.joined(separator: ", ")),
                ])
            return serve
        } catch {
            if let fix = error.mistake { throw StartRefusal(description: "cannot use Redis (\(error.description)): \(fix)") }
            logger.warning(
                "cannot read the queue's shard record: shards beyond the setting wait for the next start",
                ["queue": .string(queue.name), "error": .string(error.description)])
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
        var findings: [RedisPreflight.Finding] = []
        do throws(RedisError) {
            // Each queue's keys: an ACL may grant one queue's and not another's.
            for keys in configuration.servedQueues.map({ QueueKeys(queue: $0.name) }) {
                let endpoint = configuration.redis.routed(toKey: keys.jobs)
                let r = try BlockingRedisConnection(endpoint, timeoutMs: min(5000, configuration.redisReplyTimeoutMs + 1000))
                findings += try RedisPreflight.check(r, keys).filter { f in !findings.contains { $0.message == f.message } }
            }
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
