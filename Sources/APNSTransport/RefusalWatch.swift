/// Tells a connection that refuses every stream (a bad front-end node: a new connection lands on
/// another) from one that refuses some: `minimum` streams or more refused or reset over
/// `windowMs` or more, with no answer among them, and the connection is replaced (issue 43,
/// item 2: two such connections were kept, and 0 of 200 jobs went in 30 s).
struct RefusalWatch {
    let minimum: Int
    let windowMs: UInt64
    private var count = 0
    private var firstMs: UInt64 = 0

    init(minimum: Int = 5, windowMs: UInt64 = 2000) {
        self.minimum = minimum
        self.windowMs = windowMs
    }

    /// An answer with a status arrived: the connection works.
    mutating func answered() { count = 0 }

    /// A stream was refused or reset at `now`; true when the connection should be replaced.
    mutating func refused(atMs now: UInt64) -> Bool {
        if count == 0 { firstMs = now }
        count += 1
        return count >= minimum && now >= firstMs + windowMs
    }

    /// How long the connection has refused everything, for the log.
    func refusingMs(atMs now: UInt64) -> UInt64 { count == 0 ? 0 : now - firstMs }
}
