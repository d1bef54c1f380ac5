import APNSCore
import Foundation
import TestSupport
import XCTest

final class RetryAndScheduleTests: XCTestCase {
    /// Times (ms) at which the mock saw `token`, in order.
    private func tries(_ log: [[String: Any]], _ token: String) -> [(time: Int, status: Int)] {
        log.filter { $0["token"] as? String == token }.map { ($0["time_ms"] as! Int, $0["status"] as! Int) }
    }

    func testTooManyRequestsBacksOffWithGrowingGapsThenDelivers() throws {
        let token = WorkerFixture.token(1, prefix: "429")
        let f = try WorkerFixture { config in config.faults.tokens = [.init(token: token, status: 429, attempts: 3)] }
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(1, prefix: "429")])
        try f.waitForOutcomes(1, timeout: 30)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1])
        XCTAssertEqual(try f.stats()["retried"], 3)
        let result = try XCTUnwrap(try f.records(f.keys.results).first)
        XCTAssertEqual(result["status"] as? String, "ok")
        XCTAssertEqual(result["attempts"] as? Int, 4)
        let seen = tries(try f.mock.logEntries(), token)
        XCTAssertEqual(seen.map(\.status), [429, 429, 429, 200])
        let gaps = zip(seen.dropFirst(), seen).map { $0.time - $1.time }
        XCTAssertEqual(gaps.count, 3)
        XCTAssertGreaterThan(gaps[0], 600, "\(gaps)")
        XCTAssertGreaterThan(gaps[1], gaps[0], "gaps grow: \(gaps)")
        XCTAssertGreaterThan(gaps[2], gaps[1], "gaps grow: \(gaps)")
    }

    func testServerErrorsGetThreeTriesOneToFiveSecondsApart() throws {
        let always = WorkerFixture.token(1, prefix: "503")
        let twice = WorkerFixture.token(2, prefix: "503")
        let f = try WorkerFixture { config in
            config.faults.tokens = [
                .init(token: always, status: 503, reason: "ServiceUnavailable"),
                .init(token: twice, status: 500, attempts: 2),
            ]
        }
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(1, prefix: "503"), WorkerFixture.job(2, prefix: "503")])
        try f.waitForOutcomes(2, timeout: 30)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1, "dead_lettered": 1])
        let log = try f.mock.logEntries()
        let a = tries(log, always), b = tries(log, twice)
        XCTAssertEqual(a.map(\.status), [503, 503, 503], "a dead letter after exactly 3 tries")
        XCTAssertEqual(b.map(\.status), [500, 500, 200])
        for gap in zip(a.dropFirst(), a).map({ $0.time - $1.time }) + zip(b.dropFirst(), b).map({ $0.time - $1.time }) {
            XCTAssertTrue((900...5400).contains(gap), "gap \(gap) ms is outside 1-5 s")
        }
        let dead = try XCTUnwrap(try f.records(f.keys.deadLetters).first)
        XCTAssertEqual(dead["reason"] as? String, "ServiceUnavailable")
        XCTAssertEqual((dead["attempts"] as? [[String: Any]])?.map { $0["status"] as? Int }, [503, 503, 503])
        XCTAssertEqual((dead["job"] as? [String: Any])?["id"] as? String, "job-1", "the original job is kept")
    }

    func testFanOutGivesOneOutcomePerToken() throws {
        let f = try WorkerFixture { config in config.faults.tokens = [.init(tokenPrefix: "dead", status: 410)] }
        try f.startWorker("w-fan")
        let tokens = [WorkerFixture.token(1), WorkerFixture.token(2, prefix: "dead"), WorkerFixture.token(3)]
        try f.enqueue([#"{"id":"fan","tokens":["\#(tokens.joined(separator: "\",\""))"],"payload":{"aps":{"alert":"all"}}}"#])
        try f.waitForOutcomes(3)
        XCTAssertEqual(try f.finalStats(), ["delivered": 2, "invalid_token": 1])
        let results = try f.records(f.keys.results)
        XCTAssertEqual(Set(results.compactMap { $0["token"] as? String }), Set(tokens))
        XCTAssertTrue(results.allSatisfy { $0["job_id"] as? String == "fan" })
        XCTAssertEqual(try f.records(f.keys.invalidTokens).first?["token"] as? String, tokens[1])
        XCTAssertEqual(try f.inFlight("w-fan"), 0, "acked once, after the last token")
    }

    func testSendAtWaitsInTheScheduleUntilDue() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        let due = Int(Date().timeIntervalSince1970) + 2
        try f.enqueue([WorkerFixture.job(1, extra: #","send_at":\#(due)"#), WorkerFixture.job(2)])
        try f.waitForOutcomes(1)
        XCTAssertEqual(try f.connect().command(["ZCARD", f.keys.scheduled]).integer, 1, "the future job waits in the schedule")
        try f.waitForOutcomes(2, timeout: 10)
        let sent = try f.mock.logEntries().first { $0["token"] as? String == WorkerFixture.token(1) }
        XCTAssertGreaterThanOrEqual(sent?["time_ms"] as? Int ?? 0, due * 1000)
        XCTAssertEqual(try f.records(f.keys.results).first { $0["job_id"] as? String == "job-1" }?["status"] as? String, "ok")
    }

    func testTooManyProviderTokenUpdatesPausesTheAppAndCostsNoAttempt() throws {
        let token = WorkerFixture.token(1, prefix: "77")
        let f = try WorkerFixture(settings: ["credential_pause_ms": 800]) { config in
            config.faults.tokens = [.init(token: token, status: 429, reason: "TooManyProviderTokenUpdates", attempts: 1)]
        }
        let worker = try f.startWorker()
        try f.enqueue([WorkerFixture.job(1, prefix: "77")])
        try f.waitForOutcomes(1, timeout: 20)
        let result = try XCTUnwrap(try f.records(f.keys.results).first)
        XCTAssertEqual(result["status"] as? String, "ok")
        XCTAssertEqual(result["attempts"] as? Int, 1, "the credential's trouble is not the job's")
        let seen = tries(try f.mock.logEntries(), token)
        XCTAssertEqual(seen.map(\.status), [429, 200])
        XCTAssertGreaterThanOrEqual(seen[1].time - seen[0].time, 700, "the app paused before sending again")
        XCTAssertTrue(worker.output.contains("pausing the app"))
    }
}
