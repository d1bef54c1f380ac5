import Delivery
import Synchronization

/// Jobs whose outcomes are written, on their way from the completer that wrote them to the
/// fetcher that frees them: one is freed as each new job is taken, so that each free hands
/// malloc's per-thread cache the blocks the next job allocates (docs/performance.md). The
/// completer hands over (`handOver`); the fetcher keeps an `Unfreed` on it.
final class RecordedJobs: Sendable {
    private let handedOver = Mutex<[[FinishedJob]]>([])

    init() {}

    /// Moves a written batch here, leaving the caller no reference to its jobs.
    func handOver(_ batch: inout [FinishedJob]) {
        handedOver.withLock { q in
            q.append([])
            swap(&q[q.count - 1], &batch)
        }
    }

    /// The fetcher's side: what it has collected and not yet freed. Its thread's alone.
    struct Unfreed {
        let from: RecordedJobs
        private var batches: [[FinishedJob]] = []
        private(set) var count = 0

        init(from: RecordedJobs) { self.from = from }

        /// Takes what was handed over since the last call.
        mutating func collect() {
            var taken: [[FinishedJob]] = []
            from.handedOver.withLock { swap(&$0, &taken) }
            for b in taken { count += b.count }
            batches.append(contentsOf: taken)
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
}
