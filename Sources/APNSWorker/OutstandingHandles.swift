import Synchronization

/// The in-flight handles this process knows it holds. After a fetch whose reply was lost (a
/// Redis restart mid-call), the fetcher compares them with its in-flight hash in Redis to find
/// jobs that were moved but never received.
final class OutstandingHandles: Sendable {
    private let handles = Mutex(Set<String>())

    func insert<S: Sequence>(_ new: S) where S.Element == String {
        handles.withLock { $0.formUnion(new) }
    }

    func remove<S: Sequence>(_ done: S) where S.Element == String {
        handles.withLock { $0.subtract(done) }
    }

    var snapshot: Set<String> { handles.withLock { $0 } }
}
