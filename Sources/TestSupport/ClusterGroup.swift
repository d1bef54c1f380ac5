import Foundation
import RedisClient

/// A real Redis Cluster on loopback: six of Debian's `redis-server` made into three masters
/// with a replica each by `redis-cli --cluster create`, timed for tests. Slow to start: make
/// one per test class.
public final class ClusterGroup: @unchecked Sendable {
    private let directory: TemporaryDirectory
    public let ports: [Int]
    private var servers: [Int: ChildProcess] = [:]

    public init() throws {
        directory = try TemporaryDirectory("apnsw-cluster")
        ports = (0..<6).map { _ in freePort() }
        for port in ports {
            busPorts[port] = freePort()
            try startServer(port)
        }
        for port in ports {
            guard waitUntil(timeout: 10, { (try? self.node(port).command(["PING"])) != nil }) else {
                let log = (try? String(contentsOfFile: directory.file("redis-\(port).log"), encoding: .utf8)) ?? ""
                throw TestSupportError("redis-server on \(port) did not start: \(log.suffix(1500))")
            }
        }
        try run(["--cluster", "create"] + ports.map { "127.0.0.1:\($0)" } + ["--cluster-replicas", "1", "--cluster-yes"], what: "create")
        try waitUntilStable()
    }

    private var busPorts: [Int: Int] = [:]

    private func startServer(_ port: Int) throws {
        servers[port] = try ChildProcess(
            try Self.binary("redis-server"),
            [
                // A bus port of its own: the default (port + 10000) may be taken, or past 65535.
                "--port", String(port), "--cluster-port", String(busPorts[port]!), "--bind", "127.0.0.1", "--dir", directory.path,
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes-\(port).conf", "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
                "--dbfilename", "dump-\(port).rdb",
            ],
            outputFile: directory.file("redis-\(port)-\(servers[port] == nil ? 0 : 1).log"))
    }

    /// Kills the master of `slot` with SIGKILL, waits until its replica took over, then starts
    /// it again (it rejoins as the new master's replica). Returns the new master's port.
    @discardableResult
    public func killMaster(ofSlot slot: Int) throws -> Int {
        let owners = try owners(ofSlot: slot)
        guard owners.count >= 2 else { throw TestSupportError("slot \(slot)'s master has no replica") }
        let (old, replica) = (owners[0], owners[1])
        servers[old]?.signal(SIGKILL)
        _ = servers[old]?.wait(timeout: 10)
        let alive = ports.filter { $0 != old }
        guard waitUntil(timeout: 30, { alive.allSatisfy { (try? self.master(ofSlot: slot, askingNode: $0)) == replica } }) else {
            throw TestSupportError("the replica \(replica) did not take over slot \(slot) from \(old) in 30 s")
        }
        try startServer(old)
        guard waitUntil(timeout: 10, { (try? self.node(old).command(["PING"])) != nil }) else { throw TestSupportError("\(old) did not restart") }
        try waitUntilStable()
        return replica
    }

    /// The endpoint a worker is given: the seed nodes, no address.
    public var endpoint: RedisEndpoint {
        var e = RedisEndpoint(host: "", port: 0)
        e.cluster = RedisCluster(seeds: ports.map { .init(host: "127.0.0.1", port: $0) })
        return e
    }

    /// The port of the master that owns `slot`, as `port`'s map says.
    public func master(ofSlot slot: Int, askingNode port: Int? = nil) throws -> Int {
        try owners(ofSlot: slot, askingNode: port).first ?? -1
    }

    /// Each slot range's master, as `port`'s map says, in slot order.
    private func masters(askingNode port: Int) throws -> [[Int64]] {
        try node(port).command(["CLUSTER", "SLOTS"]).array.compactMap { range -> [Int64]? in
            let p = range.array
            guard p.count >= 3, let low = p[0].integer, let high = p[1].integer, let master = p[2].array.dropFirst().first?.integer else {
                return nil
            }
            return [low, high, master]
        }.sorted { $0[0] < $1[0] }
    }

    /// The master of `slot`, then its replicas, as `port`'s map says.
    private func owners(ofSlot slot: Int, askingNode port: Int? = nil) throws -> [Int] {
        let map = try node(port ?? ports[0]).command(["CLUSTER", "SLOTS"])
        for range in map.array {
            let p = range.array
            guard p.count >= 3, let low = p[0].integer, let high = p[1].integer, (low...high).contains(Int64(slot)) else { continue }
            return p.dropFirst(2).compactMap { $0.array.count >= 2 ? $0.array[1].integer.map(Int.init) : nil }
        }
        throw TestSupportError("no node owns slot \(slot)")
    }

