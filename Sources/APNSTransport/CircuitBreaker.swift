/// Pauses a pool that APNs refuses (its credential) or that cannot reach APNs (its connections
/// keep failing), and lets one probe through now and then: its jobs wait, they are not
/// dead-lettered. One outage is one pause: answers to requests sent before the pause change
/// nothing, and only a failed probe doubles it (DESIGN.md §4). A value: tested without sockets.
public struct CircuitBreaker: Sendable {
    public enum State: Sendable, Equatable {
        case closed
        case open(untilMs: UInt64)
        /// One request went out at `sinceMs` to test the way to APNs.
        case probing(sinceMs: UInt64)
    }

    public enum Cause: Sendable, Equatable {
        /// APNs refused the credential (403 InvalidProviderToken, BadCertificate, …).
        case credential
        /// Requests go unanswered: refused, cut, reset or timed out, or no connection stays up.
        case transport
    }

    public private(set) var state = State.closed
    public private(set) var cause = Cause.transport
    private var failedProbes = 0
    private let credentialPauseMs: Int, transportPauseMs: Int
    private let maxCredentialPauseMs: Int, maxTransportPauseMs: Int
    /// A probe that got no verdict by then (its connection died) is replaced by another.
    private let probeTimeoutMs: UInt64

    public init(
        credentialPauseMs: Int, transportPauseMs: Int = 1000, maxCredentialPauseMs: Int = 600_000, maxTransportPauseMs: Int = 15_000,
        probeTimeoutMs: Int = 35_000
    ) {
        self.credentialPauseMs = max(1, credentialPauseMs)
        self.transportPauseMs = max(1, transportPauseMs)
        self.maxCredentialPauseMs = max(self.credentialPauseMs, maxCredentialPauseMs)
        self.maxTransportPauseMs = max(self.transportPauseMs, maxTransportPauseMs)
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
        state = .closed
        failedProbes = 0
    }

    /// A request sent at `sentAtMs` failed for `cause`. Returns the new pause in milliseconds
    /// when this opens the breaker or lengthens its pause, nil when it changes nothing.
    @discardableResult
    public mutating func failed(_ cause: Cause, nowMs: UInt64, sentAtMs: UInt64) -> Int? {
        let isProbe: Bool
        switch state {
        case .closed: return open(cause, nowMs: nowMs, probes: 0)
        case .open: isProbe = false
        case .probing(let since): isProbe = sentAtMs >= since
        }
        // A credential refusal outranks trouble on the way: its own pause, from its base.
        if cause == .credential, self.cause == .transport { return open(cause, nowMs: nowMs, probes: 0) }
        guard isProbe else { return nil }
        if cause == .transport, self.cause == .credential {
            // The credential probe was lost on the way: another soon, the pause unchanged.
            state = .open(untilMs: nowMs + UInt64(transportPauseMs))
            return nil
        }
        return open(cause, nowMs: nowMs, probes: failedProbes + 1)
    }

    private mutating func open(_ cause: Cause, nowMs: UInt64, probes: Int) -> Int {
        self.cause = cause
        failedProbes = probes
        let (base, cap) = cause == .credential ? (credentialPauseMs, maxCredentialPauseMs) : (transportPauseMs, maxTransportPauseMs)
        let pause = min(cap, base << min(probes, 30))
        state = .open(untilMs: nowMs + UInt64(pause))
        return pause
    }

    public var isOpen: Bool { state != .closed }

    /// Milliseconds until the next probe may go (0 when it may go now, or the breaker is closed).
    public func remainingPauseMs(nowMs: UInt64) -> Int {
        if case .open(let until) = state, until > nowMs { return Int(until - nowMs) }
        return 0
    }
}
