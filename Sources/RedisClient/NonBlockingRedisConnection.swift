import Buffers
internal import CHiredis
internal import CHiredisIO
import Glibc
import TLS

/// A Redis connection that never blocks, for a thread that waits on epoll: its owner watches
/// `fd`, calls `writable()` and `readable()` when epoll says so, and takes each group's replies
/// from `nextReply()`. Commands go in groups, answered in order; a group's replies come back
/// read flat, as `BlockingRedisConnection.run(_:_:flat:)` reads them. Owned by one thread.
public final class NonBlockingRedisConnection {
    /// redisContext*, owned by the thread that owns this pipe.
    private let context: UnsafeMutablePointer<redisContext>
    public let endpoint: RedisEndpoint
    /// Sent groups whose replies have not all been read, oldest first.
    private var groups: [Group] = []
    private var next = 0
    /// How far the oldest group's replies are read.
    private var scan = apnsw_scan_state()
    private var skipping = true
    private let flat: UnsafeMutablePointer<apnsw_flat_reply> = {
        let p = UnsafeMutablePointer<apnsw_flat_reply>.allocate(capacity: 1)
        p.initialize(to: apnsw_flat_reply())
        return p
    }()
    private let summary: UnsafeMutablePointer<apnsw_reply_summary> = {
        let p = UnsafeMutablePointer<apnsw_reply_summary>.allocate(capacity: 1)
        p.initialize(to: apnsw_reply_summary())
        return p
    }()
    private var encoded = ByteBuffer(capacity: 1024)
    /// Whether the connect has finished (the socket was writable once).
    public private(set) var isConnected = false
    /// The TLS session over the socket, when the endpoint asks for TLS: its handshake follows
    /// the connect, and commands wait in hiredis's buffer until it is done.
    private var link: RedisTLSLink?
    private var io: UnsafePointer<apnsw_redis_io>? { link.map { UnsafePointer($0.io) } }
    /// Connected, and the TLS handshake (if any) done: commands can go.
    private var isOpen: Bool { isConnected && link?.handshakeDone != false }

    /// Commands sent together. The replies of the first `skipped` are checked for errors and
    /// dropped; those of the rest are handed over.
    private struct Group {
        var skipped: Int
        var kept: Int
        /// The connection's own AUTH and SELECT: an error is reported without the server's words.
        var handshake = false
        /// Kept when the group can go to another node on `-ASK`: one command answered, no
        /// transaction (a WATCH holds on this connection only).
        var commands: [RedisArgs]? = nil
    }

    /// A group answered `-ASK`, taken by `takeRedirect()`.
    private var redirect: AskRedirect?

    /// Starts connecting, and queues AUTH and SELECT as the endpoint needs them.
    public init(_ endpoint: RedisEndpoint) throws(RedisError) {
        self.endpoint = endpoint
        let made = endpoint.socket.map { apnsw_redis_connect_unix_nonblock($0) } ?? apnsw_redis_connect_nonblock(endpoint.host, Int32(endpoint.port))
        guard let ctx = made else { throw .io("cannot allocate a context") }
        context = ctx
        if apnsw_redis_context_error(ctx) != 0 { throw .io("\(endpoint): \(String(cString: apnsw_redis_context_errstr(ctx)))") }
        if let tls = endpoint.tls, endpoint.socket == nil {
            do { link = try RedisTLSLink(tls, fd: apnsw_redis_context_fd(ctx), host: endpoint.host) } catch { throw .io("\(endpoint): \(error)") }
        }
        var handshake: [RedisArgs] = []
        if let auth = endpoint.auth { handshake.append(RedisArgs(auth)) }
        if endpoint.database != 0 { handshake.append(RedisArgs(["SELECT", String(endpoint.database)])) }
        if !handshake.isEmpty {
            try send(handshake, skipping: handshake.count)
            groups[groups.count - 1].handshake = true
        }
    }

    deinit {
        link?.closeNotify()
        redisFree(context)
        apnsw_flat_reply_free(flat)
        flat.deallocate()
        summary.deallocate()
    }

