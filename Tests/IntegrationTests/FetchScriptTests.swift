import APNSCore
import Foundation
import QueueContract
import RedisClient
import TestSupport
import XCTest

@testable import APNSWorker

/// The fetch step against a real Redis: jobs move into a batch list in the order taken, the
/// batch is registered under its first handle, and a batch whose reply was lost can be found.
final class FetchScriptTests: XCTestCase {
    private let worker = "w-fetch"

    func testAFetchMovesTheStagedJobThenTheOldestIntoARegisteredBatch() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        _ = try r.command(["LPUSH", keys.jobs, "j0", "j1", "j2", "j3", "j4"])  // j0 is the oldest
        _ = try r.command(["LPUSH", keys.staging(worker: worker), "staged"])

        let first = try fetch(r, keys, id: "a-1", max: 3)
        XCTAssertEqual(first.first, 1)
        XCTAssertEqual(first.ranges.map { first.bytes[$0] }.map(text), ["staged", "j0", "j1"])
        XCTAssertEqual(try r.command(["LRANGE", keys.jobs, "0", "-1"]).array.compactMap(\.text), ["j4", "j3", "j2"])
        XCTAssertEqual(try r.command(["EXISTS", keys.staging(worker: worker)]).integer, 0)
        XCTAssertNotEqual(try r.command(["ZSCORE", keys.workers, worker]), .null, "the fetch renews the lease")

        let second = try fetch(r, keys, id: "a-2", max: 10)
        XCTAssertEqual(second.first, 4, "handles go on from the last batch's")
        XCTAssertEqual(second.ranges.map { second.bytes[$0] }.map(text), ["j2", "j3", "j4"])
        let none = try fetch(r, keys, id: "a-3", max: 10)
        XCTAssertTrue(none.isEmpty)
        XCTAssertEqual(
            try r.command(["HGETALL", keys.batches(worker: worker)]).array.compactMap(\.text), ["a-1", "1", "a-2", "4"],
            "an empty fetch registers nothing")
        XCTAssertEqual(try InFlightJobs.count(r, keys, worker: worker), 6)

        // A fetch whose reply was lost: its batch is found by id, with its first handle.
        let found = try lookUpLost(r, keys, "a-2")
        XCTAssertEqual(found.first, 4)
        XCTAssertEqual(found.ranges.map { found.bytes[$0] }.map(text), ["j2", "j3", "j4"])
        let missing = try lookUpLost(r, keys, "a-9")
        XCTAssertTrue(missing.isEmpty, "a fetch that never ran left nothing to send")
        // Should that fetch reach Redis late, it takes nothing (issue 27, item 6).
        _ = try r.command(["LPUSH", keys.jobs, "j5"])
        XCTAssertTrue(try fetch(r, keys, id: "a-9", max: 10).isEmpty)
        XCTAssertEqual(try r.command(["LLEN", keys.jobs]).integer, 1, "the job stays queued")
        XCTAssertEqual(try InFlightJobs.count(r, keys, worker: worker), 6)
        let handedBack = try InFlightJobs.handBack(r, keys, worker: worker)
        XCTAssertEqual(handedBack, 6, "the fenced-off id hands nothing back")
        XCTAssertEqual(try r.command(["EXISTS", keys.batches(worker: worker)]).integer, 0, "and goes with the rest")
    }

    /// A suspect is fetched alone, from its own list, and every fetch says how many wait; a
    /// fetcher whose replies keep getting lost leaves one fence, not one entry per lost fetch
    /// (issue 43, item 5: a `0` per lost reply, for the worker's whole life).
    func testASuspectIsFetchedAloneAndFencesDoNotPileUp() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        _ = try r.command(["LPUSH", keys.jobs, "j0", "j1", "j2"])
        _ = try r.command(["LPUSH", keys.suspects, "s0", "s1"])
        let normal = try fetch(r, keys, id: "a-1", max: 10)
        XCTAssertEqual(normal.ranges.map { normal.bytes[$0] }.map(text), ["j0", "j1", "j2"], "suspects never join a batch")
        XCTAssertEqual(normal.suspectsWaiting, 2)
        let alone = try fetch(r, keys, id: "a-s2", max: 10, suspect: true)
        XCTAssertEqual(alone.ranges.map { alone.bytes[$0] }.map(text), ["s0"], "the oldest suspect, alone")
        XCTAssertEqual(alone.suspectsWaiting, 1)
        XCTAssertEqual(InFlightJobs.Field("a-s2"), .suspectBatch)
        XCTAssertEqual(InFlightJobs.Field("a-12"), .batch)
        XCTAssertEqual(InFlightJobs.Field(fence), .fence)

        // 50 lost replies, each looked up on a new connection (a higher epoch): one fence.
        for epoch in 2...51 { XCTAssertTrue(try lookUpLost(r, keys, "a-\(100 + epoch)", epoch: epoch).isEmpty) }
        let fields = try r.command(["HKEYS", keys.batches(worker: worker)]).array.compactMap(\.text)
        XCTAssertEqual(Set(fields), ["a-1", "a-s2", fence], "one fence, whatever the count of lost fetches")
        XCTAssertEqual(try r.command(["HGET", keys.batches(worker: worker), fence]).text, "51")
        _ = try r.command(["LPUSH", keys.jobs, "j3"])
        XCTAssertTrue(try fetch(r, keys, id: "a-200", max: 10, epoch: 50).isEmpty, "an old connection's fetch takes nothing")
        XCTAssertEqual(try fetch(r, keys, id: "a-201", max: 10, epoch: 51).count, 1, "the live connection's does")
        XCTAssertEqual(try InFlightJobs.count(r, keys, worker: worker), 5, "the fence counts no job")
    }

    private func lookUpLost(_ r: BlockingRedisConnection, _ keys: QueueKeys, _ id: String, epoch: Int = 2) throws -> TakenJobs {
        let args = QueueScripts.lookUpLostCall(keys, worker: worker, batch: id, fence: fence, epoch: epoch)
        return try r.run(QueueScripts.lookUpLost, args, then: lookup(keys, "lrange", id), flat: TakenJobs.init)
    }

    private let fence = "x-f1"

    private func fetch(
        _ r: BlockingRedisConnection, _ keys: QueueKeys, id: String, max: Int, epoch: Int = 1, suspect: Bool = false
    ) throws -> TakenJobs {
        let args = QueueScripts.fetchCall(keys, worker: worker, batch: id, max: max, leaseMs: 15000, fence: fence, epoch: epoch, suspect: suspect)
        return try r.run(QueueScripts.fetch, args, then: lookup(keys, "lrange", id), flat: TakenJobs.init)
    }

    private func lookup(_ keys: QueueKeys, _ kind: String, _ id: String) -> RedisArgs {
        RedisArgs(kind == "hget" ? ["HGET", keys.batches(worker: worker), id] : ["LRANGE", keys.batch(worker: worker, id: id), "0", "-1"])
    }

    private func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
}
