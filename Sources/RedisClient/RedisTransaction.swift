import Buffers
internal import CHiredis
internal import CHiredisIO

/// Commands for one MULTI … EXEC, encoded end to end in one buffer. Their replies are counted,
/// not built (`BlockingRedisConnection.exec`): a transaction of a thousand commands allocates nothing
/// per reply, and Redis runs each command directly instead of through a Lua call.
/// Not copyable: it owns its buffer.
public struct RedisTransaction: ~Copyable {
    fileprivate var encoded: ByteBuffer
    /// Commands between MULTI and EXEC.
    public private(set) var count = 0

    public init(capacity: Int = 4096) {
        encoded = ByteBuffer(capacity: capacity)
        removeAll()
    }

    /// Empties the transaction, keeping its buffer for the next one.
    public mutating func removeAll() {
        encoded.removeAll()
        count = 0
        RedisArgs(["MULTI"]).encode(appendingTo: &encoded)
    }

    public mutating func append(_ command: RedisArgs) {
        command.encode(appendingTo: &encoded)
        count += 1
    }

    /// Appends `prefix` (every argument but the last, from `RedisArgs.prefix`) with a last
    /// argument that `body` writes in place (it only appends): a run of commands that differ
    /// only in their last argument is written without rebuilding, and a record goes into the
    /// transaction without a buffer of its own. Its length comes first: room for three digits is
    /// kept, and the bytes move only when the length has another number of digits (records are
    /// mostly 100-999 bytes).
    public mutating func append(prefix: RedisArgs.Prefix, writing body: (inout ByteBuffer) -> Void) {
        // The prefix ends with the last argument's header (`$000\r\n`).
        prefix.resp.withUnsafeBytes { encoded.append($0) }
        let room = RedisArgs.Prefix.lengthRoom + 3
        let header = encoded.count - room
        let start = encoded.count
        body(&encoded)
        let length = encoded.count - start
        if length >= 100 && length <= 999 && RedisArgs.Prefix.lengthRoom == 3 {
            // Three digits (most records): written over the room's zeros, in place.
            encoded[header + 1] = UInt8(ascii: "0") &+ UInt8(length / 100)
            encoded[header + 2] = UInt8(ascii: "0") &+ UInt8(length / 10 % 10)
            encoded[header + 3] = UInt8(ascii: "0") &+ UInt8(length % 10)
        } else {
            RedisArgs.withDecimal(length, before: UInt8(ascii: "$"), after: true) { digits in
                encoded.replaceSubrange(header..<(header + room), with: UnsafeRawBufferPointer(digits))
            }
        }
        encoded.append(13)
        encoded.append(10)
        count += 1
    }

    /// Ends the transaction with EXEC, and appends `next` after it, to go in the same write.
    fileprivate mutating func end(then next: [RedisArgs]) {
        RedisArgs(["EXEC"]).encode(appendingTo: &encoded)
        for command in next { command.encode(appendingTo: &encoded) }
    }
}

extension BlockingRedisConnection {
    /// Runs `transaction`. Returns false, with nothing applied, when a key WATCHed on this
    /// connection changed since the WATCH. An error reply, queued or run, is thrown; Redis
    /// does not roll back the commands that ran before it.
    /// The transaction ends with EXEC; `removeAll()` readies it for the next one.
    public func exec(_ t: inout RedisTransaction) throws(RedisError) -> Bool {
        try exec(&t, then: []).ran
    }

    /// Runs `transaction`, then `next` in the same write: one round trip. Returns whether the
    /// transaction ran, and each of `next`'s replies as an integer (nil if it is not one).
    public func exec(_ t: inout RedisTransaction, then next: [RedisArgs]) throws(RedisError) -> (ran: Bool, next: [Int64?]) {
        t.end(then: next)
        try appendEncoded(t.encoded.bytes())
        var summary = apnsw_reply_summary()
        // MULTI, each command's QUEUED, EXEC
        guard apnsw_redis_skip_replies(context, io, t.count + 2, &summary) == REDIS_OK else { throw contextError }
        let ran = summary.top_type == REDIS_REPLY_ARRAY
        var answers: [Int64?] = []
        for _ in next {
            guard apnsw_redis_skip_replies(context, io, 1, &summary) == REDIS_OK else { throw contextError }
            answers.append(summary.top_type == REDIS_REPLY_INTEGER ? summary.top_value : nil)
        }
        if summary.errors > 0 {
            throw .server(summary.firstError)
        }
        return (ran, answers)
    }
}

extension NonBlockingRedisConnection {
    /// Queues `transaction`, then `next`, as one group. MULTI's and each command's
    /// acknowledgement are checked and dropped (an error among them is thrown by `nextReply`).
    /// Without `next`, EXEC's reply comes back read flat (nil when a WATCHed key changed). With
    /// it, EXEC's reply is checked and dropped too, `skippedArray` telling whether it ran, and
    /// `next`'s replies come back read flat: the transaction's own replies, one per command, are
    /// only scanned.
    /// The transaction ends with EXEC; `removeAll()` readies it for the next one.
    public func send(_ t: inout RedisTransaction, then next: [RedisArgs]) throws(RedisError) {
        t.end(then: next)
        // MULTI, the commands, EXEC, then `next`
        try send(resp: t.encoded.bytes(), commands: t.count + 2 + next.count, skipping: t.count + (next.isEmpty ? 1 : 2))
    }
}

extension apnsw_reply_summary {
    /// The first error reply's message (cut short at 159 bytes).
    var firstError: String {
        withUnsafeBytes(of: first_error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}