    /// Fails the master of `slot` over to its replica (`CLUSTER FAILOVER`, which loses nothing)
    /// and waits until every node's map names the replica. Returns the new master's port.
    @discardableResult
    public func failOver(slot: Int) throws -> Int {
        let owners = try owners(ofSlot: slot)
        guard owners.count >= 2 else { throw TestSupportError("slot \(slot)'s master has no replica") }
        let (old, replica) = (owners[0], owners[1])
        if case .error(let m) = try node(replica).command(["CLUSTER", "FAILOVER"]) { throw TestSupportError("CLUSTER FAILOVER: \(m)") }
        guard waitUntil(timeout: 30, { self.ports.allSatisfy { (try? self.master(ofSlot: slot, askingNode: $0)) == replica } }) else {
            throw TestSupportError("the failover of slot \(slot) from \(old) to \(replica) did not finish in 30 s")
        }
        try waitUntilStable()
        return replica
    }

    /// Moves the `count` lowest slots of `port`'s master to another master with
    /// `redis-cli --cluster reshard`, keys and all. Returns the port they went to.
    @discardableResult
    public func reshard(count: Int, from port: Int) throws -> Int {
        guard let target = try masterPorts().first(where: { $0 != port }) else { throw TestSupportError("no other master") }
        let (source, destination) = (try nodeID(port), try nodeID(target))
        try run(
            [
                "--cluster", "reshard", "127.0.0.1:\(port)", "--cluster-from", source, "--cluster-to", destination, "--cluster-slots",
                String(count), "--cluster-yes",
            ], what: "reshard")
        try waitUntilStable()
        return target
    }

    /// Marks `slot` as moving from its master to another (`CLUSTER SETSLOT … MIGRATING` and
    /// `IMPORTING`) without moving a key, as a reshard does before it moves them: to `target`,
    /// or to the first other master. Returns both ports.
    public func beginMigration(slot: Int, to target: Int? = nil) throws -> (source: Int, target: Int) {
        let source = try master(ofSlot: slot)
        guard let target = try target ?? masterPorts().first(where: { $0 != source }) else { throw TestSupportError("no other master") }
        for (port, state, other) in [(target, "IMPORTING", source), (source, "MIGRATING", target)] {
            if case .error(let m) = try node(port).command(["CLUSTER", "SETSLOT", String(slot), state, try nodeID(other)]) {
                throw TestSupportError("CLUSTER SETSLOT \(state): \(m)")
            }
        }
        return (source, target)
    }

    /// The masters' ports.
    public func masterPorts() throws -> Set<Int> { Set(try (0..<3).map { try master(ofSlot: $0 * 5461 + 1) }) }

    /// Makes the master on `port` answer `CLUSTERDOWN` to every command, as a node that lost
    /// a slot's assignment does, while the others go on: it forgets one of its own slots in its
    /// own map (the others still map the slot to it). `mendClusterDown` undoes it.
    public func makeClusterDown(port: Int) throws -> Int {
        guard let own = try masters(askingNode: port).first(where: { $0[2] == Int64(port) }) else { throw TestSupportError("\(port) owns no slot") }
        let slot = Int(own[1])
        if case .error(let m) = try node(port).command(["CLUSTER", "DELSLOTS", String(slot)]) { throw TestSupportError("DELSLOTS: \(m)") }
        guard waitUntil(timeout: 10, { (try? self.node(port).command(["CLUSTER", "INFO"]).text)??.contains("cluster_state:fail") == true }) else {
            throw TestSupportError("\(port) did not say cluster_state:fail")
        }
        return slot
    }

    /// Gives back the slot `makeClusterDown` took, and waits until the node says ok.
    public func mendClusterDown(port: Int, slot: Int) throws {
        if case .error(let m) = try node(port).command(["CLUSTER", "ADDSLOTS", String(slot)]) { throw TestSupportError("ADDSLOTS: \(m)") }
        try waitUntilStable()
    }

    /// Makes the node on `port` leave every client's command unanswered for `ms` (`CLIENT PAUSE
    /// … ALL`, which holds back even CLIENT UNPAUSE): a node that hangs. Its cluster bus goes
    /// on, so no failover starts.
    public func pause(port: Int, ms: Int) throws { _ = try node(port).command(["CLIENT", "PAUSE", String(ms), "ALL"]) }

