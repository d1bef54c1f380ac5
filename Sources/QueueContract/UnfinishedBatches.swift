import Delivery
import Synchronization

/// The batches this process has fetched, in fetch order, as long as jobs of theirs are
/// unfinished. After each transaction the completer names the oldest, and checks that its list
/// is still there in the same write (CompletionTransaction): the next transaction then needs no
/// round trip of its own to learn that no recovery took its batches.
public final class UnfinishedBatches: @unchecked Sendable {
    private struct State {
        var batches: [TakenBatch] = []
        var head = 0
        var lastNumber = 0
    }
    private let state = Mutex(State())

    /// The lane whose batches these are (TakenBatch.lane).
    public let lane: Int

    public init(lane: Int = 0) { self.lane = lane }

    /// A fetcher took a batch: numbered here, under the lock that orders the list, so that
    /// numbers follow the list's order whichever I/O thread fetched.
    public func open(id: String, jobs: Int) -> TakenBatch {
        state.withLock { s in
            s.lastNumber += 1
            let batch = TakenBatch(id: id, number: s.lastNumber, jobs: jobs, lane: lane)
            s.batches.append(batch)
            return batch
        }
    }

    /// Completion thread: the oldest batch with jobs unfinished once `finishing` are done.
    public func oldest(besides finishing: [TakenBatch]) -> TakenBatch? {
        state.withLock { s in
            while s.head < s.batches.count, s.batches[s.head].unfinished == 0 || s.batches[s.head].takenBack { s.head += 1 }
            if s.head > 1024, s.head * 2 > s.batches.count {
                s.batches.removeFirst(s.head)
                s.head = 0
            }
            var i = s.head
            while i < s.batches.count {
                let b = s.batches[i]
                if b.unfinished > 0, !b.takenBack, !finishing.contains(where: { $0 === b }) { return b }
                i += 1
            }
            return nil
        }
    }

    /// How many jobs the lane holds unfinished (sent and unanswered, or answered and unwritten).
    public var heldJobs: Int {
        state.withLock { s in s.batches[s.head...].reduce(0) { $0 + ($1.takenBack ? 0 : $1.unfinished) } }
    }

    /// The batches with unfinished jobs that are still this worker's, as far as it knows.
    public var held: [TakenBatch] {
        state.withLock { s in s.batches[s.head...].filter { $0.unfinished > 0 && !$0.takenBack } }
    }
}
