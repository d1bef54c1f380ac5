import CHiredis

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
        storage.append(contentsOf: text.utf8)
        ends.append(storage.count)
    }

    public mutating func append<C: Collection>(bytes: C) where C.Element == UInt8 {
        storage.append(contentsOf: bytes)
        ends.append(storage.count)
    }

    public mutating func append(_ value: Int) { append(String(value)) }

    /// Appends one argument written in place by `body` (which only appends to the buffer).
    public mutating func append(writing body: (inout [UInt8]) -> Void) {
        body(&storage)
        ends.append(storage.count)
    }

    func withArgv<R>(_ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
        storage.withUnsafeBufferPointer { buf in
            let base = UnsafeRawPointer(buf.baseAddress ?? UnsafePointer(bitPattern: 1)!).assumingMemoryBound(to: CChar.self)
            var pointers = [UnsafePointer<CChar>?]()
            var lengths = [Int]()
            pointers.reserveCapacity(ends.count)
            lengths.reserveCapacity(ends.count)
            var start = 0
            for end in ends {
                pointers.append(base + start)
                lengths.append(end - start)
                start = end
            }
            return pointers.withUnsafeMutableBufferPointer { p in
                lengths.withUnsafeBufferPointer { l in body(Int32(ends.count), p.baseAddress!, l.baseAddress!) }
            }
        }
    }
}

extension RedisConnection {
    /// Runs a script whose `EVALSHA` header `args` already holds (`RedisArgs(script:keys:)`).
    /// After NOSCRIPT (a restarted Redis) it loads the script and runs it again.
    public func run(_ script: RedisScript, _ args: RedisArgs) throws(RedisError) -> RedisReply {
        var reply = try command(args)
        if case .error(let message) = reply, message.hasPrefix("NOSCRIPT") {
            if case .error(let m) = try command(["SCRIPT", "LOAD", script.source]) { throw .server(m) }
            reply = try command(args)
        }
        if case .error(let message) = reply { throw .server(message) }
        return reply
    }
}
