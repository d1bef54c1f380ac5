/// When to try a rejected notification again (DESIGN.md §4): exponential backoff with jitter
/// for 429 TooManyRequests; at most 3 tries, 1-5 s apart, for 500/503.
public struct RetryPolicy: Sendable, Equatable {
    public var backoffBaseMs = 1000
    public var backoffCapMs = 60_000
    /// Tries in all (the first send included) before a 429 job is dead-lettered.
    public var backoffMaxAttempts = 8
    public var serverErrorMaxAttempts = 3
    public var serverErrorDelayMs = 1000...5000
    /// FCM's QUOTA_EXCEEDED waits a minute at least before its first retry (Google's ErrorCode
    /// page, fcm-protocol.md §4.4), or its answer's retry-after if that is longer.
    public var quotaMinDelayMs = 60_000

    public init() {}

    public enum Decision: Equatable, Sendable {
        case retry(afterMs: Int)
        case giveUp
    }

    /// `attempts` counts the tries made so far, the one just rejected included.
    public func decide<G: RandomNumberGenerator>(_ kind: RetryPolicyKind, attempts: Int, jobMaxAttempts: Int?, using rng: inout G) -> Decision {
        switch kind {
        case .tooManyRequests:
            guard attempts < (jobMaxAttempts ?? backoffMaxAttempts) else { return .giveUp }
            // Up to 20% jitter below each doubling step: retries spread out, and each gap is
            // still longer than the one before (0.8 × 2d > d).
            let step = min(backoffCapMs, backoffBaseMs << min(attempts - 1, 20))
            return .retry(afterMs: step - Int.random(in: 0...step / 5, using: &rng))
        case .serverError:
            guard attempts < (jobMaxAttempts ?? serverErrorMaxAttempts) else { return .giveUp }
            return .retry(afterMs: Int.random(in: serverErrorDelayMs, using: &rng))
        }
    }
}
