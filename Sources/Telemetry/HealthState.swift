import Foundation
import IOLoop
import Synchronization

/// What /readyz needs from the I/O threads: ready connections and the last success per app.
public final class HealthState: Sendable {
    private struct State {
        var ready: [String: [String: Int]] = [:]  // loop → app → ready connections
        var lastSuccessMs: [String: Int64] = [:]
    }
    private let state = Mutex(State())

    public init() {}

    public func update(loop: String, readyConnections: [String: Int]) {
        state.withLock { $0.ready[loop] = readyConnections }
    }

    public func succeeded(app: String) {
        let now = WallClock.nowMilliseconds()
        state.withLock { $0.lastSuccessMs[app] = now }
    }

    /// An app is usable if a connection is ready now or a notification succeeded in the last minute.
    public func isUsable(app: String, nowMs: Int64 = WallClock.nowMilliseconds()) -> Bool {
        state.withLock { s in
            let ready = s.ready.values.reduce(0) { $0 + ($1[app] ?? 0) }
            return ready > 0 || (s.lastSuccessMs[app].map { nowMs - $0 < 60_000 } ?? false)
        }
    }
}
