import APNSTransport
import FoundationEssentials
import Glibc
import RedisClient
import Telemetry

/// A `BlockingRedisConnection` that reconnects with capped, jittered backoff, for the
/// housekeeping thread. One per thread.
final class ReconnectingRedisConnection {
    private let endpoint: RedisEndpoint
    private let timeoutMs: Int
    private let logger: Logger
    private var connection: BlockingRedisConnection?
    private var pause = RedisRetryPause()
    /// Where its state goes, for /readyz and apns_redis_up.
    var health: HealthState?
    var label = "housekeeper"

    init(_ endpoint: RedisEndpoint, timeoutMs: Int, logger: Logger) {
        self.endpoint = endpoint
        self.timeoutMs = timeoutMs
        self.logger = logger
    }

    /// Drops the connection: the next call opens another (after a failover, to the new master).
    func reset() { connection = nil }

    /// Runs `body` on a live connection. On an I/O error the connection is dropped, and the
    /// error rethrown after a backoff pause, so callers simply try again.
    func with<R>(_ body: (BlockingRedisConnection) throws(RedisError) -> R) throws(RedisError) -> R {
        do {
            if connection == nil { connection = try BlockingRedisConnection(endpoint, timeoutMs: timeoutMs) }
            let result = try body(connection!)
            // Said once a command succeeded, not when a connection opened that may refuse them all.
            if pause.succeeded() { logger.info("reconnected to Redis", ["redis": .string(endpoint.description)]) }
            health?.redis(label, error: nil)
            return result
        } catch {
            let fix = error.mistake
            if error.isConnectionLost || fix != nil { connection = nil }
            health?.redis(label, error: error.isConnectionLost || fix != nil ? error.description + (fix.map { ": \($0)" } ?? "") : nil)
            let delay = pause.delayMs(after: error)
            RedisTrouble.log(error, fix: fix, endpoint: endpoint, retryMs: delay, logger: logger)
            usleep(UInt32(delay) * 1000)
            throw error
        }
    }
}

/// The pause before a Redis connection is tried again: 100 ms doubling to 5 s, or for a fault
/// that will not fix itself (`RedisError.mistake`: a password, a certificate, a right) 1 s
/// doubling to a minute; both start over once a command succeeds.
struct RedisRetryPause {
    private var backoff = Backoff(baseMs: 100, capMs: 5000)
    private var slow = Backoff(baseMs: 1000, capMs: 60_000)

    mutating func delayMs(after error: RedisError) -> Int { error.mistake == nil ? backoff.nextDelayMs() : slow.nextDelayMs() }

    /// A command succeeded; returns whether calls had failed before it.
    mutating func succeeded() -> Bool {
        defer {
            backoff.reset()
            slow.reset()
        }
        return backoff.failures + slow.failures > 0
    }
}

/// How a failed Redis call is logged: a passing fault on a line of its own; one that will not
/// fix itself (a refused password or certificate, a missing right, a full Redis) once, with
/// what to fix, then once a minute with how many more there were.
enum RedisTrouble {
    static func log(_ error: RedisError, fix: String?, endpoint: RedisEndpoint, retryMs: Int, logger: Logger) {
        var fields: [String: LogValue] = ["redis": .string(endpoint.description), "error": .string(error.description), "retry_ms": .int(retryMs)]
        if error.message.contains("the slot is moving") || error.message.contains("the cluster is down") {
            // A slot half-moved between nodes: this key set waits, with backoff, and says so once a minute.
            // The importing node's own trouble is said apart: it names what the key set waits for.
            let importing = error.message.contains("importing slot") ? " importing" : ""
            return logger.limited(
                .warning, key: "slot: " + endpoint.description + importing,
                "a key set waits for its slot, which is moving between nodes or whose node is down; the others go on",
                fields)
        }
        guard let fix else { return logger.warning("Redis call failed", fields) }
        fields["fix"] = .string(fix)
        logger.limited(.error, key: "redis: " + fix, "Redis refuses the worker's calls, and will until a setting is fixed", fields)
    }
}