    /// Moves `keys` of a slot being migrated (`beginMigration`) to the target, as a reshard
    /// does one key at a time: the slot is then half-moved.
    public func migrate(keys: [String], _ ports: (source: Int, target: Int)) throws {
        for key in keys {
            if case .error(let m) = try node(ports.source).command(["MIGRATE", "127.0.0.1", String(ports.target), key, "0", "5000"]) {
                throw TestSupportError("MIGRATE \(key): \(m)")
            }
        }
    }

    /// Moves every key of `slot` left on the source to the target: each command on the slot's
    /// keys is then redirected there by `-ASK`.
    public func migrateAll(slot: Int, _ ports: (source: Int, target: Int)) throws {
        while true {
            let keys = try node(ports.source).command(["CLUSTER", "GETKEYSINSLOT", String(slot), "100"]).array.compactMap(\.text)
            if keys.isEmpty { return }
            try migrate(keys: keys, ports)
        }
    }

    /// Ends a migration begun by `beginMigration` the way a reshard does: the slot's other keys
    /// move, then the slot, on every master.
    public func finishMigration(slot: Int, _ ports: (source: Int, target: Int)) throws {
        try migrateAll(slot: slot, ports)
        let target = try nodeID(ports.target)
        let masters = try masterPorts()
        for port in [ports.target, ports.source] + masters.subtracting([ports.target, ports.source]) {
            if case .error(let m) = try node(port).command(["CLUSTER", "SETSLOT", String(slot), "NODE", target]) {
                throw TestSupportError("CLUSTER SETSLOT NODE on \(port): \(m)")
            }
        }
        try waitUntilStable()
    }

    /// Ends a migration begun by `beginMigration`: the slot stays where it was.
    public func cancelMigration(slot: Int, _ ports: (source: Int, target: Int)) throws {
        for port in [ports.source, ports.target] { _ = try node(port).command(["CLUSTER", "SETSLOT", String(slot), "STABLE"]) }
    }

    /// A plain connection to one node.
    public func connect(port: Int) throws -> BlockingRedisConnection { try node(port) }

    private func nodeID(_ port: Int) throws -> String {
        guard let id = try node(port).command(["CLUSTER", "MYID"]).text else { throw TestSupportError("no id for \(port)") }
        return id
    }

    /// Every node says the cluster is ok, all agree on who owns slot 0, 5461 and 10923, and
    /// each of those masters has a replica in sync: the cluster can take the next failover.
    private func waitUntilStable() throws {
        let ok = waitUntil(timeout: 30) {
            let replicated = [0, 5461, 10923].allSatisfy { slot in
                guard let owners = try? self.owners(ofSlot: slot), owners.count >= 2 else { return false }
                let info = (try? self.node(owners[1]).command(["INFO", "replication"]).text) ?? nil
                return info?.contains("master_link_status:up") == true
            }
            // Every node's whole map the same (slot ranges and their masters), not only three slots':
            // a reshard moves slots from anywhere in a master's ranges.
            let maps = self.ports.map { port in (try? self.masters(askingNode: port)) ?? [] }
            return replicated && !maps[0].isEmpty && maps.allSatisfy { $0 == maps[0] }
                && self.ports.allSatisfy { port in
                    guard let info = try? self.node(port).command(["CLUSTER", "INFO"]).text, info.contains("cluster_state:ok") else { return false }
                    return true
                }
        }
        guard ok else { throw TestSupportError("the cluster did not settle within 30 s (logs in \(directory.path))") }
    }

    private func run(_ args: [String], what: String) throws {
        let cli = try ChildProcess(
            try Self.binary("redis-cli"), args, outputFile: directory.file("cli-\(what)-\(UInt32.random(in: 0...UInt32.max)).log"))
        guard cli.wait(timeout: 120) == 0 else { throw TestSupportError("redis-cli --cluster \(what) failed: \(cli.output.suffix(2000))") }
    }

    private func node(_ port: Int) throws -> BlockingRedisConnection {
        try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 2000)
    }

    private static func binary(_ name: String) throws -> String {
        guard let path = ["/usr/bin/", "/usr/local/bin/"].map({ $0 + name }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw TestSupportError("\(name) is not installed: scripts/install-deps test installs it")
        }
        return path
    }

    /// Stops every node.
    public func stop() {
        for p in servers.values where p.isRunning { p.signal(SIGKILL) }
    }

    deinit { stop() }
}
