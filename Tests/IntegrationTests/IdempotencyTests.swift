import Foundation
import QueueContract
import TestSupport
import XCTest

/// Idempotency keys (issue 47, item 1): within the window one job per key is sent; another gets
/// one result record of status duplicate naming the first, no attempt and no dead letter; a job
/// taken back after a crash, or retried, is never a duplicate of itself.
final class IdempotencyTests: XCTestCase {
    private func keyed(_ i: Int, key: String, prefix: String = "", id: String? = nil) -> String {
        let token = WorkerFixture.token(i, prefix: prefix)
        return #"{"v":1,"id":"\#(id ?? "job-\(i)")","idempotency_key":"\#(key)","token":"\#(token)","payload":{"aps":{"alert":"n\#(i)"}}}"#
    }

    private func sends(_ f: WorkerFixture) throws -> [String: Int] {
        var n: [String: Int] = [:]
        for e in try f.mock.logEntries() where e["status"] as? Int == 200 { n[e["token"] as? String ?? "?", default: 0] += 1 }
        return n
    }

    func testASecondJobWithATakenKeyIsNotSentAndGetsOneDuplicateRecordNamingTheFirst() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        try f.enqueue([keyed(1, key: "order-1:shipped", id: "first")])
        try f.waitForOutcomes(1)
        try f.enqueue([keyed(2, key: "order-1:shipped", id: "retry"), keyed(3, key: "order-2:shipped", id: "other")])
        try f.waitForOutcomes(3)
        XCTAssertEqual(try f.finalStats(), ["delivered": 2, "duplicate": 1])
        XCTAssertEqual(try f.stats()["duplicate:default"], 1, "counted under its app too")
        let sent = try sends(f)
        XCTAssertNil(sent[WorkerFixture.token(2)], "the duplicate never reached APNs")
        XCTAssertEqual(sent[WorkerFixture.token(1)], 1)
        let results = try f.records(in: \.results)
        let first = try XCTUnwrap(results.first { $0["job_id"] as? String == "first" })
        let dup = results.filter { $0["job_id"] as? String == "retry" }
        XCTAssertEqual(dup.count, 1, "one final record of its own")
        XCTAssertEqual(dup.first?["status"] as? String, "duplicate")
        XCTAssertEqual(dup.first?["duplicate_of"] as? String, first["handle"] as? String, "names the first job")
        XCTAssertEqual(dup.first?["attempts"] as? Int, 0)
        XCTAssertTrue(try f.records(in: \.deadLetters).isEmpty, "no dead letter")
        // A bad key is a dead letter that names the field.
        try f.enqueue([keyed(4, key: "has space")])
        try f.waitForOutcomes(4)
        let dead = try f.records(in: \.deadLetters)
        XCTAssertEqual(dead.first?["reason"] as? String, "BadIdempotencyKey")
        XCTAssertTrue((dead.first?["detail"] as? String ?? "").contains("idempotency_key"))
    }

    /// Two producers pushing the same keys at once, to two workers: each key is sent once.
    func testTwoProducersPushingTheSameKeysAtOnceSendEachOnce() throws {
        let keys = 300
        let f = try WorkerFixture(settings: ["batch_size": 20])
        var jobs: [String] = []
        for i in 0..<keys {
            jobs.append(keyed(i, key: "k-\(i)", prefix: "a", id: "a-\(i)"))
            jobs.append(keyed(i, key: "k-\(i)", prefix: "b", id: "b-\(i)"))
        }
        try f.enqueue(jobs)
        try f.startWorker("w-1")
        try f.startWorker("w-2")
        try f.waitForOutcomes(2 * keys)
        XCTAssertEqual(try f.finalStats(), ["delivered": keys, "duplicate": keys])
        let sent = try sends(f)
        for i in 0..<keys {
            let n = (sent[WorkerFixture.token(i, prefix: "a")] ?? 0) + (sent[WorkerFixture.token(i, prefix: "b")] ?? 0)
            XCTAssertEqual(n, 1, "key k-\(i) sent \(n) times")
        }
        let byWorker = Set(try f.records(in: \.results).compactMap { $0["worker"] as? String })
        XCTAssertEqual(byWorker.count, 2, "both workers took part")
    }

    /// A worker killed with -9 while half its keyed jobs wait for slow answers: their taker finds
    /// the keys held by the jobs themselves and sends them; none is a duplicate, none is lost.
    func testAJobTakenBackAfterACrashIsNotADuplicateOfItself() throws {
        let jobs = 200
        let f = try WorkerFixture(settings: ["lease_ms": 2000, "batch_size": 50]) { config in
            config.faults.tokens = [.init(tokenPrefix: "d", attempts: 1, delayMs: 60_000)]
        }
        try f.enqueue((0..<jobs).map { keyed($0, key: "crash-\($0)", prefix: $0 % 2 == 0 ? "d" : "f") })
        // The fast half answered: the slow half, sent beside it, waits on the mock.
        try f.killWithHalfInFlightAndTakeOver(jobs)
        XCTAssertEqual(try f.finalStats(), ["delivered": jobs], "none a duplicate of itself")
        XCTAssertEqual(try f.stats()["recovered"], jobs / 2)
        try f.assertOneResultEach(jobs)
        // Each slow job reached APNs twice (the victim's send, then the taker's): the duplicate a
        // crash may cost, counted; the key did not stop the job's own resend.
        let sent = try sends(f)
        XCTAssertEqual((0..<jobs).filter { $0 % 2 == 0 }.filter { sent[WorkerFixture.token($0, prefix: "d")] == 2 }.count, jobs / 2)
        XCTAssertEqual((0..<jobs).filter { $0 % 2 == 1 }.filter { sent[WorkerFixture.token($0, prefix: "f")] == 1 }.count, jobs / 2)
    }

    /// A worker stopped with SIGTERM hands back keyed jobs whose claims it made (the hand-back
    /// script writes each claim into the job's envelope): a restart sends them, none a duplicate.
    func testAJobHandedBackAtAStopIsNotADuplicateOfItself() throws {
        let jobs = 60
        let f = try WorkerFixture(settings: ["shutdown_grace_ms": 300, "streams": 10]) { config in
            config.faults.tokens = [.init(tokenPrefix: "", delayMs: 2000)]
        }
        try f.enqueue((0..<jobs).map { keyed($0, key: "stop-\($0)") })
        let first = try f.startWorker("w-stop")
        XCTAssertTrue(try waitUntil(timeout: 10) { try f.inFlight("w-stop") > 0 })
        XCTAssertTrue(try waitUntil(timeout: 10) { try f.connect().command(["KEYS", "\(f.keys.prefix):idem:*"]).array.count >= 10 }, "claims made")
        first.signal(SIGTERM)
        XCTAssertEqual(first.wait(timeout: 10), 0, first.output)
        XCTAssertTrue(first.output.contains("\"handed_back\""))
        let back = try f.connect().command(["LRANGE", f.keys.jobs, "0", "-1"]).array.compactMap(\.text)
        XCTAssertTrue(back.contains { $0.contains(#""claim":"#) }, "claims ride in the envelopes of the jobs handed back")
        try f.startWorker("w-stop")
        try f.waitForOutcomes(jobs, timeout: 60)
        XCTAssertEqual(try f.finalStats(), ["delivered": jobs], "none a duplicate of itself")
    }

    /// A Redis that lost its scripts (a restart, a failover) is given the claim script again.
    func testTheClaimScriptIsLoadedAgainAfterRedisLostIt() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        try f.enqueue([keyed(1, key: "flush")])
        try f.waitForOutcomes(1)
        _ = try f.connect().command(["SCRIPT", "FLUSH"])
        try f.enqueue([keyed(2, key: "flush"), keyed(3, key: "fresh")])
        try f.waitForOutcomes(3)
        XCTAssertEqual(try f.finalStats(), ["delivered": 2, "duplicate": 1])
    }

    /// A job retried after a 429 keeps its claim: its second try is sent, not called a duplicate.
    func testARetriedJobKeepsItsClaim() throws {
        let f = try WorkerFixture(settings: ["retry": ["backoff_base_ms": 100]]) { config in
            config.faults.tokens = [.init(tokenPrefix: "7", status: 429, attempts: 1)]
        }
        try f.startWorker()
        try f.enqueue([keyed(1, key: "retry-me", prefix: "7")])
        try f.waitForOutcomes(1)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1])
        XCTAssertEqual(try f.stats()["retried"], 1)
    }

    /// Past the window the key is free again.
    func testAKeyIsFreeAgainAfterTheWindow() throws {
        let f = try WorkerFixture(settings: ["idempotency_window_s": 1])
        try f.startWorker()
        try f.enqueue([keyed(1, key: "daily")])
        try f.waitForOutcomes(1)
        usleep(1_500_000)
        try f.enqueue([keyed(2, key: "daily")])
        try f.waitForOutcomes(2)
        XCTAssertEqual(try f.finalStats(), ["delivered": 2])
        let ttl = try f.connect().command(["TTL", f.keys.idempotency(key: "daily")]).integer ?? -3
        XCTAssertTrue((0...1).contains(ttl), "the claim expires with the window: TTL \(ttl)")
    }
}
