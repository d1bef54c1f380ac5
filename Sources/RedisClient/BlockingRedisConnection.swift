import Buffers
internal import CHiredis
internal import CHiredisIO
import TLS

/// A Redis reply, copied out of hiredis.
public enum RedisReply: Equatable, Sendable {
    case string([UInt8])
    case status(String)
    case integer(Int64)
    case array([RedisReply])
    case null
    case error(String)

    public var text: String? {
        switch self {
        case .string(let b): return String(decoding: b, as: UTF8.self)
        case .status(let s): return s
        case .integer(let i): return String(i)
        default: return nil
        }
    }

    public var integer: Int64? {
        switch self {
        case .integer(let i): return i
        case .string, .status: return text.flatMap { Int64($0) }
        default: return nil
        }
    }

    public var array: [RedisReply] {
        if case .array(let items) = self { return items }
        return []
    }
}

/// Where a Redis server is. The password is kept out of every description.
public struct RedisEndpoint: Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// A unix socket path; when set, host and port are not used. A Redis on the same machine
    /// costs both sides less CPU per command this way than over TCP.
    public var socket: String?
    public var password: String?
    /// An ACL user (Redis 6): `AUTH username password`; nil is the `default` user.
    public var username: String?
    public var database: Int
    /// TLS over TCP (not over a unix socket); nil: plain TCP.
    public var tls: RedisTLS?
    /// Sentinels that name the master; host and port are then not used.
    public var sentinel: RedisSentinel?
    /// Seed nodes of a Redis Cluster; host and port are then not used.
    public var cluster: RedisCluster?
    /// On a cluster, the key whose slot's master a connection goes to.
    public var routeKey: String?
    /// A master a sentinel or the cluster's map named, which `ROLE` must confirm when a
    /// connection opens.
    var mustBeMaster = false
    /// Which sentinel named it, for messages.
    var foundBy: String?
    public init(
        host: String = "127.0.0.1", port: Int = 6379, socket: String? = nil, password: String? = nil, database: Int = 0, username: String? = nil,
        tls: RedisTLS? = nil, sentinel: RedisSentinel? = nil
    ) {
        self.sentinel = sentinel
        self.tls = tls
        self.username = username
        self.host = host
        self.port = port
        self.socket = socket
        self.password = password
        self.database = database
    }
    public var description: String {
        let user = username.map { "\($0)@" } ?? ""
        if let socket { return "redis+unix://\(user)\(socket)?db=\(database)" }
        if let sentinel {
            let sentinels = sentinel.addresses.map(\.description).joined(separator: ",")
            return "redis+sentinel://\(user)\(sentinels)/\(sentinel.masterName)/\(database)"
        }
        if let cluster { return "redis+cluster://\(user)\(cluster.seeds.map(\.description).joined(separator: ","))" }
        return "\(tls == nil ? "redis" : "rediss")://\(user)\(host):\(port)/\(database)"
    }

    /// The AUTH command this endpoint needs, if any.
    public var auth: [String]? {
        guard let password else { return nil }
        return username.map { ["AUTH", $0, password] } ?? ["AUTH", password]
    }
}

/// One blocking hiredis connection. Used by one thread at a time (hiredis is not thread-safe).
public final class BlockingRedisConnection {
    /// redisContext*, owned by the thread using this connection.
    let context: UnsafeMutablePointer<redisContext>
    public let endpoint: RedisEndpoint
    /// The last command in RESP, kept to reuse its capacity.
    private var encoded = ByteBuffer(capacity: 1024)
    /// The TLS session over the socket, when the endpoint asks for TLS.
    private var link: RedisTLSLink?
    let timeoutMs: Int
    /// The script being run, for a node an `-ASK` sends it to that has not loaded it.
    var running: RedisScript?
    /// Where the C side reads and writes: the TLS session, or the socket (nil).
    var io: UnsafePointer<apnsw_redis_io>? { link.map { UnsafePointer($0.io) } }
    /// Buffers for replies read flat (`run(_:_:flat:)`), reused from call to call.
    let flat: UnsafeMutablePointer<apnsw_flat_reply> = {
        let p = UnsafeMutablePointer<apnsw_flat_reply>.allocate(capacity: 1)
        p.initialize(to: apnsw_flat_reply())
        return p
    }()

