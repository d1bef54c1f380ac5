import Foundation
import TestSupport
import XCTest

/// APNs's refusals in the logs (issue 28, item 6): one warning line each by default, with what a
/// person needs to act on it, even at log_level warning; a summary for high volume; tokens
/// whole or short as set.
final class RejectionLogTests: XCTestCase {
    private func run(_ settings: [String: Any], jobs: Int = 1000, wait: Double = 0) throws -> (lines: [[String: Any]], worker: String) {
        let f = try WorkerFixture(settings: ["log_level": "warning"].merging(settings) { $1 }) { config in
            config.faults.tokens = [.init(tokenPrefix: "dead", status: 400, reason: "BadDeviceToken")]
        }
        // One job in ten fails.
        try f.enqueue((0..<jobs).map { WorkerFixture.job($0, prefix: $0 % 10 == 0 ? "dead" : "") })
        let w = try f.startWorker()
        try f.waitForOutcomes(jobs)
        if wait > 0 { _ = waitUntil(timeout: wait) { w.output.contains("summary") } }
        usleep(300_000)
        let lines = w.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        return (lines, w.output)
    }

    func testEachRejectionIsOneWarningLineWithWhatToActOn() throws {
        let (lines, _) = try run([:])
        let rejected = lines.filter { ($0["msg"] as? String) == "APNs rejected a notification" }
        XCTAssertEqual(rejected.count, 100, "one line per rejected job, at warning: 0.1 lines per job at 10% failing")
        for line in rejected {
            XCTAssertEqual(line["level"] as? String, "warning")
            XCTAssertEqual(line["status"] as? Int, 400)
            XCTAssertEqual(line["reason"] as? String, "BadDeviceToken")
            XCTAssertEqual((line["token"] as? String)?.count, 64, "whole tokens by default")
            XCTAssertTrue((line["job_id"] as? String)?.hasPrefix("job-") == true)
            XCTAssertNotNil(line["apns_id"])
            XCTAssertNotNil(line["apns_timestamp"])
            XCTAssertEqual(line["app"] as? String, "default")
        }
    }

    func testASummaryLogsOneLinePerReasonWithACountAndShortTokens() throws {
        let (lines, output) = try run(["log_rejections": "summary", "log_tokens": "short"], wait: 15)
        XCTAssertEqual(lines.filter { ($0["msg"] as? String) == "APNs rejected a notification" }.count, 0)
        let summaries = lines.filter { ($0["msg"] as? String)?.contains("summary") == true }
        XCTAssertEqual(summaries.count, 1, output.suffix(2000).description)
        XCTAssertEqual(summaries.first?["count"] as? Int, 100)
        XCTAssertEqual(summaries.first?["reason"] as? String, "BadDeviceToken")
        let token = try XCTUnwrap(summaries.first?["token"] as? String)
        XCTAssertTrue(token.count == 13 && token.contains("…"), "first 8 and last 4 digits: \(token)")
        XCTAssertFalse(output.contains(WorkerFixture.token(10, prefix: "dead")), "no whole token anywhere")
    }
}
