/// Pauses an app whose credentials APNs refuses, and lets one probe through now and then
/// (issue #4: its jobs wait, they are not dead-lettered). A value: test it without sockets.
public struct CircuitBreaker: Sendable {
    public enum State: Sendable, Equatable {
        case closed
        case open(untilMs: UInt64)
        /// One request went out at `sinceMs` to test the credential.
        case probing(sinceMs: UInt64)
    }

    public private(set) var state = State.closed
    private var backoff: Backoff
    /// A probe that got no verdict by then (its connection died) is replaced by another.
    private let probeTimeoutMs: UInt64

    public init(pauseMs: Int, maxPauseMs: Int = 600_000, probeTimeoutMs: Int = 35_000) {
        backoff = Backoff(baseMs: pauseMs, capMs: max(pauseMs, maxPauseMs))
        self.probeTimeoutMs = UInt64(probeTimeoutMs)
    }

    /// How many requests may go now: unlimited when closed, one probe when a pause has ended.
    public mutating func allowance(nowMs: UInt64) -> Int {
        switch state {
        case .closed: return .max
        case .probing(let since):
            guard nowMs - since >= probeTimeoutMs else { return 0 }
            state = .probing(sinceMs: nowMs)
            return 1
        case .open(let until):
            guard nowMs >= until else { return 0 }
            state = .probing(sinceMs: nowMs)
            return 1
        }
    }

    /// Any verdict from APNs that is not about the credential closes the breaker.
    public mutating func succeeded() {
        if state != .closed { backoff.reset() }
        state = .closed
    }

    /// Opens (again) for a growing pause; returns it in milliseconds.
    @discardableResult
    public mutating func failed(nowMs: UInt64) -> Int {
        var g = SystemRandomNumberGenerator()
        let pause = backoff.nextDelayMs(using: &g) * 2  // full step: the jitter only spreads it above half
        state = .open(untilMs: nowMs + UInt64(pause))
        return pause
    }

    public var isOpen: Bool { state != .closed }
}