    /// Connects, authenticates and selects the database. `timeoutMs` bounds every call, so it
    /// must stay above any blocking command's timeout or the context dies (DESIGN.md §2).
    public init(_ given: RedisEndpoint, timeoutMs: Int = 5000) throws(RedisError) {
        let endpoint = try given.master(timeoutMs: timeoutMs)
        self.endpoint = endpoint
        self.timeoutMs = timeoutMs
        let made =
            endpoint.socket.map { apnsw_redis_connect_unix($0, timeoutMs) } ?? apnsw_redis_connect(endpoint.host, Int32(endpoint.port), timeoutMs)
        guard let ctx = made else {
            throw .io("cannot allocate a context")
        }
        if apnsw_redis_context_error(ctx) != 0 {
            let message = String(cString: apnsw_redis_context_errstr(ctx))
            redisFree(ctx)
            throw .io("\(endpoint): \(message)")
        }
        context = ctx
        _ = apnsw_redis_set_timeout(ctx, timeoutMs)
        if let tls = endpoint.tls, endpoint.socket == nil {
            let done: Bool
            do {
                let link = try RedisTLSLink(tls, fd: apnsw_redis_context_fd(ctx), host: endpoint.host)
                self.link = link
                done = try link.handshake()
            } catch { throw .io("\(endpoint): \(error)") }
            // A socket that blocks finishes the handshake in one call, or times out.
            guard done else { throw .timeout("\(endpoint): the TLS handshake timed out") }
        }
        do throws(RedisError) {
            if let auth = endpoint.auth {
                if case .error = try command(auth) {
                    // The server's message never contains the password; ours does not either.
                    throw .server("authentication to \(endpoint) failed (wrong password, or no such user)")
                }
            }
            if endpoint.database != 0 {
                if case .error(let m) = try command(["SELECT", String(endpoint.database)]) { throw .server(m) }
            }
            if endpoint.mustBeMaster {
                let role = try command(["ROLE"]).array.first?.text ?? "no answer"
                guard role == "master" else {
                    throw .io("named master of \(endpoint.foundBy ?? "?"), it says ROLE \(role): a failover is under way")
                }
            } else if endpoint.database == 0, endpoint.tls != nil, endpoint.auth == nil {
                // TLS 1.3 servers refuse a client's certificate after the handshake: ask now,
                // so that a refusal is this call's error, not a later command's.
                _ = try command(["PING"])
            }
        } catch  where error.code != .server {
            throw error.at(endpoint)
        }
    }

    deinit {
        link?.closeNotify()
        redisFree(context)
        apnsw_flat_reply_free(flat)
        flat.deallocate()
    }

    /// Sends one command and waits for its reply. Server errors come back as `.error`.
    public func command(_ args: [String]) throws(RedisError) -> RedisReply {
        try command(bytes: args.map { Array($0.utf8) })
    }

    public func command(bytes args: [[UInt8]]) throws(RedisError) -> RedisReply {
        var packed = RedisArgs(capacity: args.reduce(0) { $0 + $1.count })
        for a in args { packed.append(bytes: a) }
        return try command(packed)
    }

    public func command(_ args: RedisArgs) throws(RedisError) -> RedisReply {
        try append(args)
        var raw: UnsafeMutableRawPointer?
        guard apnsw_redis_get_reply(context, io, &raw) == REDIS_OK, let raw else { throw contextError }
        defer { freeReplyObject(raw) }
        let reply = RedisReply(raw.assumingMemoryBound(to: redisReply.self))
        if case .error(let m) = reply, m.hasPrefix("ASK ") { return try askOnce(m, args) }
        return try reply.checkedForReplica()
    }

    /// Queues one command in hiredis's output buffer (sent by the next reply read).
    func append(_ args: RedisArgs) throws(RedisError) {
        encoded.removeAll()
        args.encode(appendingTo: &encoded)
        try appendEncoded(encoded.bytes())
    }

    /// Queues commands already in RESP (sent by the next reply read). A large batch (a
    /// completion's transaction) is written at once from `resp`, not copied into hiredis first.
    func appendEncoded(_ resp: UnsafeRawBufferPointer) throws(RedisError) {
        let p = resp.baseAddress?.assumingMemoryBound(to: CChar.self)
        let rc = resp.count >= 16 * 1024 ? apnsw_redis_send(context, io, p, resp.count, 1) : redisAppendFormattedCommand(context, p, resp.count)
        guard rc == REDIS_OK else { throw contextError }
    }

    /// Sends every command in one write, then reads every reply: one round trip.
    public func pipeline(_ commands: [[[UInt8]]]) throws(RedisError) -> [RedisReply] {
        for args in commands {
            var packed = RedisArgs(capacity: args.reduce(0) { $0 + $1.count })
            for a in args { packed.append(bytes: a) }
            try append(packed)
        }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var raw: UnsafeMutableRawPointer?
            guard apnsw_redis_get_reply(context, io, &raw) == REDIS_OK, let raw else { throw contextError }
            let reply = RedisReply(raw.assumingMemoryBound(to: redisReply.self))
            freeReplyObject(raw)
            replies.append(try reply.checkedForReplica())
        }
        return replies
    }

    /// hiredis's error on this connection.
    var contextError: RedisError { RedisError(context: context) }
}

extension RedisReply {
    /// The reply, unless it is `-READONLY`: thrown as the connection's loss (`RedisError.server`).
    func checkedForReplica() throws(RedisError) -> RedisReply {
        if case .error(let m) = self, RedisError.isReplicaAnswer(m) { throw .server(m) }
        return self
    }

    init(_ r: UnsafeMutablePointer<redisReply>) {
        let reply = r.pointee
        switch reply.type {
        case REDIS_REPLY_STRING:
            self = .string(Array(UnsafeRawBufferPointer(start: reply.str, count: Int(reply.len))))
        case REDIS_REPLY_STATUS:
            self = .status(String(decoding: UnsafeRawBufferPointer(start: reply.str, count: Int(reply.len)), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            self = .error(String(decoding: UnsafeRawBufferPointer(start: reply.str, count: Int(reply.len)), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            self = .integer(reply.integer)
        case REDIS_REPLY_ARRAY:
            self = .array((0..<Int(reply.elements)).map { RedisReply(reply.element[$0]!) })
        default:
            self = .null
        }
    }
}
