/// How long the transport makes a send wait, each wait named once (docs/operations.md, "Why
/// did this job wait?"). The pauses of a pool in trouble are `CircuitBreaker`'s; a 429's and a
/// 5xx's retries are `APNSCore.RetryPolicy`'s.
public enum TransportWaits {
    /// A send that got no answer (refused, reset, cut, timed out) goes again after 100 ms, doubling
    /// to 5 s with jitter; the first after its connection went goes at once, elsewhere.
    public static func resendMs<G: RandomNumberGenerator>(afterUnanswered sends: Int, connectionGone: Bool, using rng: inout G) -> Int {
        if connectionGone && sends == 1 { return 0 }
        return Backoff.delayMs(afterFailures: sends, baseMs: 100, capMs: 5000, using: &rng)
    }

    /// A paused pool's sends beyond what it holds wait in the schedule for the pause left, 5 s at
    /// least (each return costs Redis a write), plus 0-2 s; a retired pool's, 1 s plus 0-2 s.
    public static func deferralMs<G: RandomNumberGenerator>(pauseLeftMs: Int, retired: Bool, using rng: inout G) -> Int {
        (retired ? 1000 : max(5000, pauseLeftMs)) + Int.random(in: 0...2000, using: &rng)
    }

    /// A send FCM refused for its access token goes again after 500 ms, when a new token may have come.
    public static let tokenRenewalMs = 500

    /// A pool's reconnect delay after a connection that ended before delivering anything.
    public static func reconnect(baseMs: Int, capMs: Int) -> Backoff { Backoff(baseMs: baseMs, capMs: capMs) }
}
