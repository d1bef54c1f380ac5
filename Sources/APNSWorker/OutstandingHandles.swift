import Synchronization

/// The in-flight handles this process knows it holds. After a fetch whose reply was lost (a
/// Redis restart mid-call), the fetcher compares them with its in-flight hash in Redis to find
/// jobs that were moved but never received.
/// Handles are the decimal numbers the fetch script hands out, kept as integers (cheap to hash).
final class OutstandingHandles: Sendable {
    private let handles = Mutex(Set<Int64>())

    func insert(_ new: [Int64]) {
        handles.withLock { set in for h in new { set.insert(h) } }
    }

    func remove(_ done: [Int64]) {
        handles.withLock { set in for h in done { set.remove(h) } }
    }

    var snapshot: Set<Int64> { handles.withLock { $0 } }
}
