internal import CHiredis
internal import CHiredisIO

/// A Lua script run by EVALSHA, loaded on first use and again after NOSCRIPT (a restarted Redis).
public struct RedisScript: Sendable {
    public let source: String
    public let sha1: String

    public init(_ source: String) {
        self.source = source
        sha1 = SHA1.hex(Array(source.utf8))
    }

    /// The one test for NOSCRIPT: the server has not this script (restarted, or another node).
    public static func isMissing(_ error: String) -> Bool { error.hasPrefix("NOSCRIPT") }

    /// SCRIPT LOAD of this script.
    public var load: RedisArgs { RedisArgs(["SCRIPT", "LOAD", source]) }

    /// The event loops' NOSCRIPT path: after `error`, `commands` again with this script loaded
    /// ahead of them in the same write (skip the first reply). Any other error is thrown.
    public func reloading(after error: String, _ commands: [RedisArgs]) throws(RedisError) -> [RedisArgs] {
        guard Self.isMissing(error) else { throw .server(error) }
        return [load] + commands
    }
}

extension BlockingRedisConnection {
    /// Runs `script` atomically with `keys` and `args`; server errors are thrown.
    public func run(_ script: RedisScript, keys: [String], args: [[UInt8]]) throws(RedisError) -> RedisReply {
        var packed = RedisArgs(script: script, keys: keys, capacity: args.reduce(256) { $0 + $1.count })
        for a in args { packed.append(bytes: a) }
        return try run(script, packed)
    }
}
