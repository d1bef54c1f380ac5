import FoundationEssentials
import IOLoop
import Synchronization

/// What /readyz and the gauges need from the threads: ready connections, the last success and
/// any credential pause per app, and the state of each of the worker's own Redis connections.
public final class HealthState: Sendable {
    private struct State {
        var ready: [String: [String: Int]] = [:]  // loop → app → ready connections
        var streamLimits: [String: [String: Int]] = [:]  // loop → app → streams its connections allow
        var paused: [String: [String: String]] = [:]  // loop → app → why
        var lastSuccessMs: [String: Int64] = [:]
        var redis: [String: String?] = [:]  // connection → nil (up) or its last error

        func sum(_ byLoop: [String: [String: Int]], _ app: String) -> Int { byLoop.values.reduce(0) { $0 + ($1[app] ?? 0) } }
        func pause(_ app: String) -> String? { paused.values.lazy.compactMap { $0[app] }.first }
        func usable(_ app: String, nowMs: Int64) -> Bool {
            sum(ready, app) > 0 || (lastSuccessMs[app].map { nowMs - $0 < 60_000 } ?? false)
        }
    }
    private let state = Mutex(State())

    public init() {}

    public func update(loop: String, readyConnections: [String: Int], streamLimits: [String: Int] = [:], paused: [String: String] = [:]) {
        state.withLock {
            $0.ready[loop] = readyConnections
            $0.streamLimits[loop] = streamLimits
            $0.paused[loop] = paused
        }
    }

    public func succeeded(app: String) {
        let now = WallClock.nowMilliseconds()
        state.withLock { $0.lastSuccessMs[app] = now }
    }

    /// An app is usable if a connection is ready now or a notification succeeded in the last minute.
    public func isUsable(app: String, nowMs: Int64 = WallClock.nowMilliseconds()) -> Bool {
        state.withLock { $0.usable(app, nowMs: nowMs) }
    }

    /// An app as the dashboard shows it: usable (as `isUsable`), ready connections and their
    /// stream limits over all loops, its pause, its last success.
    public func status(
        app: String, nowMs: Int64 = WallClock.nowMilliseconds()
    ) -> (
        usable: Bool, connections: Int, streamLimit: Int, paused: String?, lastSuccessMs: Int64?
    ) {
        state.withLock { s in
            (s.usable(app, nowMs: nowMs), s.sum(s.ready, app), s.sum(s.streamLimits, app), s.pause(app), s.lastSuccessMs[app])
        }
    }

    /// Why the app is paused (APNs refused its credentials), or nil.
    public func pauseReason(app: String) -> String? {
        state.withLock { $0.pause(app) }
    }

    /// Every paused app, and why (the first loop's reason).
    public var pausedApps: [String: String] {
        state.withLock { s in s.paused.values.reduce(into: [:]) { all, loop in all.merge(loop) { first, _ in first } } }
    }

    /// One of the worker's Redis connections is up (`error` nil), or failed with `error`.
    public func redis(_ connection: String, error: String?) {
        state.withLock { $0.redis[connection] = .some(error) }
    }

    /// Each Redis connection's trouble, by name (empty: all up).
    public var redisProblems: [(connection: String, error: String)] {
        state.withLock { s in s.redis.compactMap { name, error in error.map { (name, $0) } }.sorted { $0.connection < $1.connection } }
    }
}
