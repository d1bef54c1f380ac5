/// Redis Sentinel: the sentinels to ask, in order, which server is the master of `masterName`,
/// with the sentinels' own credentials (they are often not the data servers').
public struct RedisSentinel: Sendable, Equatable {
    public struct Address: Sendable, Equatable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        /// "host:port", "[v6]:port", or "host" (port 26379, Sentinel's own).
        public init?(parsing text: String) {
            var host = Substring(text), port = 26379
            if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
                host = text[text.index(after: text.startIndex)..<close]
                let rest = text[text.index(after: close)...]
                if !rest.isEmpty {
                    guard rest.hasPrefix(":"), let p = Int(rest.dropFirst()) else { return nil }
                    port = p
                }
            } else if let colon = text.lastIndex(of: ":") {
                guard let p = Int(text[text.index(after: colon)...]) else { return nil }
                host = text[..<colon]
                port = p
            }
            guard !host.isEmpty, (1...65535).contains(port) else { return nil }
            self.init(host: String(host), port: port)
        }
    }

    public var addresses: [Address]
    public var masterName: String
    public var username: String?
    public var password: String?

    public init(addresses: [Address], masterName: String, username: String? = nil, password: String? = nil) {
        self.addresses = addresses
        self.masterName = masterName
        self.username = username
        self.password = password
    }
}

extension RedisEndpoint {
    /// Where to connect now: this endpoint; on a cluster, the master of its slot; or, behind
    /// Sentinel, the master the first sentinel that answers names (asked on every connect, so
    /// that a reconnect follows a failover). The master is then checked with `ROLE` when the
    /// connection opens.
    public func master(timeoutMs: Int) throws(RedisError) -> RedisEndpoint {
        if let cluster { return try clusterNode(cluster, timeoutMs: timeoutMs) }
        guard let sentinel else { return self }
        return try Self.askInTurn(
            sentinel.addresses, timeoutMs: timeoutMs, command: ["SENTINEL", "get-master-addr-by-name", sentinel.masterName],
            over: { sentinelEndpoint($0, sentinel) },
            answer: { reply, address in
                let parts = reply.array.compactMap(\.text)
                guard parts.count == 2, let port = Int(parts[1]) else {
                    return .failure(Unanswered("sentinel \(address) does not know master \"\(sentinel.masterName)\" (\(reply))"))
                }
                var found = self
                found.sentinel = nil
                found.host = parts[0]
                found.port = port
                found.mustBeMaster = true
                found.foundBy = "\(sentinel.masterName) via sentinel \(address)"
                return .success(found)
            }, none: "no sentinel named the master of \"\(sentinel.masterName)\"")
    }

    /// What the sentinels say of the master now (`SENTINEL MASTER`): its address, and whether a
    /// failover of it is under way (the flag shows before the sentinels name the new master).
    public func sentinelView(timeoutMs: Int) throws(RedisError) -> (address: String, failingOver: Bool) {
        guard let sentinel else { throw .io("\(self) is not behind Sentinel") }
        var failingOver = false
        let found = try Self.askInTurn(
            sentinel.addresses, timeoutMs: timeoutMs, command: ["SENTINEL", "MASTER", sentinel.masterName],
            over: { sentinelEndpoint($0, sentinel) },
            answer: { reply, address in
                let items = reply.array.compactMap(\.text)
                var fields: [String: String] = [:]
                for i in stride(from: 0, to: items.count - 1, by: 2) { fields[items[i]] = items[i + 1] }
                guard let ip = fields["ip"], let port = fields["port"].flatMap({ Int($0) }) else {
                    return .failure(Unanswered("sentinel \(address) does not know master \"\(sentinel.masterName)\" (\(reply))"))
                }
                failingOver = fields["flags"]?.contains("failover") == true
                var named = self
                named.sentinel = nil
                named.host = ip
                named.port = port
                return .success(named)
            }, none: "no sentinel named the master of \"\(sentinel.masterName)\"")
        return ("\(found.host):\(found.port)", failingOver)
    }

    /// How one sentinel is reached: its address, the sentinels' own credentials, this endpoint's TLS.
    private func sentinelEndpoint(_ address: RedisSentinel.Address, _ sentinel: RedisSentinel) -> RedisEndpoint {
        var asking = RedisEndpoint(host: address.host, port: address.port, password: sentinel.password, username: sentinel.username, tls: tls)
        asking.tls?.serverName = tls?.serverName ?? address.host
        return asking
    }

    /// Why one of the nodes asked (`askInTurn`) named no server.
    struct Unanswered: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    /// Asks `nodes` in turn (each over the endpoint `over` makes of it) with `command`, until
    /// `answer` names a server in one's reply; else throws `none` with every node's failure.
    static func askInTurn(
        _ nodes: [RedisSentinel.Address], timeoutMs: Int, command: [String], over: (RedisSentinel.Address) -> RedisEndpoint,
        answer: (RedisReply, RedisSentinel.Address) -> Result<RedisEndpoint, Unanswered>, none: String
    ) throws(RedisError) -> RedisEndpoint {
        var failures: [String] = []
        for node in nodes {
            do {
                let reply = try BlockingRedisConnection(over(node), timeoutMs: min(timeoutMs, 2000)).command(command)
                switch answer(reply, node) {
                case .success(let found): return found
                case .failure(let why): failures.append(why.message)
                }
            } catch {
                failures.append("\(node): \(error.message)")
            }
        }
        throw .io(none + ": " + failures.joined(separator: "; "))
    }
}
