import CHiredis

/// A Lua script run by EVALSHA, loaded on first use and again after NOSCRIPT (a restarted Redis).
public struct RedisScript: Sendable {
    public let source: String
    public let sha1: String

    public init(_ source: String) {
        self.source = source
        sha1 = SHA1.hex(Array(source.utf8))
    }
}

extension RedisConnection {
    /// Runs `script` atomically with `keys` and `args`; server errors are thrown.
    public func run(_ script: RedisScript, keys: [String], args: [[UInt8]]) throws(RedisError) -> RedisReply {
        var argv: [[UInt8]] = [Array("EVALSHA".utf8), Array(script.sha1.utf8), Array(String(keys.count).utf8)]
        argv.append(contentsOf: keys.map { Array($0.utf8) })
        argv.append(contentsOf: args)
        var reply = try command(bytes: argv)
        if case .error(let message) = reply, message.hasPrefix("NOSCRIPT") {
            argv[0] = Array("EVAL".utf8)
            argv[1] = Array(script.source.utf8)
            reply = try command(bytes: argv)
        }
        if case .error(let message) = reply { throw .server(message) }
        return reply
    }
}
