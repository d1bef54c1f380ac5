import IOLoop
import Synchronization

/// Batch ids, unique to the worker's life: this process's start time and a count, so that a
/// batch left by an earlier run under the same worker id is never overwritten; and the fetchers'
/// fence fields (`InFlightJobs.Field`). Shared by the fetchers of every I/O thread, with the one
/// suspect the process may hold at a time.
final class BatchIDs: Sendable {
    /// What every batch id of this process starts with, and of no earlier run of its worker id.
    let prefix = String(WallClock.nowMilliseconds(), radix: 36) + "-"
    private let count = Atomic<Int>(0)
    private let fetchers = Atomic<Int>(0)
    private let suspectHeld = Atomic<Bool>(false)

    func next(suspect: Bool = false) -> String { prefix + (suspect ? "s" : "") + String(count.add(1, ordering: .relaxed).newValue) }

    /// A new fetcher's fence field.
    func fenceField() -> String { prefix + "f" + String(fetchers.add(1, ordering: .relaxed).newValue) }

    /// Whether a fetcher of this process holds a suspect (or is fetching one).
    var holdsSuspect: Bool { suspectHeld.load(ordering: .relaxed) }
    /// Takes the process's one suspect place; false if another fetcher has it.
    func takeSuspectPlace() -> Bool { suspectHeld.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged }
    func releaseSuspectPlace() { suspectHeld.store(false, ordering: .releasing) }
}
