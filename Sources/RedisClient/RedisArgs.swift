import Buffers
internal import CHiredis
internal import CHiredisIO

/// The arguments of one command, packed end to end in one buffer: building a batch of
/// thousands of arguments costs a few allocations, not one per argument.
public struct RedisArgs {
    public private(set) var storage: [UInt8] = []
    private var ends: [Int] = []

    public init(capacity: Int = 4096) {
        storage.reserveCapacity(capacity)
        ends.reserveCapacity(64)
    }

    /// `EVALSHA <sha> <n> <keys…>`, ready for the script's arguments.
    public init(script: RedisScript, keys: [String], capacity: Int = 4096) {
        self.init(capacity: capacity)
        append("EVALSHA")
        append(script.sha1)
        append(String(keys.count))
        for k in keys { append(k) }
    }

    public var count: Int { ends.count }

    public mutating func append(_ text: String) {
        // Native strings, inline ones included, lend their bytes whole, without a copy of the
        // string; `append(contentsOf: text.utf8)` would go byte by byte. (APNSCore's
        // `String.withUTF8Bytes` does the same; this edge does not import the domain module.)
        if text.utf8.withContiguousStorageIfAvailable({ storage.append(contentsOf: $0) }) == nil {
            var text = text
            text.withUTF8 { storage.append(contentsOf: $0) }
        }
        ends.append(storage.count)
    }

    public mutating func append<C: Collection>(bytes: C) where C.Element == UInt8 {
        storage.append(contentsOf: bytes)
        ends.append(storage.count)
    }

    public mutating func append(_ value: Int) { Self.withDecimal(value) { append(bytes: $0) } }

    /// A command written out word by word: `RedisArgs(["LRANGE", key, "0", "-1"])`.
    public init(_ words: [String]) {
        self.init(capacity: words.reduce(16) { $0 + $1.utf8.count })
        for w in words { append(w) }
    }

    /// Empties the arguments, keeping the buffers for the next command.
    public mutating func removeAll() {
        storage.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
    }

    /// The bytes of argument `i`.
    public func argument(_ i: Int) -> ArraySlice<UInt8> { storage[range(of: i)] }

    /// Where argument `i` sits in `storage`.
    public func range(of i: Int) -> Range<Int> { (i == 0 ? 0 : ends[i - 1])..<ends[i] }

    /// The command in the Redis protocol (RESP), after what `out` holds: hiredis's own formatting
    /// grows a string per argument, which cost more than the records themselves. `more`:
    /// arguments the caller writes after these.
    func encode(appendingTo out: inout ByteBuffer, more: Int = 0) {
        Self.withDecimal(ends.count + more, before: UInt8(ascii: "*"), after: true) { out.append(UnsafeRawBufferPointer($0)) }
        storage.withUnsafeBytes { buf in
            var start = 0
            for end in ends {
                Self.withDecimal(end - start, before: UInt8(ascii: "$"), after: true) { out.append(UnsafeRawBufferPointer($0)) }
                out.append(UnsafeRawBufferPointer(rebasing: buf[start..<end]))
                out.append(13)
                out.append(10)
                start = end
            }
        }
    }

    /// A command's arguments but its last, in RESP, for `RedisTransaction.append(prefix:writing:)`,
    /// followed by the header of the last argument with room for its length (`$000\r\n`): the
    /// two go into a transaction in one append.
    public struct Prefix {
        let resp: [UInt8]
        static let lengthRoom = 3
    }

    /// These arguments as the start of a command that has one more.
    public var prefix: Prefix {
        Prefix(
            resp: ByteBuffer.array { resp in
                encode(appendingTo: &resp, more: 1)
                resp.append(UInt8(ascii: "$"))
                for _ in 0..<Prefix.lengthRoom { resp.append(UInt8(ascii: "0")) }
                resp.append(13)
                resp.append(10)
            })
    }

    /// The decimal digits of `n` (optionally after `before`, and followed by CRLF), written right
    /// to left on the stack: dividing by the constant 10 is a multiplication, not a division.
    static func withDecimal(_ n: Int, before: UInt8? = nil, after crlf: Bool = false, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { buf in
            var i = 24
            if crlf { buf[22] = 13; buf[23] = 10; i = 22 }
            var magnitude = n.magnitude
            repeat {
                i -= 1
                buf[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if n < 0 { i -= 1; buf[i] = UInt8(ascii: "-") }
            if let before { i -= 1; buf[i] = before }
            body(UnsafeBufferPointer(rebasing: buf[i...]))
        }
    }
}

extension BlockingRedisConnection {
    /// Runs a script whose `EVALSHA` header `args` already holds (`RedisArgs(script:keys:)`).
    /// After NOSCRIPT (a restarted Redis) it loads the script and runs it again.
    public func run(_ script: RedisScript, _ args: RedisArgs) throws(RedisError) -> RedisReply {
        try loadingIfNeeded(
            script, send: { () throws(RedisError) in try command(args) },
            error: { if case .error(let m) = $0 { m } else { nil } })
    }

    /// Sends with `send`; after a NOSCRIPT answer loads `script` and sends again. The answer's
    /// error (by `error`) is thrown.
    func loadingIfNeeded<R>(_ script: RedisScript, send: () throws(RedisError) -> R, error: (R) -> String?) throws(RedisError) -> R {
        running = script
        defer { running = nil }
        let reply = try sendLoading(script, send: send, error: error)
        if let message = error(reply) { throw .server(message) }
        return reply
    }

    /// The blocking connections' NOSCRIPT path: sends, and after NOSCRIPT loads `script` on this
    /// connection's server and sends once more. Other error answers are returned.
    func sendLoading<R>(_ script: RedisScript?, send: () throws(RedisError) -> R, error: (R) -> String?) throws(RedisError) -> R {
        let reply = try send()
        guard let script, let message = error(reply), RedisScript.isMissing(message) else { return reply }
        if case .error(let m) = try command(script.load) { throw .server(m) }
        return try send()
    }
}
