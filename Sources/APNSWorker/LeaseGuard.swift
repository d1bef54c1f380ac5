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

    /// Redis renewed the lease and named the batches still held, in one step, at or after
    /// `sentAtMs`. Returns, if a failover had lapsed it, since when fetches may have gone to the
    /// demoted master (`lapse(failoverSinceMs:)`).
    @discardableResult
    func confirmed(sentAtMs: UInt64) -> UInt64? {
        validUntilMs.store(sentAtMs + leaseMs, ordering: .releasing)
        let since = failoverSinceMs.exchange(0, ordering: .acquiringAndReleasing)
        return since == 0 ? nil : since
    }

    /// Counts the lease as lapsed now: the master it was renewed on is no longer one, since
    /// some time after `failoverSinceMs` (monotonic).
    func lapse(failoverSinceMs since: UInt64) {
        failoverSinceMs.store(max(1, since), ordering: .releasing)
        awaitingTakeBack.store(true, ordering: .releasing)
        validUntilMs.store(0, ordering: .releasing)
    }
    private let failoverSinceMs = Atomic<UInt64>(0)

    /// After a failover, until the housekeeper has taken back on the new master the batches
    /// this worker held (their outcomes written since may have gone to the old one alone).
    var awaitsTakeBack: Bool { awaitingTakeBack.load(ordering: .acquiring) }
    func failoverTakenBack() { awaitingTakeBack.store(false, ordering: .releasing) }
    private let awaitingTakeBack = Atomic<Bool>(false)

    /// Whether sends may go at `nowMs`.
    func holds(nowMs: UInt64) -> Bool { nowMs + marginMs < validUntilMs.load(ordering: .acquiring) }
}
