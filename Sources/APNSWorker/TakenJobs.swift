import Delivery
import IOLoop
import QueueContract
import RedisClient
import Synchronization

/// The jobs one fetch took, in order: job i has handle `first + i`.
struct TakenJobs {
    var first: Int64 = 0
    /// Suspects waiting in their list, as the fetch script saw it.
    var suspectsWaiting = 0
    /// The jobs end to end in one buffer, and each one's range: a batch's jobs cost one
    /// allocation, and share it until the last is done.
    var bytes: [UInt8] = []
    var ranges: [Range<Int>] = []

    var count: Int { ranges.count }
    var isEmpty: Bool { ranges.isEmpty }

    /// Two replies read flat: the fetch script's {first handle, count, suspects} (or the lost batch's
    /// first handle, 0 if its fetch never ran), then the batch's list.
    init(_ reply: RedisFlatReply) throws(RedisError) {
        guard reply.count > 0 else { throw .server("no reply to the fetch") }
        let list: Int
        if reply.isArray(0) {
            guard let first = reply.integer(1) else { throw .server("the fetch script answered no handle") }
            self.first = first
            suspectsWaiting = Int(reply.integer(3) ?? 0)
            list = 4
        } else {
            first = reply.integer(0) ?? 0
            list = 1
        }
        guard first > 0 else { return }
        guard list < reply.count, reply.isArray(list) else { throw .server("the batch's jobs came back as no list") }
        (bytes, ranges) = reply.sharedStrings((list + 1)..<reply.count)
    }
}

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
