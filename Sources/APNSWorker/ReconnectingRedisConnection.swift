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
    private var backoff = Backoff(baseMs: 100, capMs: 5000)
    /// Where its state goes, for /readyz and apns_redis_up.
    var health: HealthState?
    var label = "housekeeper"

    init(_ endpoint: RedisEndpoint, timeoutMs: Int, logger: Logger) {
        self.endpoint = endpoint
        self.timeoutMs = timeoutMs
        self.logger = logger
    }

    /// Runs `body` on a live connection. On an I/O error the connection is dropped, and the
    /// error rethrown after a backoff pause, so callers simply try again.
    func with<R>(_ body: (BlockingRedisConnection) throws(RedisError) -> R) throws(RedisError) -> R {
        do {
            if connection == nil {
                connection = try BlockingRedisConnection(endpoint, timeoutMs: timeoutMs)
                if backoff.failures > 0 { logger.info("reconnected to Redis", ["redis": .string(endpoint.description)]) }
                backoff.reset()
            }
            let result = try body(connection!)
            health?.redis(label, error: nil)
            return result
        } catch {
            if error.isConnectionLost { connection = nil }
            health?.redis(label, error: error.isConnectionLost ? error.description : nil)
            let delay = backoff.nextDelayMs()
            logger.warning(
                "Redis call failed", ["redis": .string(endpoint.description), "error": .string(error.description), "retry_ms": .int(delay)])
            usleep(UInt32(delay) * 1000)
            throw error
        }
    }
}
