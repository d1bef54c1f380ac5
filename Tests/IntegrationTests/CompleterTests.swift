@testable import APNSWorker
import APNSCore
import Foundation
import RedisClient
import TestSupport
import XCTest

/// The completion step against a real Redis: a batch whose jobs are all still in flight is
/// acked in one go; in a batch where some were recovered meanwhile, only the rest is written.
final class CompleterTests: XCTestCase {
    private let worker = "w-completer"
    private let token = String(repeating: "ab", count: 32)

    func testOnlyJobsStillInFlightAreRecordedAndFanOutAcksWithItsLastPiece() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        var configuration = WorkerConfiguration()
        configuration.redis = redis.endpoint
        let completer = Completer(keys: keys, workerID: worker, configuration: configuration, gate: InflightGate(capacity: 100),
                                  metrics: Metrics(), logger: Logger(level: .error))
        completer.start()
        defer { completer.stop() }
        let inflight = keys.inflight(worker: worker)

        // Handles 1-3 were taken back by a recovery (the hash emptied); 4-6 were fetched after it.
        _ = try r.command(["HSET", inflight, "4", "job", "5", "job", "6", "job"])
        completer.submit([unsent(1, .deadLetter(JobRejection("Bad", "bad"))), delivered(2), rejected(3, status: 410, .unregistered),
                          unsent(4, .deadLetter(JobRejection("Bad", "bad"))), delivered(5), delivered(6, fanout: 2), delivered(6, fanout: 2)])
        try waitFor(r, ["HLEN", inflight], equals: 0)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 4, "results for 4, 5 and both pieces of 6 only")
        XCTAssertEqual(try r.command(["XLEN", keys.deadLetters]).integer, 1)
        XCTAssertEqual(try r.command(["XLEN", keys.invalidTokens]).integer, 0, "3 was recovered: not recorded here")
        XCTAssertEqual(try stats(r, keys), ["dead_lettered": 1, "dead_lettered:default": 1, "delivered": 3, "delivered:default": 3])

        // All still in flight: the batch is acked at once, a fan-out job only with its last piece.
        _ = try r.command(["HSET", inflight, "7", "job", "8", "job", "9", "job"])
        completer.submit([delivered(7), rejected(8, status: 410, .unregistered), delivered(9, fanout: 2)])
        try waitFor(r, ["XLEN", keys.invalidTokens], equals: 1)
        XCTAssertEqual(try r.command(["HKEYS", inflight]).array.compactMap(\.text), ["9"], "9 waits for its second piece")
        completer.submit([delivered(9, fanout: 2)])
        try waitFor(r, ["HLEN", inflight], equals: 0)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 8)
        XCTAssertEqual(try stats(r, keys), ["dead_lettered": 1, "dead_lettered:default": 1, "delivered": 6, "delivered:default": 6,
                                            "invalid_token": 1, "invalid_token:default": 1])

        // A retry needs Redis's clock, so its batch goes through the script: scheduled, not recorded.
        _ = try r.command(["HSET", inflight, "10", "job", "11", "job"])
        completer.submit([delivered(10), rejected(11, status: 503, .serviceUnavailable)])
        try waitFor(r, ["HLEN", inflight], equals: 0)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 9)
        XCTAssertEqual(try r.command(["ZCARD", keys.scheduled]).integer, 1)
        XCTAssertEqual(try stats(r, keys)["retried:default"], 1)
    }

    /// A completion transaction WATCHes the take-back key: recovery and hand-back touch it.
    func testTakingJobsBackAbortsACompletionTransactionUnderWay() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let completing = try redis.connect(), other = try redis.connect()
        let takeback = keys.takeback(worker: worker)
        for handBack in [false, true] {
            _ = try other.command(["HSET", keys.inflight(worker: worker), "1", "{}"])
            _ = try other.command(["ZADD", keys.workers, "1", worker]) // a lease long run out
            _ = try completing.command(["WATCH", takeback])
            if handBack {
                _ = try other.run(QueueScripts.handBack, keys: [keys.inflight(worker: worker), keys.staging(worker: worker), keys.jobs,
                                                                keys.workers, takeback], args: [Array(worker.utf8)])
            } else {
                _ = try other.run(QueueScripts.recover, keys: [keys.inflight(worker: worker), keys.staging(worker: worker), keys.jobs,
                                                               keys.workers, keys.deadLetters, keys.results, keys.stats, takeback],
                                  args: [Array(worker.utf8), Array("3".utf8), Array("100".utf8), Array("100".utf8), Array("lease".utf8)])
            }
            var t = RedisTransaction()
            var xadd = RedisArgs()
            for w in ["XADD", keys.results, "*", "record", "{}"] { xadd.append(w) }
            t.append(xadd)
            XCTAssertFalse(try completing.exec(&t), handBack ? "hand-back" : "recovery")
            XCTAssertGreaterThan(try other.command(["PTTL", takeback]).integer ?? 0, 0, "the key expires by itself")
        }
        XCTAssertEqual(try other.command(["XLEN", keys.results]).integer, 0)
        XCTAssertEqual(try other.command(["LLEN", keys.jobs]).integer, 2, "both jobs went back to the queue")
    }

    private func request(_ handle: Int, fanout: Int) throws -> SendRequest {
        let job = try Job.parse(Array(#"{"token":"\#(token)","payload":{"aps":{"alert":"hi"}}}"#.utf8))
        return SendRequest(handle: String(handle), job: job, token: DeviceToken(token)!, app: 0, topic: "com.example.app",
                           takenAtNs: 1, attempts: [], recoveries: 0, fanout: fanout)
    }

    private func delivered(_ handle: Int, fanout: Int = 1) -> FinishedJob {
        try! request(handle, fanout: fanout).decide(.delivered(apnsID: "id-\(handle)"), appName: "default")
    }

    private func rejected(_ handle: Int, status: Int, _ reason: APNSReason) -> FinishedJob {
        try! request(handle, fanout: 1).decide(.rejected(APNSRejection(status: status, reason: reason, apnsID: nil, timestamp: 1)),
                                               appName: "default")
    }

    private func unsent(_ handle: Int, _ outcome: Outcome) -> FinishedJob {
        .unsent(handle: String(handle), raw: Array("{}".utf8), job: nil, appName: "default", topic: nil, outcome: outcome,
                attempts: [], recoveries: 0)
    }

    private func stats(_ r: RedisConnection, _ keys: QueueKeys) throws -> [String: Int64] {
        let flat = try r.command(["HGETALL", keys.stats]).array
        return Dictionary(uniqueKeysWithValues: stride(from: 0, to: flat.count, by: 2).map { (flat[$0].text!, flat[$0 + 1].integer!) })
    }

    private func waitFor(_ r: RedisConnection, _ command: [String], equals value: Int64) throws {
        let deadline = Date().addingTimeInterval(10)
        while try r.command(command).integer != value {
            guard Date() < deadline else { return XCTFail("\(command) never reached \(value)") }
            usleep(10_000)
        }
    }
}
