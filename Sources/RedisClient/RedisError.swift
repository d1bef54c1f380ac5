internal import CHiredis

/// Why a Redis call failed: the one error of the Redis edge, with hiredis's errors funnelled in.
/// Every code but `server` means the connection is dead and must be replaced.
public struct RedisError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable, Equatable {
        /// The socket failed (or hiredis ran out of memory).
        case io
        /// The server closed the connection.
        case eof
        /// What came back was not RESP.
        case `protocol`
        /// No reply in time.
        case timeout
        /// Redis answered with an error.
        case server
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func io(_ message: String) -> RedisError { RedisError(.io, message) }
    /// Redis's answer was an error. `-READONLY` means the server is a replica now (a failover
    /// made it one), and a cluster's redirections that the slot is served elsewhere, or is
    /// moving: the connection is as good as lost, and a new one finds the master.
    public static func server(_ message: String) -> RedisError {
        guard let why = redirection(message) else { return RedisError(.server, message) }
        return RedisError(.io, message + " (\(why): reconnecting)")
    }

    /// Why an error answer means the connection must go elsewhere, if it does.
    static func redirection(_ message: String) -> String? {
        if message.hasPrefix("READONLY") { return "a failover made it a replica" }
        if message.hasPrefix("MOVED ") { return "the slot has moved to another node" }
        if message.hasPrefix("ASK ") || message.hasPrefix("TRYAGAIN") { return "the slot is moving to another node" }
        if message.hasPrefix("CLUSTERDOWN") { return "the cluster is down" }
        return nil
    }

    static func isReplicaAnswer(_ message: String) -> Bool { redirection(message) != nil }
    public static func timeout(_ message: String) -> RedisError { RedisError(.timeout, message) }

    /// The connection is gone: replace it.
    public var isConnectionLost: Bool { code != .server }

    /// What to fix when retrying will not mend this failure: a certificate the TLS check
    /// refuses, a refused password, a missing ACL right, a full Redis. Nil for a failure that
    /// may pass (a refused connect, a timeout, a failover).
    public var mistake: String? {
        let m = message
        if m.contains("certificate verification") || m.contains("wrong version number") || m.contains("certificate required")
            || m.contains("unknown ca") || m.contains("bad certificate")
        {
            return "check redis.tls (ca_file, server_name, certificate_file, key_file) against the server's certificate and port"
        }
        if m.contains("authentication to") || m.contains("WRONGPASS") || m.contains("NOAUTH") || m.contains("invalid password") {
            return "check redis.username and redis.password (or password_file)"
        }
        if m.contains("NOPERM") {
            return "give the ACL user the rights of docs/redis-contract.md's ACL SETUSER line (\(Self.missingRight(m)))"
        }
        if m.hasPrefix("OOM") || m.contains(": OOM ") || m.contains("OOM command not allowed") {
            return "Redis is full (maxmemory): jobs stay queued; free memory or raise maxmemory"
        }
        return nil
    }

    /// The right a NOPERM names: `+cmd`, or the key pattern.
    static func missingRight(_ message: String) -> String {
        // "NOPERM User u has no permissions to run the 'xadd' command"
        let parts = message.split(separator: "'", omittingEmptySubsequences: false)
        if message.contains("to run the"), parts.count >= 3 { return "+" + parts[1].lowercased() }
        return message.contains("key") ? "~apns:*" : "see ACL LOG"
    }

    public var description: String { code == .server ? "redis: \(message)" : "redis connection: \(message)" }

    /// hiredis's error on a context (its `err` and `errstr`).
    init(context: UnsafeMutablePointer<redisContext>) {
        let err = apnsw_redis_context_error(context)
        let text = err == 0 ? "no reply" : String(cString: apnsw_redis_context_errstr(context))
        switch err {
        case REDIS_ERR_EOF: self.init(.eof, text)
        case REDIS_ERR_PROTOCOL: self.init(.protocol, text)
        default: self.init(.io, text)
        }
    }

    /// The same error, naming the server it came from.
    func at(_ endpoint: RedisEndpoint) -> RedisError { RedisError(code, "\(endpoint): \(message)") }
}