    /// Before a connection given up on is freed: its close resets it, so that the kernel drops
    /// what it has not sent instead of sending it late, after the owner wrote it again elsewhere.
    public func abandon() {
        var off = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, socklen_t(MemoryLayout<linger>.size))
    }

    /// The socket, for epoll.
    public var fd: Int32 { apnsw_redis_context_fd(context) }

    /// Whether the pipe waits for the socket to be writable: to finish connecting, or to send.
    public var wantsWrite: Bool {
        guard isConnected else { return true }
        if let link, !link.handshakeDone { return link.handshakeWantsWrite }
        return apnsw_redis_output_len(context) > 0
    }

    /// Whether sent commands still await replies.
    public var isWaiting: Bool { next < groups.count }

    /// Queues `commands` as one group (as `send(resp:commands:skipping:)` does).
    public func send(_ commands: [RedisArgs], skipping: Int = 0) throws(RedisError) {
        encoded.removeAll()
        for args in commands { args.encode(appendingTo: &encoded) }
        try send(resp: encoded.bytes(), commands: commands.count, skipping: skipping)
        if commands.count - skipping == 1, !commands.contains(where: \.isTransactional) { groups[groups.count - 1].commands = commands }
    }

    /// Queues commands already in RESP as one group: `commands` of them, the first `skipping`
    /// answered only to be checked. With nothing else queued, what the socket takes is written
    /// straight from `resp` (a completion's transaction is hundreds of kilobytes).
    func send(resp: UnsafeRawBufferPointer, commands: Int, skipping: Int) throws(RedisError) {
        let rc = apnsw_redis_send(context, io, resp.baseAddress?.assumingMemoryBound(to: CChar.self), resp.count, isOpen ? 1 : 0)
        guard rc == REDIS_OK else { throw contextError }
        groups.append(Group(skipped: skipping, kept: commands - skipping))
    }

    /// The socket is writable: finishes connecting, then writes what is queued until the socket
    /// takes no more.
    public func writable() throws(RedisError) {
        if !isConnected {
            guard apnsw_redis_connect_result(context) == REDIS_OK else { throw contextError.at(endpoint) }
            isConnected = true
        }
        guard try handshakeIfDue() else { return }
        guard apnsw_redis_flush(context, io, nil) == REDIS_OK else { throw contextError }
    }

    /// The socket is readable: reads what has arrived (an error once the server has closed).
    public func readable() throws(RedisError) {
        guard try handshakeIfDue() else { return }
        guard apnsw_redis_buffer_read(context, io) == REDIS_OK else { throw contextError }
    }

    /// Takes the TLS handshake a step on, if it is not done; true once it is. The commands that
    /// waited for it go with the next write (`wantsWrite` is true while they wait).
    private func handshakeIfDue() throws(RedisError) -> Bool {
        guard let link, !link.handshakeDone else { return true }
        do { return try link.handshake() } catch { throw .io("\(endpoint): \(error)") }
    }

    /// The oldest group's replies once they have all arrived, read flat (valid until the next
    /// call), or nil while more must be read. An error reply among the skipped ones is thrown.
    public func nextReply() throws(RedisError) -> RedisFlatReply? {
        while next < groups.count {
            let group = groups[next]
            if !isMidGroup {
                begin(skipping: group.skipped > 0, count: group.skipped > 0 ? group.skipped : group.kept)
            }
            var sink = skipping ? apnsw_reply_sink(summary: summary, flat: nil) : apnsw_reply_sink(summary: nil, flat: flat)
            let scanned = apnsw_redis_scan_buffered(context, &scan, &sink)
            if scanned < 0 { throw contextError }
            if scanned == 0 { return nil }
            if skipping {
                if summary.pointee.errors > 0 {
                    groups.removeAll(); next = 0; isMidGroup = false
                    // The server's message never holds the password; ours names only the endpoint.
                    throw .server(group.handshake ? "authentication to \(endpoint) failed" : summary.pointee.firstError)
                }
                skippedArray = summary.pointee.top_type == REDIS_REPLY_ARRAY
                if group.kept > 0 { begin(skipping: false, count: group.kept); continue }
            }
            isMidGroup = false
            next += 1
            if next == groups.count { groups.removeAll(keepingCapacity: true); next = 0 }
            guard group.kept > 0 else { continue }
            let reply = RedisFlatReply(flat, skippedArray: group.skipped > 0 && skippedArray)
            if let commands = group.commands, let m = reply.error, let asked = AskRedirect(m, commands: commands, skipping: group.skipped) {
                redirect = asked
                return nil
            }
            return try reply.checkedForReplica()
        }
        return nil
    }

    /// The group `nextReply()` stopped at because the server answered `-ASK`: its slot is moving
    /// and its keys are at another node already. Its owner sends it there, and reads the
    /// groups after it only once that node answered.
    public func takeRedirect() -> AskRedirect? {
        defer { redirect = nil }
        return redirect
    }

    /// Whether the oldest group's scan has begun (its skipped replies may all be read), and
    /// whether the last of its skipped replies was an array.
    private var isMidGroup = false
    private var skippedArray = false

    private func begin(skipping: Bool, count: Int) {
        self.skipping = skipping
        isMidGroup = true
        scan = apnsw_scan_state(count: count, open: 0)
        summary.pointee = apnsw_reply_summary()
        flat.pointee.bytes_len = 0
        flat.pointee.items_len = 0
    }

    private var contextError: RedisError { RedisError(context: context) }
}
