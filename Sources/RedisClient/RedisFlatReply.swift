internal import CHiredis
internal import CHiredisIO

/// A reply read flat: one item per element, arrays included, in reading order, over one buffer
/// of string contents. Reading a reply of a thousand jobs this way allocates nothing per job
/// (hiredis's own reader makes a reply object and a string for each).
/// Valid only inside the `run(_:_:flat:)` body that it is handed to.
public struct RedisFlatReply {
    fileprivate let storage: UnsafeMutablePointer<apnsw_flat_reply>
    /// From a `NonBlockingRedisConnection` group with skipped replies: whether the last of them was an array (a
    /// transaction's EXEC: it ran), its elements scanned but not kept.
    public let skippedArray: Bool

    init(_ storage: UnsafeMutablePointer<apnsw_flat_reply>, skippedArray: Bool = false) {
        self.storage = storage
        self.skippedArray = skippedArray
    }

    public var count: Int { storage.pointee.items_len }

    public func isArray(_ i: Int) -> Bool { item(i).type == REDIS_REPLY_ARRAY }

    /// An integer item's value, or an array's element count.
    public func integer(_ i: Int) -> Int64? {
        let it = item(i)
        return it.type == REDIS_REPLY_INTEGER || it.type == REDIS_REPLY_ARRAY ? it.value : nil
    }

    /// A string item's bytes, copied out.
    public func bytes(_ i: Int) -> [UInt8]? {
        let it = item(i)
        guard it.type == REDIS_REPLY_STRING else { return nil }
        return Array(UnsafeBufferPointer(start: storage.pointee.bytes + it.offset, count: it.length))
    }

    /// The string items among `items`: one copy of their bytes, end to end (one allocation for
    /// all of them, not one each), and each one's range in it. Items that are not strings are
    /// left out. Ranges, not slices: a slice per string counted a reference on the copy.
    public func sharedStrings(_ items: Range<Int>) -> (bytes: [UInt8], ranges: [Range<Int>]) {
        let all = UnsafeBufferPointer(start: storage.pointee.items, count: count)[items]
        guard let first = all.firstIndex(where: { $0.type == REDIS_REPLY_STRING }),
            let last = all.lastIndex(where: { $0.type == REDIS_REPLY_STRING })
        else { return ([], []) }
        // Strings are stored in reading order: the span runs from the first to the end of the last.
        let start = all[first].offset
        let bytes = Array(UnsafeBufferPointer(start: storage.pointee.bytes + start, count: all[last].offset + all[last].length - start))
        var ranges: [Range<Int>] = []
        ranges.reserveCapacity(last - first + 1)
        for item in all[first...last] where item.type == REDIS_REPLY_STRING {
            ranges.append((item.offset - start)..<(item.offset - start + item.length))
        }
        return (bytes, ranges)
    }

    /// The message of the first error among the items, nested ones included (a transaction's
    /// commands that failed when EXEC ran them).
    public var firstError: String? {
        let items = UnsafeBufferPointer(start: storage.pointee.items, count: count)
        guard let it = items.first(where: { $0.type == REDIS_REPLY_ERROR }) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: storage.pointee.bytes + it.offset, count: it.length), as: UTF8.self)
    }

    /// The reply, unless an error in it is `-READONLY`: thrown as the connection's loss.
    func checkedForReplica() throws(RedisError) -> RedisFlatReply {
        if let m = firstError, RedisError.isReplicaAnswer(m) { throw .server(m) }
        return self
    }

    /// The message of an error reply at the top.
    public var error: String? {
        guard count > 0, item(0).type == REDIS_REPLY_ERROR else { return nil }
        let it = item(0)
        return String(decoding: UnsafeBufferPointer(start: storage.pointee.bytes + it.offset, count: it.length), as: UTF8.self)
    }

    private func item(_ i: Int) -> apnsw_flat_item { storage.pointee.items[i] }
}

extension BlockingRedisConnection {
    /// Runs `script` and hands its reply, read flat, to `body`. After NOSCRIPT (a restarted
    /// Redis) it loads the script and runs it again. Server errors are thrown.
    public func run<R>(_ script: RedisScript, _ args: RedisArgs, flat body: (RedisFlatReply) throws(RedisError) -> R) throws(RedisError) -> R {
        try body(loadingIfNeeded(script, send: { () throws(RedisError) in try commandsFlat([args]) }, error: \.error))
    }

    /// Runs `script`, then `next` in the same write, and hands both replies, read flat one
    /// after the other, to `body`. After NOSCRIPT it loads the script and sends both again.
    /// An error answer of the script is thrown.
    public func run<R>(
        _ script: RedisScript, _ args: RedisArgs, then next: RedisArgs,
        flat body: (RedisFlatReply) throws(RedisError) -> R
    ) throws(RedisError) -> R {
        try body(loadingIfNeeded(script, send: { () throws(RedisError) in try commandsFlat([args, next]) }, error: \.error))
    }

    /// Sends `commands` in one write and hands their replies, read flat one after the other, to
    /// `body`. Errors answered come to `body` as items.
    public func commands<R>(_ commands: [RedisArgs], flat body: (RedisFlatReply) throws(RedisError) -> R) throws(RedisError) -> R {
        try body(commandsFlat(commands))
    }

    private func commandsFlat(_ commands: [RedisArgs]) throws(RedisError) -> RedisFlatReply {
        for args in commands { try append(args) }
        for i in commands.indices {
            guard apnsw_redis_read_flat(context, io, flat, i == 0 ? 0 : 1) == REDIS_OK else { throw contextError }
        }
        return try RedisFlatReply(flat).checkedForReplica()
    }
}
