import Dispatch
import Foundation
import IOLoop
import QueueContract
import RedisClient
import Telemetry
import TestSupport
import XCTest

@testable import APNSWorker

/// A slot left half-moved (issue 44, item 6): MIGRATING on its node, IMPORTING on another,
/// some or all of its keys moved. Only its own key set waits, whatever the importing node does
/// (answers, answers CLUSTERDOWN, hangs); the other shards' jobs keep going out past the
/// lease, and once the migration ends its jobs go too, each with one result. On `46f7dad` a
/// lease later the workers stopped sending for every shard, saying nothing.
extension ClusterTests {
    func testASlotLeftHalfMovedHoldsUpOnlyItsOwnKeySet() throws {
        try runHalfMoved("half-moved", moveEveryKey: false)
    }

    /// Every key moved: the old node answers `-ASK` to all, and the importing node answers
    /// CLUSTERDOWN to what is sent there after ASKING.
    func testAnImportingNodeAnsweringClusterDownHoldsUpOnlyItsKeySet() throws {
        let group = try cluster()
        var down = 0
        try runHalfMoved(
            "clusterdown", moveEveryKey: true,
            disturb: { down = try group.makeClusterDown(port: $0) },
            mend: { try group.mendClusterDown(port: $0, slot: down) })
    }

    /// Every key moved, and the importing node leaves every command unanswered for 12 s.
    func testAnImportingNodeThatHangsHoldsUpOnlyItsKeySet() throws {
        let group = try cluster()
        var pausedUntil = Date()
        try runHalfMoved(
            "hang", moveEveryKey: true,
            disturb: {
                try group.pause(port: $0, ms: 12_000)
                pausedUntil = Date().addingTimeInterval(12)
            },
            mend: { _ in Thread.sleep(until: pausedUntil) })
    }

    /// A queue of three shards whose shard 1 is on one master and the others off a second
    /// master, which shard 1's slot is then moved to: what that node does touches shard 1 only.
    private func queueWithAFreeMaster(_ group: ClusterGroup) throws -> (queue: String, target: Int) {
        let masters = try group.masterPorts()
        while true {
            let name = "h\(UInt32.random(in: 0...UInt32.max))"
            let owners = try QueueKeys.served(queue: name, shards: 3).map { try group.master(ofSlot: RedisCluster.slot(ofKey: $0.jobs)) }
            if let free = masters.subtracting(owners).first { return (name, free) }
        }
    }

    private func runHalfMoved(
        _ name: String, moveEveryKey: Bool, disturb: (Int) throws -> Void = { _ in }, mend: (Int) throws -> Void = { _ in }
    ) throws {
        let group = try cluster()
        let (queue, free) = try queueWithAFreeMaster(group)
        let f = try WorkerFixture(
            redis: try TestRedis(serving: group.endpoint), queue: queue, settings: ["shards": 3, "lease_ms": 2000, "connections": 1, "streams": 20]
        ) { config in config.faults.tokens = [.init(tokenPrefix: "5700", delayMs: 1500)] }
        let w = try f.startWorker("w-\(name)")
        for (n, set) in f.keySets.enumerated() { try f.enqueue([WorkerFixture.job(n)], to: set.jobs) }
        try f.waitForOutcomes(f.keySets.count)
        let stuck = f.keySets[1]
        // Its jobs in flight (answered 1.5 s late) and queued when the slot starts to move.
        try f.enqueue((100..<400).map { WorkerFixture.job($0, prefix: "5700") }, to: stuck.jobs)
        usleep(300_000)
        let slot = RedisCluster.slot(ofKey: stuck.jobs)
        let ports = try group.beginMigration(slot: slot, to: free)
        if moveEveryKey {
            try group.migrateAll(slot: slot, ports)
        } else {
            try group.migrate(keys: [stuck.workers, stuck.handleCounter], ports)
        }
        try disturb(ports.target)
        usleep(4_000_000)  // past the lease
        let logged = w.output.count
        var others = 0
        for set in f.keySets where set != stuck {
            try f.enqueue((1000 + others..<1050 + others).map { WorkerFixture.job($0) }, to: set.jobs)
            others += 50
        }
        let flowing = try waitUntil(timeout: 6) {
            try f.keySets.filter { $0 != stuck }.map { try f.records($0.results).count }.reduce(0, +) >= others + f.keySets.count - 1
        }
        XCTAssertTrue(flowing, "the other key sets kept going: \(w.output.suffix(2000))")
        try mend(ports.target)
        try group.finishMigration(slot: slot, ports)
        try f.waitForOutcomes(f.keySets.count + 300 + others, timeout: 60)
        try f.assertOneResultEach(f.keySets.count + 300 + others)
        let said = String(w.output.dropFirst(logged)).components(separatedBy: "waits for its slot").count - 1
        XCTAssertLessThanOrEqual(said, 3, "said once, not in a loop")
        XCTAssertTrue(w.output.contains("waits for its slot"), w.output.suffix(3000).description)
        if moveEveryKey {
            XCTAssertTrue(w.output.contains("importing slot \(slot)"), "-ASK was followed to the importing node: \(w.output.suffix(3000))")
        }
        print("Cluster \(name): the other shards' \(others) jobs went out while shard 1's slot was half-moved; said \(said) times")
    }

