import APNSCore
import Configuration
import Delivery
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
        let refused = SendAttempt(timeMs: 1_764_650_000_123, status: 500, reason: "InternalServerError")
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

    /// A job taken back once goes back in line at the consuming end of the list, as any job;
    /// one taken back twice is a suspect, kept apart in the suspects' list. A worker that died
    /// holding a suspect is taken to have died of it: only the suspect's count rises, so its
    /// batch-mates are never made poison pills with it (issue 43, item 1).
    func testSuspectsAreKeptApartAndBlamedAloneForTheirWorkersDeath() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        func wrapped(_ id: String, recoveries: Int) -> String {
            String(
                decoding: JobEnvelope.wrap(job: ArraySlice(#"{"id":"\#(id)","token":"aa"}"#.utf8), meta: .init(recoveries: recoveries)), as: UTF8.self
            )
        }
        func recoveries(in list: String) throws -> [String: Int] {
            var out: [String: Int] = [:]
            for job in try r.command(["LRANGE", list, "0", "-1"]).array.compactMap(\.text) {
                let (meta, inner) = try JobEnvelope.open(ArraySlice(job.utf8))
                let id = String(decoding: inner, as: UTF8.self).split(separator: "\"")[3]
                out[String(id)] = meta.recoveries
            }
            return out
        }
        func die(_ w: String, holding batches: [String: [String]], maxRecoveries: Int = 3) throws -> (Int64, Int64) {
            for (id, jobs) in batches {
                _ = try r.command(["RPUSH", keys.batch(worker: w, id: id)] + jobs)
                _ = try r.command(["HSET", keys.batches(worker: w), id, "1"])
            }
            _ = try r.command(["ZADD", keys.workers, "1", w])
            return try InFlightJobs.recover(r, keys, worker: w, maxRecoveries: maxRecoveries, caps: WorkerConfiguration().recordCaps, mode: .lease)
        }
        // A crash with no suspect held: every job's count rises; the twice taken go apart.
        XCTAssertEqual(try die("w-1", holding: ["p1-1": [#"{"id":"fresh","token":"aa"}"#, wrapped("once", recoveries: 1)]]).0, 2)
        XCTAssertEqual(try recoveries(in: keys.jobs), ["fresh": 1])
        XCTAssertEqual(try recoveries(in: keys.suspects), ["once": 2])
        _ = try r.command(["DEL", keys.jobs, keys.suspects])

        // A crash while a suspect was held: the suspect alone is blamed.
        let (requeued, poisoned) = try die(
            "w-2",
            holding: ["p2-1": [#"{"id":"fresh","token":"aa"}"#, wrapped("once", recoveries: 1)], "p2-s2": [wrapped("suspect", recoveries: 2)]])
        XCTAssertEqual([requeued, poisoned], [3, 0])
        XCTAssertEqual(try recoveries(in: keys.jobs), ["fresh": 0, "once": 1], "its batch-mates keep their counts")
        XCTAssertEqual(try recoveries(in: keys.suspects), ["suspect": 3])
        let attempts = try r.command(["LRANGE", keys.jobs, "0", "-1"]).array.compactMap(\.text).map {
            try JobEnvelope.open(ArraySlice($0.utf8)).meta.attempts
        }
        XCTAssertTrue(attempts.allSatisfy { $0.map(\.reason) == ["TakenBack"] }, "the take-back is still in their history")
        _ = try r.command(["DEL", keys.jobs, keys.suspects])

        // Past the limit the suspect is the only poison pill.
        let (_, pills) = try die("w-3", holding: ["p3-1": [wrapped("once", recoveries: 1)], "p3-s9": [wrapped("suspect", recoveries: 3)]])
        XCTAssertEqual(pills, 1)
        let dead = try r.command(["XRANGE", keys.deadLetters, "-", "+"]).array
        XCTAssertEqual(dead.count, 1)
        XCTAssertTrue(dead[0].array[1].array[1].text!.contains(#""job_id":"suspect""#))
        XCTAssertEqual(try recoveries(in: keys.jobs), ["once": 1])

        // A stopping worker hands a suspect back to the suspects' list; a retried suspect is
        // promoted there too.
        _ = try r.command(["DEL", keys.jobs])
        _ = try r.command(["RPUSH", keys.batch(worker: "w-4", id: "p4-s1"), wrapped("handed", recoveries: 2)])
        _ = try r.command(["HSET", keys.batches(worker: "w-4"), "p4-s1", "1"])
        XCTAssertEqual(try InFlightJobs.handBack(r, keys, worker: "w-4"), 1)
        _ = try r.command(["ZADD", keys.scheduled, "1", wrapped("retried", recoveries: 2), "2", wrapped("plain-retry", recoveries: 1)])
        _ = try r.run(
            QueueScripts.tick, keys: [keys.workers, keys.scheduled, keys.jobs, keys.stats, keys.suspects],
            args: ["w-5", "3000", "10"].map { Array($0.utf8) })
        XCTAssertEqual(try recoveries(in: keys.suspects), ["handed": 2, "retried": 2])
        XCTAssertEqual(try recoveries(in: keys.jobs), ["plain-retry": 1])
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
