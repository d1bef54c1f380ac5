import Foundation
import QueueContract
import RedisClient
import TestSupport
import XCTest

/// Redis Cluster (issue 30, item 4): three masters with a replica each, of Debian's
/// redis-server on loopback, made by `redis-cli --cluster create` once for the class. A queue
/// of three shards spreads over the masters; a worker sends each shard's scripts to the node
/// that owns its slot, and rides out a failover and a reshard of a shard's slot in mid-run.
/// Each run counts the jobs lost (no final result) and those with more than one.
final class ClusterTests: XCTestCase {
    nonisolated(unsafe) private static var group: ClusterGroup?
    nonisolated(unsafe) private static var startError: Error?

    override class func setUp() {
        super.setUp()
        do { group = try ClusterGroup() } catch { startError = error }
    }

    override class func tearDown() {
        group?.stop()
        super.tearDown()
    }

    func cluster() throws -> ClusterGroup {
        if let error = Self.startError { throw error }
        return try XCTUnwrap(Self.group)
    }

    /// A queue name whose shard 0 has one of the 100 lowest slots: a reshard of the 100 lowest
    /// slots of their master moves it.
    private func queueWithLowShard() -> String {
        while true {
            let name = "c\(UInt32.random(in: 0...UInt32.max))"
            if RedisCluster.slot(ofKey: QueueKeys(queue: name, shard: 0).jobs) < 100 { return name }
        }
    }

    private func count(_ f: WorkerFixture, jobs: Int) throws -> (lost: Int, twice: Int) {
        var perJob: [String: Int] = [:]
        for r in try f.records(in: \.results) { perJob[r["job_id"] as? String ?? "?", default: 0] += 1 }
        let lost = (0..<jobs).filter { perJob["job-\($0)"] == nil }.count
        return (lost, perJob.values.filter { $0 > 1 }.count)
    }