    /// `-ASK` on the worker's own (event-loop) connection: a group whose key has moved to the
    /// importing node goes there after ASKING, once, and the owner reads every answer in the
    /// order sent, a keyless command's (ECHO) between them included. The old node keeps the slot.
    func testTheWorkersConnectionFollowsAnAskRedirectionWithAsking() throws {
        let group = try cluster()
        let key = "apns:{ask\(UInt32.random(in: 0...UInt32.max))}:jobs"
        let slot = RedisCluster.slot(ofKey: key)
        _ = try BlockingRedisConnection(group.endpoint.routed(toKey: key)).command(["RPUSH", key, "a", "b"])
        let ports = try group.beginMigration(slot: slot)
        defer { try? group.finishMigration(slot: slot, ports) }
        try group.migrate(keys: [key], ports)
        let loop = try EventLoop()
        let owner = AskingOwner(
            [RedisArgs(["LRANGE", key, "0", "-1"]), RedisArgs(["ECHO", "between"]), RedisArgs(["RPUSH", key, "c"]), RedisArgs(["LLEN", key])])
        owner.redis = EventLoopRedisConnection(group.endpoint.routed(toKey: key), loop: loop, logger: Logger(level: .error))
        owner.redis.owner = owner
        Thread { loop.run() }.start()
        loop.execute { owner.redis.start() }
        defer {
            loop.execute {
                owner.redis.close()
                loop.stop()
            }
        }
        XCTAssertEqual(owner.done.wait(timeout: .now() + 20), .success, "every group answered; failures: \(owner.failures)")
        XCTAssertEqual(owner.replies, ["a b", "between", "3", "3"])
        XCTAssertEqual(owner.failures, [], "no reconnect")
        XCTAssertEqual(try group.master(ofSlot: slot), ports.source, "the map is as it was")
        let target = try group.connect(port: ports.target)
        _ = try target.command(["ASKING"])
        XCTAssertEqual(try target.command(["LLEN", key]), .integer(3))
    }
}

/// Sends its commands, each a group, once connected; keeps each answer as text.
private final class AskingOwner: EventLoopRedisOwner, @unchecked Sendable {
    let commands: [RedisArgs]
    var redis: EventLoopRedisConnection!
    var replies: [String] = []
    var failures: [String] = []
    let done = DispatchSemaphore(value: 0)
    private var sent = false

    init(_ commands: [RedisArgs]) { self.commands = commands }

    func redisConnected() {
        guard !sent else { return }
        sent = true
        for c in commands { redis.send([c]) }
    }

    func redisReplied(_ reply: RedisFlatReply) throws(RedisError) {
        let start = reply.count > 1 ? 1 : 0
        replies.append(
            (start..<reply.count).map { i in reply.bytes(i).map { String(decoding: $0, as: UTF8.self) } ?? reply.integer(i).map(String.init) ?? "?" }
                .joined(separator: " "))
        if replies.count == commands.count { done.signal() }
    }

    func redisFailed(_ error: RedisError) { failures.append(error.description) }
}
