import HTTP2TLS

/// The request of each open stream of one connection. The table holds one reference per
/// request, taken when its stream opens and given back when it closes, so that looking a
/// request up for each part of its answer (several per request) costs no reference count.
struct OpenRequests {
    private var table: StreamTable<Unmanaged<SendRequest>>

    init(capacity: Int) { table = StreamTable(capacity: capacity) }

    var count: Int { table.count }

    mutating func open(_ stream: Int32, _ request: SendRequest) {
        table.removeValue(forKey: stream)?.release()
        table[stream] = Unmanaged.passRetained(request)
    }

    /// The request of `stream`, unretained: valid while the stream is open. A trivial value, so
    /// the caller lends it on (`_withUnsafeGuaranteedRef`) without holding the table: a lender
    /// that took a closure kept the table's buffer retained across it, per header.
    subscript(stream: Int32) -> Unmanaged<SendRequest>? { table[stream] }

    mutating func close(_ stream: Int32) -> SendRequest? {
        table.removeValue(forKey: stream)?.takeRetainedValue()
    }

    /// Closes every stream; returns their requests.
    mutating func closeAll() -> [SendRequest] {
        let all = table.entries.map { $0.value.takeRetainedValue() }
        table.removeAll()
        return all
    }

    /// Every open stream and its request, in no particular order.
    var entries: [(id: Int32, request: SendRequest)] { table.entries.map { ($0.id, $0.value.takeUnretainedValue()) } }
}
