import Foundation

/// The batches this process has fetched, in fetch order, as long as jobs of theirs are
/// unfinished. After each transaction the completer names the oldest, and checks that its list
/// is still there in the same write (CompletionTransaction): the next transaction then needs no
/// round trip of its own to learn that no recovery took its batches.
public final class UnfinishedBatches: @unchecked Sendable {
    private let lock = NSLock()
    private var batches: [TakenBatch] = []
    private var head = 0
    private var lastNumber = 0

    public init() {}

    /// A fetcher took a batch: numbered here, under the lock that orders the list, so that
    /// numbers follow the list's order whichever I/O thread fetched.
    public func open(id: String, jobs: Int) -> TakenBatch {
        lock.lock()
        defer { lock.unlock() }
        lastNumber += 1
        let batch = TakenBatch(id: id, number: lastNumber, jobs: jobs)
        batches.append(batch)
        return batch
    }

    /// Completion thread: the oldest batch with jobs unfinished once `finishing` are done.
    public func oldest(besides finishing: [TakenBatch]) -> TakenBatch? {
        lock.lock()
        defer { lock.unlock() }
        while head < batches.count, batches[head].unfinished == 0 || batches[head].takenBack { head += 1 }
        if head > 1024, head * 2 > batches.count {
            batches.removeFirst(head)
            head = 0
        }
        var i = head
        while i < batches.count {
            let b = batches[i]
            if b.unfinished > 0, !b.takenBack, !finishing.contains(where: { $0 === b }) { return b }
            i += 1
        }
        return nil
    }

    /// The batches with unfinished jobs that are still this worker's, as far as it knows.
    public var held: [TakenBatch] {
        lock.lock()
        defer { lock.unlock() }
        return batches[head...].filter { $0.unfinished > 0 && !$0.takenBack }
    }
}