    private func run(
        _ name: String, disturb: (ClusterGroup, WorkerFixture) throws -> Void
    ) throws -> (
        lost: Int, twice: Int, redirections: [String: Int]
    ) {
        let group = try cluster()
        let redis = try TestRedis(serving: group.endpoint)
        // 2 connections x 5 streams, each answer 10 ms late: about 1,000 jobs a second.
        let f = try WorkerFixture(redis: redis, queue: queueWithLowShard(), settings: ["shards": 3, "connections": 2, "streams": 5]) {
            $0.faults.tokens = [.init(tokenPrefix: "0", delayMs: 10)]
        }
        let slots = Set(try f.keySets.map { try group.master(ofSlot: RedisCluster.slot(ofKey: $0.jobs)) })
        XCTAssertGreaterThan(slots.count, 1, "the shards spread over more than one master")
        let jobs = 4000
        func push(_ range: Range<Int>) throws {
            for (n, set) in f.keySets.dropFirst().enumerated() {
                try f.enqueue(stride(from: range.lowerBound + n, to: range.upperBound, by: 3).map { WorkerFixture.job($0) }, to: set.jobs)
            }
        }
        try push(0..<jobs / 2)
        let w = try f.startWorker("w-\(name)")
        XCTAssertTrue(waitUntil(timeout: 30) { ((try? f.finalOutcomes()) ?? 0) >= 600 }, w.output)
        try disturb(group, f)
        try push(jobs / 2..<jobs)
        XCTAssertTrue(
            waitUntil(timeout: 60) { ((try? self.count(f, jobs: jobs).lost) ?? jobs) == 0 }, "every job has a result: \(w.output.suffix(3000))")
        // apnsctl reads the queue across the cluster's nodes.
        let ctl = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "--json", "stats"], outputFile: f.directory.file("ctl.out"))
        XCTAssertEqual(ctl.wait(timeout: 30), 0, ctl.output)
        let stats = try JSONSerialization.jsonObject(with: Data(ctl.output.utf8)) as? [String: Any]
        XCTAssertEqual((stats?["counters"] as? [String: Any])?["delivered"] as? Int, try f.stats()["delivered"], ctl.output)
        XCTAssertEqual(stats?["depth"] as? Int, 0, ctl.output)
        w.signal(SIGTERM)
        XCTAssertEqual(w.wait(timeout: 30), 0, w.output)
        let (lost, twice) = try count(f, jobs: jobs)
        let lines = w.output.split(separator: "\n")
        let redirections = Dictionary(
            uniqueKeysWithValues: ["MOVED", "ASK", "TRYAGAIN", "READONLY"].map { r in
                (r, lines.filter { $0.contains("\"error\":\"redis: \(r)") || $0.contains(": \(r) ") }.count)
            })
        print(
            "Cluster \(name): \(jobs) jobs, \(lost) lost, \(twice) with more than one result, \(try f.acceptedTwice()) sent twice; "
                + "may_duplicate \(try f.stats()["may_duplicate"] ?? 0); redirections followed: \(redirections)")
        return (lost, twice, redirections)
    }

    func testAWorkerRidesOutAFailoverOfAShardsMaster() throws {
        let r = try run("failover") { group, f in
            try group.failOver(slot: RedisCluster.slot(ofKey: f.keySets[2].jobs))
        }
        XCTAssertEqual(r.lost, 0)
        XCTAssertEqual(r.twice, 0)
        XCTAssertGreaterThan(r.redirections.values.reduce(0, +), 0, "the worker was sent to the new master")
    }

    /// A shard's master killed with SIGKILL in mid-run: its replica takes over (an unplanned
    /// failover, with asynchronous replication's window); nothing is lost or recorded twice.
    func testAWorkerRidesOutAShardsMasterKilledWithSIGKILL() throws {
        let r = try run("sigkill") { group, f in
            try group.killMaster(ofSlot: RedisCluster.slot(ofKey: f.keySets[2].jobs))
        }
        XCTAssertEqual(r.lost, 0)
        XCTAssertEqual(r.twice, 0)
    }

    func testAWorkerRidesOutAReshardOfAShardsSlot() throws {
        let r = try run("reshard") { group, f in
            let slot = RedisCluster.slot(ofKey: f.keySets[1].jobs)
            let before = try group.master(ofSlot: slot)
            let after = try group.reshard(count: 100, from: before)
            XCTAssertEqual(try group.master(ofSlot: slot), after, "the shard's slot moved")
        }
        XCTAssertEqual(r.lost, 0)
        XCTAssertEqual(r.twice, 0)
        XCTAssertGreaterThan(r.redirections["MOVED", default: 0] + r.redirections["ASK", default: 0], 0, "the worker followed the slot")
    }

    /// While a slot moves, a key not yet on its old node is on the new one: `-ASK` sends the
    /// command there once, after ASKING, scripts too (loaded there first).
    func testABlockingCallFollowsAnAskRedirectionOnce() throws {
        let group = try cluster()
        let key = "apns:{ask\(UInt32.random(in: 0...UInt32.max))}:jobs"
        let slot = RedisCluster.slot(ofKey: key)
        let ports = try group.beginMigration(slot: slot)
        defer { try? group.cancelMigration(slot: slot, ports) }
        let r = try BlockingRedisConnection(group.endpoint.routed(toKey: key), timeoutMs: 5000)
        XCTAssertEqual(r.endpoint.port, ports.source)
        XCTAssertEqual(try r.command(["LPUSH", key, "a"]), .integer(1))
        let script = RedisScript("return redis.call('LPUSH', KEYS[1], ARGV[1]) + \(UInt32.random(in: 0...UInt32.max)) * 0")
        XCTAssertEqual(try r.run(script, keys: [key], args: [Array("b".utf8)]), .integer(2))
        let target = try group.connect(port: ports.target)
        _ = try target.command(["ASKING"])
        XCTAssertEqual(try target.command(["LRANGE", key, "0", "-1"]), .array([.string(Array("b".utf8)), .string(Array("a".utf8))]))
        XCTAssertEqual(try group.connect(port: ports.source).command(["CLUSTER", "COUNTKEYSINSLOT", String(slot)]), .integer(0))
        _ = try target.command(["ASKING"])
        _ = try target.command(["DEL", key])
    }

    func testTheSlotOfAKeyIsTheClustersOwn() {
        // Known slots, as CLUSTER KEYSLOT gives them.
        XCTAssertEqual(RedisCluster.slot(ofKey: "foo"), 12182)
        XCTAssertEqual(RedisCluster.slot(ofKey: "{user1000}.following"), RedisCluster.slot(ofKey: "user1000"))
        XCTAssertEqual(RedisCluster.slot(ofKey: "apns:{push.3}:jobs"), RedisCluster.slot(ofKey: "push.3"))
        XCTAssertEqual(RedisCluster.slot(ofKey: "a{}b"), RedisCluster.slot(ofKey: "a{}b"))
        XCTAssertEqual(RedisCluster.slot(ofKey: "123456789"), 0x31C3 % 16384)
    }
}
