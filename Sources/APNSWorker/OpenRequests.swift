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

    /// Lends the request of `stream` to `body`. `body` must not close streams; to keep the
    /// request past a close, it returns a reference of its own.
    func with<R>(_ stream: Int32, _ body: (SendRequest) -> R) -> R? {
        table[stream]?._withUnsafeGuaranteedRef(body)
    }

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
