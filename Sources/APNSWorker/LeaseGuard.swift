import IOLoop
import Synchronization

/// How long this worker's lease holds, as far as it knows. Past that (a SIGSTOP, a long cut from
/// Redis) peers may have taken its jobs back, so nothing more is sent until Redis confirms
/// which batches are still its own (`Fetcher.confirmLease`). Shared by the housekeeper and
/// every I/O thread; times are monotonic ms.
final class LeaseGuard: Sendable {
    let leaseMs: UInt64
    /// Sends stop this long before the lease would run out: a request takes time to reach APNs.
    let marginMs: UInt64
    /// The lease holds until then; 0: it may have lapsed, and waits for a confirmation.
    private let validUntilMs: Atomic<UInt64>

    init(leaseMs: Int, nowMs: UInt64 = MonotonicClock.nowMilliseconds()) {
        self.leaseMs = UInt64(leaseMs)
        marginMs = min(1000, UInt64(leaseMs) / 4)
        validUntilMs = Atomic(nowMs + UInt64(leaseMs))
    }

    /// A renewal sent at `sentAtMs` was answered at `answeredAtMs`. Answered while the lease
    /// held, it ran before any peer could take a job back; answered later, it proves nothing.
    func renewed(sentAtMs: UInt64, answeredAtMs: UInt64) {
        var current = validUntilMs.load(ordering: .acquiring)
        while current != 0 {
            let next = answeredAtMs + marginMs >= current ? 0 : max(current, sentAtMs + leaseMs)
            guard next != current else { return }
            let (exchanged, found) = validUntilMs.compareExchange(expected: current, desired: next, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = found
        }
    }

    /// Redis renewed the lease and named the batches still held, in one step, at or after `sentAtMs`.
    func confirmed(sentAtMs: UInt64) { validUntilMs.store(sentAtMs + leaseMs, ordering: .releasing) }

    /// Whether sends may go at `nowMs`.
    func holds(nowMs: UInt64) -> Bool { nowMs + marginMs < validUntilMs.load(ordering: .acquiring) }
}
