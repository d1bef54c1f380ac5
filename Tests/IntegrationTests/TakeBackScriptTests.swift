import APNSCore
import Configuration
import Foundation
import QueueContract
import RedisClient
import TestSupport
import XCTest

/// The recover script against a real Redis: what a job has been through goes back with it.
final class TakeBackScriptTests: XCTestCase {
    private let worker = "w-dead"

    /// A job taken back keeps the attempts it had, and gains a `TakenBack` try for the answer its
    /// worker may have had and never written; a poison pill's record lists them (issue 27,
    /// item 9: the attempts were lost, and the record said `[]`).
    func testATakenBackJobKeepsItsAttemptsAndCountsTheTakeBack() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        let refused = OutcomeRecord.Attempt(timeMs: 1_764_650_000_123, status: 500, reason: "InternalServerError")
        let plain = #"{"id":"plain","token":"aa"}"#
        let retried = String(
            decoding: JobEnvelope.wrap(job: ArraySlice(#"{"id":"retried","token":"bb"}"#.utf8), meta: .init(attempts: [refused])), as: UTF8.self)
        let poison = String(
            decoding: JobEnvelope.wrap(job: ArraySlice(#"{"id":"poison","token":"cc"}"#.utf8), meta: .init(attempts: [refused], recoveries: 2)),
            as: UTF8.self)
        _ = try r.command(["RPUSH", keys.batch(worker: worker, id: "b-1"), plain, retried, poison])
        _ = try r.command(["HSET", keys.batches(worker: worker), "b-1", "1"])
        _ = try r.command(["ZADD", keys.workers, "1", worker])  // its lease ran out long ago

        let (requeued, poisoned) = try InFlightJobs.recover(
            r, keys, worker: worker, maxRecoveries: 2, caps: WorkerConfiguration().recordCaps, mode: .lease)
        XCTAssertEqual(requeued, 2)
        XCTAssertEqual(poisoned, 1)

        let back = try r.command(["LRANGE", keys.jobs, "0", "-1"]).array.compactMap(\.text)
        let metas = try back.map { try JobEnvelope.open(ArraySlice($0.utf8)).meta }
        let byID = Dictionary(uniqueKeysWithValues: zip(back.map { $0.contains("plain") ? "plain" : "retried" }, metas))
        XCTAssertEqual(byID["plain"]?.attempts.map(\.reason), ["TakenBack"])
        XCTAssertEqual(byID["plain"]?.attempts.first?.status, 0)
        XCTAssertEqual(byID["retried"]?.attempts.map(\.reason), ["InternalServerError", "TakenBack"])
        XCTAssertEqual(byID["retried"]?.attempts.first, refused, "the earlier try is kept as it was")
        XCTAssertEqual(byID["retried"]?.recoveries, 1)
        // The retry budget counts every try in the list: a 500 now would be the third.
        let policy = RetryPolicy()
        var rng = SystemRandomNumberGenerator()
        let third = (byID["retried"]?.attempts.count ?? 0) + 1
        XCTAssertEqual(policy.decide(.serverError, attempts: third, jobMaxAttempts: nil, using: &rng), .giveUp)

        let dead = try r.command(["XRANGE", keys.deadLetters, "-", "+"]).array
        XCTAssertEqual(dead.count, 1)
        let record = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(dead[0].array[1].array[1].text!.utf8)) as? [String: Any])
        XCTAssertEqual(record["reason"] as? String, "PoisonPill")
        let attempts = try XCTUnwrap(record["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.compactMap { $0["reason"] as? String }, ["InternalServerError", "TakenBack"])
        XCTAssertEqual(attempts.first?["time_ms"] as? Int, 1_764_650_000_123)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 1, "and a result, under results: all or failures")
    }

    /// Under `results: none` (a results cap of 0 here) a poison pill gets its dead letter only.
    func testAPoisonPillGetsNoResultWhenResultsAreOff() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        let poison = String(
            decoding: JobEnvelope.wrap(job: ArraySlice(#"{"id":"poison","token":"cc"}"#.utf8), meta: .init(attempts: [], recoveries: 5)),
            as: UTF8.self)
        _ = try r.command(["RPUSH", keys.batch(worker: worker, id: "b-1"), poison])
        _ = try r.command(["HSET", keys.batches(worker: worker), "b-1", "1"])
        _ = try r.command(["ZADD", keys.workers, "1", worker])
        var caps = WorkerConfiguration().recordCaps
        caps.results = 0
        let (_, poisoned) = try InFlightJobs.recover(r, keys, worker: worker, maxRecoveries: 2, caps: caps, mode: .lease)
        XCTAssertEqual(poisoned, 1)
        XCTAssertEqual(try r.command(["XLEN", keys.deadLetters]).integer, 1)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 0)
    }
}
