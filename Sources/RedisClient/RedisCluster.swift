/// Redis Cluster: the seed nodes to ask for the slot map. A connection is made for one key's
/// slot (`RedisEndpoint.routeKey`) and goes to the master that owns it; a redirection
/// (`-MOVED`, `-ASK`, `-TRYAGAIN`) drops it, and the next connect reads the map again.
public struct RedisCluster: Sendable, Equatable {
    public var seeds: [RedisSentinel.Address]

    public init(seeds: [RedisSentinel.Address]) { self.seeds = seeds }

    public static let slots = 16384

    /// The slot of `key`: CRC16 (XMODEM) of its hash tag (the text inside its first `{…}`, if
    /// not empty), or of the whole key, modulo 16384.
    public static func slot(ofKey key: String) -> Int {
        var bytes = Array(key.utf8)
        if let open = bytes.firstIndex(of: UInt8(ascii: "{")),
            let close = bytes[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            bytes = Array(bytes[(open + 1)..<close])
        }
        return Int(crc16(bytes)) % slots
    }

    static func crc16(_ bytes: [UInt8]) -> UInt16 {
        var crc: UInt16 = 0
        for b in bytes {
            crc ^= UInt16(b) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return crc
    }

    /// The master of `slot` in a `CLUSTER SLOTS` answer: its host (empty: the node asked) and port.
    static func owner(of slot: Int, in reply: RedisReply) -> (host: String, port: Int)? {
        for range in reply.array {
            let parts = range.array
            guard parts.count >= 3, let low = parts[0].integer, let high = parts[1].integer, (low...high).contains(Int64(slot)) else {
                continue
            }
            let node = parts[2].array
            guard node.count >= 2, let host = node[0].text, let port = node[1].integer else { return nil }
            return (host, Int(port))
        }
        return nil
    }
}

extension RedisEndpoint {
    /// This endpoint for commands on `key`'s slot: on a cluster, the connection goes to its owner.
    public func routed(toKey key: String) -> RedisEndpoint {
        var routed = self
        routed.routeKey = key
        return routed
    }

    /// The master that owns the slot of `routeKey`, as the first seed that answers maps it
    /// (asked on every connect, so that a reconnect follows a failover or a reshard). It is
    /// checked with `ROLE` when the connection opens.
    func clusterNode(_ cluster: RedisCluster, timeoutMs: Int) throws(RedisError) -> RedisEndpoint {
        let slot = RedisCluster.slot(ofKey: routeKey ?? "")
        var asking = self
        asking.cluster = nil
        return try Self.askInTurn(
            cluster.seeds, timeoutMs: timeoutMs, command: ["CLUSTER", "SLOTS"],
            over: { seed in
                asking.host = seed.host
                asking.port = seed.port
                asking.tls?.serverName = tls?.serverName ?? seed.host
                return asking
            },
            answer: { reply, seed in
                if case .error(let m) = reply { return .failure(Unanswered("\(seed): \(m)")) }
                guard let (host, port) = RedisCluster.owner(of: slot, in: reply) else {
                    return .failure(Unanswered("\(seed) maps no master to slot \(slot)"))
                }
                var found = asking
                found.host = host.isEmpty || host == "?" ? seed.host : host
                found.port = port
                found.tls?.serverName = tls?.serverName ?? found.host
                found.mustBeMaster = true
                found.foundBy = "slot \(slot) by cluster node \(seed)"
                return .success(found)
            }, none: "no cluster node named the master of slot \(slot)")
    }
}

extension BlockingRedisConnection {
    /// `-ASK slot host:port`: the slot is moving, and the keys are already at that node. The
    /// command goes there once, after ASKING (with the script loaded there first, if need be).
    func askOnce(_ answer: String, _ args: RedisArgs) throws(RedisError) -> RedisReply {
        guard let redirect = AskRedirect(answer, commands: [args], skipping: 0) else { throw .server(answer) }
        do throws(RedisError) {
            let node = try BlockingRedisConnection(redirect.endpoint(from: endpoint), timeoutMs: timeoutMs)
            func asked() throws(RedisError) -> RedisReply {
                _ = try node.command(["ASKING"])
                return try node.command(args)
            }
            let reply = try node.sendLoading(running, send: asked, error: { if case .error(let m) = $0 { m } else { nil } })
            return try reply.checkedForReplica()
        } catch {
            throw redirect.named(error)
        }
    }
}

/// A command a node answered `-ASK slot host:port`: the slot is moving, and the command's keys
/// are at that node already. It goes there once, right after ASKING; the map stays as it is.
public struct AskRedirect {
    public let slot: String
    public let node: RedisSentinel.Address
    /// The group again, ASKING just before the command it redirects (after a SCRIPT LOAD).
    public let commands: [RedisArgs]
    public let skipping: Int

    init?(_ answer: String, commands: [RedisArgs], skipping: Int) {
        let parts = answer.split(separator: " ")
        guard parts.count == 3, parts[0] == "ASK", let node = RedisSentinel.Address(parsing: String(parts[2])) else { return nil }
        slot = String(parts[1])
        self.node = node
        self.commands = commands.dropLast() + [RedisArgs(["ASKING"]), commands[commands.count - 1]]
        self.skipping = skipping + 1
    }

    /// An error of the node named, saying which slot it imports: the key set waits for it.
    public func named(_ error: RedisError) -> RedisError {
        guard !error.message.contains("importing slot") else { return error }
        return RedisError(error.code == .server ? .io : error.code, "\(node), importing slot \(slot) (the slot is moving): \(error.message)")
    }

    /// The endpoint of the node named, as `endpoint` reaches its nodes.
    public func endpoint(from endpoint: RedisEndpoint) -> RedisEndpoint {
        var target = endpoint
        target.cluster = nil
        target.host = node.host
        target.port = node.port
        target.tls?.serverName = endpoint.tls?.serverName ?? node.host
        target.foundBy = "an ASK redirection for slot \(slot)"
        return target
    }
}

extension RedisArgs {
    /// Whether this command belongs to a transaction, which holds on its own connection.
    var isTransactional: Bool {
        guard count > 0 else { return false }
        let word = argument(0)
        return word.elementsEqual("WATCH".utf8) || word.elementsEqual("MULTI".utf8) || word.elementsEqual("EXEC".utf8)
    }
}
