import IOLoop
import QueueContract
import RedisClient
import Synchronization

/// The jobs one fetch took, in order: job i has handle `first + i`.
struct TakenJobs {
    var first: Int64 = 0
    /// The fetch script held back a recovered job for a worker that holds nothing.
    var waitsUntilIdle = false
    /// The jobs end to end in one buffer, and each one's range: a batch's jobs cost one
    /// allocation, and share it until the last is done.
    var bytes: [UInt8] = []
    var ranges: [Range<Int>] = []

    var count: Int { ranges.count }
    var isEmpty: Bool { ranges.isEmpty }

    /// Two replies read flat: the fetch script's {first handle, count} (or the lost batch's
    /// first handle, 0 if its fetch never ran), then the batch's list.
    init(_ reply: RedisFlatReply) throws(RedisError) {
        guard reply.count > 0 else { throw .server("no reply to the fetch") }
        let list: Int
        if reply.isArray(0) {
            guard let first = reply.integer(1) else { throw .server("the fetch script answered no handle") }
            self.first = first
            waitsUntilIdle = reply.integer(2) == -1
            list = 3
        } else {
            first = reply.integer(0) ?? 0
            list = 1
        }
        guard first > 0 else { return }
        guard list < reply.count, reply.isArray(list) else { throw .server("the batch's jobs came back as no list") }
        (bytes, ranges) = reply.sharedStrings((list + 1)..<reply.count)
    }
}

/// Recorded jobs waiting to be freed by a fetcher, one at a time.
struct UnfreedJobs {
    private var batches: [[FinishedJob]] = []
    private(set) var count = 0

    mutating func add(_ recorded: [[FinishedJob]]) {
        for b in recorded { count += b.count }
        batches.append(contentsOf: recorded)
    }

    mutating func freeOne() {
        while let last = batches.last, last.isEmpty { batches.removeLast() }
        guard !batches.isEmpty else { return }
        batches[batches.count - 1].removeLast()
        count -= 1
    }

    mutating func freeAll() {
        batches.removeAll()
        count = 0
    }
}

/// Batch ids, unique to the worker's life: this process's start time and a count, so that a
/// batch left by an earlier run under the same worker id is never overwritten. Shared by the
/// fetchers of every I/O thread.
final class BatchIDs: Sendable {
    /// What every batch id of this process starts with, and of no earlier run of its worker id.
    let prefix = String(WallClock.nowMilliseconds(), radix: 36) + "-"
    private let count = Atomic<Int>(0)

    func next() -> String { prefix + String(count.add(1, ordering: .relaxed).newValue) }
}
