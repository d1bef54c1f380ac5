import Delivery
import HTTP2
import PointerTricks

/// The request of each open stream of one connection. The table holds one reference per
/// request, taken when its stream opens and given back when it closes, so that looking a
/// request up for each part of its answer (several per request) costs no reference count.
/// A delivered request's reference goes on with its outcome (`handOver`) instead of being given
/// back at the close and taken again for the outcome.
struct OpenRequests {
    private struct Entry {
        let request: RetainedReference<SendRequest>
        /// False once the reference went with the outcome: the stream is still open, its request
        /// no longer this table's.
        var owned: Bool
    }

    private var table: StreamTable<Entry>

    init(capacity: Int) { table = StreamTable(capacity: capacity) }

    var count: Int { table.count }

    mutating func open(_ stream: Int32, _ request: SendRequest) {
        if let old = table.removeValue(forKey: stream), old.owned { old.request.release() }
        table[stream] = Entry(request: RetainedReference(retaining: request), owned: true)
    }

    /// The request of `stream`, unretained: valid while the stream is open and its request this
    /// table's. A trivial value, so the caller lends it on without holding the table: a lender
    /// that took a closure kept the table's buffer retained across it, per header.
    subscript(stream: Int32) -> UncountedReference<SendRequest>? {
        guard let entry = table[stream], entry.owned else { return nil }
        return entry.request.uncounted
    }

    /// The request of `stream` with the table's reference, for its outcome; the stream stays
    /// open (its close is still to come) with no request.
    mutating func handOver(_ stream: Int32) -> SendRequest? {
        guard let entry = table[stream], entry.owned else { return nil }
        table[stream] = Entry(request: entry.request, owned: false)
        return entry.request.take()
    }

    /// Closes `stream`: whether it was open here, and its request unless it was handed over.
    mutating func close(_ stream: Int32) -> (wasOpen: Bool, request: SendRequest?) {
        guard let entry = table.removeValue(forKey: stream) else { return (false, nil) }
        return (true, entry.owned ? entry.request.take() : nil)
    }

    /// Closes every stream; returns the requests still this table's.
    mutating func closeAll() -> [SendRequest] {
        let all = table.entries.compactMap { $0.value.owned ? $0.value.request.take() : nil }
        table.removeAll()
        return all
    }

    /// Every open stream whose request is this table's, and its request, in no particular order.
    var entries: [(id: Int32, request: SendRequest)] {
        table.entries.compactMap { $0.value.owned ? ($0.id, $0.value.request.object) : nil }
    }
}
