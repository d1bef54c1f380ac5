import Foundation
import RedisClient

/// A real Sentinel group on loopback: a master, a replica, and three sentinels of Debian's
/// `redis-sentinel` watching them with a quorum of two, timed for tests (a master is down after
/// 1 s unanswered). Slow to start: make one per test class.
public final class SentinelGroup: @unchecked Sendable {
    public static let masterName = "apnsw"
    private let directory: TemporaryDirectory
    /// The two data servers by port; which is master changes with each failover.
    public private(set) var servers: [Int: ChildProcess] = [:]
    public private(set) var sentinels: [ChildProcess] = []
    public let sentinelPorts: [Int]
    public let serverPorts: [Int]

    public init() throws {
        directory = try TemporaryDirectory("apnsw-sentinel")
        serverPorts = [freePort(), freePort()]
        sentinelPorts = [freePort(), freePort(), freePort()]
        let server = try Self.binary("redis-server")
        for (i, port) in serverPorts.enumerated() {
            try startServer(server, port: port, replicaOf: i == 0 ? nil : serverPorts[0])
        }
        let master = serverPorts[0]
        guard waitUntil(timeout: 20, { (try? self.role(serverPorts[1]))?.first == "slave" && (try? self.linkUp(serverPorts[1])) == true }) else {
            throw TestSupportError("the replica on \(serverPorts[1]) did not sync with the master on \(master)")
        }
        let sentinel = try Self.binary("redis-sentinel")
        for (i, port) in sentinelPorts.enumerated() {
            let conf = directory.file("sentinel-\(i).conf")
            try """
            port \(port)
            bind 127.0.0.1
            dir \(directory.path)
            sentinel monitor \(Self.masterName) 127.0.0.1 \(master) 2
            sentinel down-after-milliseconds \(Self.masterName) 1000
            sentinel failover-timeout \(Self.masterName) 4000
            sentinel parallel-syncs \(Self.masterName) 1
            """.write(toFile: conf, atomically: true, encoding: .utf8)
            sentinels.append(try ChildProcess(sentinel, [conf], outputFile: directory.file("sentinel-\(i).log")))
        }
        // Ready once every sentinel knows the replica and the other two sentinels.
        guard
            waitUntil(
                timeout: 30,
                {
                    sentinelPorts.allSatisfy { port in
                        guard let r = try? BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 1000) else {
                            return false
                        }
                        let replicas = (try? r.command(["SENTINEL", "replicas", Self.masterName]))?.array.count ?? 0
                        let others = (try? r.command(["SENTINEL", "sentinels", Self.masterName]))?.array.count ?? 0
                        return replicas == 1 && others == 2
                    }
                })
        else { throw TestSupportError("the sentinels did not find each other and the replica in 30 s (logs in \(directory.path))") }
    }

    /// The endpoint a worker is given: the sentinels and the master's name, no address.
    public var endpoint: RedisEndpoint {
        RedisEndpoint(
            host: "", port: 0,
            sentinel: RedisSentinel(addresses: sentinelPorts.map { .init(host: "127.0.0.1", port: $0) }, masterName: Self.masterName))
    }

    /// The port of the server that says ROLE master now, if exactly one does.
    public func masterPort() -> Int? {
        let masters = serverPorts.filter { servers[$0]?.isRunning == true && (try? role($0))?.first == "master" }
        return masters.count == 1 ? masters[0] : nil
    }

    /// Asks a sentinel to fail over now, and waits until the other server is master and the
    /// sentinels name it.
    public func failOver() throws {
        let before = try currentMaster()
        let r = try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: sentinelPorts[0]), timeoutMs: 2000)
        _ = try r.command(["SENTINEL", "FAILOVER", Self.masterName])
        try waitForNewMaster(after: before)
        try waitUntilReplicated()
    }

    /// Kills the master with SIGKILL and waits until the sentinels have promoted the replica;
    /// then starts the killed server again, as the new master's replica. Returns the dead port.
    @discardableResult
    public func killMaster() throws -> Int {
        let before = try currentMaster()
        servers[before]?.signal(SIGKILL)
        _ = servers[before]?.wait(timeout: 10)
        try waitForNewMaster(after: before)
        try startServer(try Self.binary("redis-server"), port: before, replicaOf: try currentMaster())
        try waitUntilReplicated()
        return before
    }

    /// Stops the master with SIGSTOP for `ms`, long enough for the sentinels to promote the
    /// replica, then lets it run again: for a while it still says it is master, until the
    /// sentinels make it a replica. Returns once one master is left and replicated.
    public func pauseMaster(forMs ms: Int) throws {
        let before = try currentMaster()
        servers[before]?.signal(SIGSTOP)
        usleep(UInt32(ms) * 1000)
        servers[before]?.signal(SIGCONT)
        try waitForNewMaster(after: before)
        try waitUntilReplicated()
    }

    private func waitForNewMaster(after old: Int) throws {
        guard
            waitUntil(
                timeout: 30,
                {
                    guard let now = masterPort(), now != old else { return false }
                    return (try? sentinelMaster()) == now
                })
        else { throw TestSupportError("no failover from \(old) within 30 s (logs in \(directory.path))") }
    }

    /// Waits until the server that is not master replicates the master, link up: the group
    /// can take the next failover without losing what it holds.
    public func waitUntilReplicated() throws {
        guard
            waitUntil(
                timeout: 30,
                {
                    guard let master = masterPort(), let replica = serverPorts.first(where: { $0 != master }) else { return false }
                    let role = (try? role(replica)) ?? []
                    return role.first == "slave" && role.dropFirst(2).first == String(master) && (try? linkUp(replica)) == true
                })
        else { throw TestSupportError("the replica did not catch up with the master within 30 s (logs in \(directory.path))") }
    }

    /// The master's port as the first sentinel names it.
    private func sentinelMaster() throws -> Int {
        let r = try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: sentinelPorts[0]), timeoutMs: 1000)
        let parts = try r.command(["SENTINEL", "get-master-addr-by-name", Self.masterName]).array.compactMap(\.text)
        guard parts.count == 2, let port = Int(parts[1]) else { throw TestSupportError("the sentinel names no master") }
        return port
    }

    private func currentMaster() throws -> Int {
        guard let port = masterPort() else { throw TestSupportError("no single master among \(serverPorts)") }
        return port
    }

    private func role(_ port: Int) throws -> [String] {
        try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 1000).command(["ROLE"]).array.compactMap(\.text)
    }

    private func linkUp(_ port: Int) throws -> Bool {
        let info = try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 1000).command(["INFO", "replication"])
        return info.text?.contains("master_link_status:up") == true
    }

    private func startServer(_ binary: String, port: Int, replicaOf master: Int?) throws {
        let replica = master.map { ["--replicaof", "127.0.0.1", String($0)] } ?? []
        servers[port] = try ChildProcess(
            binary,
            [
                "--port", String(port), "--bind", "127.0.0.1", "--dir", directory.path, "--dbfilename", "dump-\(port).rdb", "--save", "",
                "--appendonly", "no",
            ]
                + replica,
            outputFile: directory.file("redis-\(port).log"))
        guard waitUntil(timeout: 10, { (try? role(port)) != nil }) else { throw TestSupportError("redis-server on \(port) did not start") }
    }

    private static func binary(_ name: String) throws -> String {
        guard let path = ["/usr/bin/", "/usr/local/bin/"].map({ $0 + name }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw TestSupportError("\(name) is not installed: scripts/install-deps test installs it")
        }
        return path
    }

    /// Stops every process of the group.
    public func stop() {
        for p in sentinels + Array(servers.values) where p.isRunning { p.signal(SIGKILL) }
    }

    deinit { stop() }
}
