import APNSCore
import FoundationEssentials
import Glibc
import QueueContract
import RedisClient
import Telemetry

/// The checks of a loaded configuration: a setting that cannot work stops the worker at start,
/// naming the setting (exit 2).
extension WorkerConfiguration {
    func validate() throws {
        guard !apps.isEmpty else { throw ConfigurationError("no apps configured: add one under \"apps\"") }
        guard Set(apps.map(\.name)).count == apps.count else { throw ConfigurationError("app names must be unique") }
        for (name, value, range) in [
            ("connections", connections, 1...1024), ("streams", streams, 1...10_000),
            ("io_threads", ioThreads, 1...64), ("batch_size", batchSize, 1...1000), ("shards", shards, 1...256),
            ("redis.wait_replicas", waitReplicas, 0...16), ("redis.wait_timeout_ms", waitTimeoutMs, 1...60_000),
            ("lease_ms", leaseMs, 1000...600_000), ("max_recoveries", maxRecoveries, 0...100),
            ("retry.backoff_max_attempts", retryPolicy.backoffMaxAttempts, 1...100),
            ("retry.server_error_max_attempts", retryPolicy.serverErrorMaxAttempts, 1...100),
            ("retry.backoff_base_ms", retryPolicy.backoffBaseMs, 1...3_600_000),
            ("ping_interval_ms", pingIntervalMs, 100...86_400_000), ("ping_timeout_ms", pingTimeoutMs, 100...600_000),
            ("connect_timeout_ms", connectTimeoutMs, 100...600_000),
            ("token_refresh_s", tokenRefreshSeconds, 1...3500),
            ("token_min_refresh_s", tokenMinRefreshSeconds, 1...3500),
        ] where !range.contains(value) {
            throw ConfigurationError("\(name) must be in \(range.lowerBound)...\(range.upperBound), got \(value)")
        }
        for (name, rate) in [("rate_per_connection", ratePerConnection)] + apps.map({ ("apps.\($0.name).max_rate", $0.maxRate) }) {
            if let rate, !(1...1_000_000).contains(rate) { throw ConfigurationError("\(name) must be in 1...1000000 requests a second, got \(rate)") }
        }
        try validateQueues()
        try validateRanges()
        for app in apps { try app.validate() }
    }

    /// Every number a setting takes has a range: outside it the worker refuses to start, naming
    /// the setting, rather than trap or wedge later on (a negative timeout, cap or port).
    private func validateRanges() throws {
        var checks: [(String, Int?, ClosedRange<Int>)] = [
            ("request_timeout_ms", requestTimeoutMs, 100...3_600_000), ("shutdown_grace_ms", shutdownGraceMs, 0...3_600_000),
            ("credential_pause_ms", credentialPauseMs, 100...86_400_000),
            ("results_max", resultsMax, 1...1_000_000_000), ("dead_letters_max", deadLettersMax, 1...1_000_000_000),
            ("invalid_tokens_max", invalidTokensMax, 1...1_000_000_000),
            ("results_max_age_s", resultsMaxAgeSeconds, 1...315_360_000), ("dead_letters_max_age_s", deadLettersMaxAgeSeconds, 1...315_360_000),
            ("max_age_s", maxAgeSeconds, 1...2_592_000), ("idempotency_window_s", idempotencyWindowSeconds, 1...2_592_000),
            ("invalid_tokens_max_age_s", invalidTokensMaxAgeSeconds, 1...315_360_000),
            ("retry.backoff_cap_ms", retryPolicy.backoffCapMs, retryPolicy.backoffBaseMs...86_400_000),
            ("retry.server_error_max_delay_ms", retryPolicy.serverErrorDelayMs.upperBound, 0...3_600_000),
            ("metrics_port", metricsPort, 1...65535), ("redis.database", redis.database, 0...1_000_000),
        ]
        if redis.socket == nil { checks.append(("redis.port", redis.port, 1...65535)) }
        for case let (name, value?, range) in checks where !range.contains(value) {
            throw ConfigurationError("\(name) must be in \(range.lowerBound)...\(range.upperBound), got \(value)")
        }
        guard redis.socket != nil || !redis.host.isEmpty else { throw ConfigurationError("redis.host must not be empty") }
        try redis.validateTLS()
        try redis.validateSentinel()
        guard redis.username == nil || redis.password != nil else {
            throw ConfigurationError("redis.username needs redis.password (or password_file): Redis's AUTH takes both")
        }
        if let workerID, workerID.isEmpty || workerID.contains(where: \.isWhitespace) {
            throw ConfigurationError("worker_id must be non-empty, without spaces, got \"\(workerID)\"")
        }
        guard !metricsHost.isEmpty else { throw ConfigurationError("metrics_host must not be empty") }
        guard ["each", "summary"].contains(logRejections) else {
            throw ConfigurationError("log_rejections must be each or summary, got \(logRejections)")
        }
        guard ["whole", "short"].contains(logTokens) else { throw ConfigurationError("log_tokens must be whole or short, got \(logTokens)") }
    }
}
