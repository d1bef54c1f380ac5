import Foundation
import QueueContract
import TestSupport
import XCTest

/// `max_age_s` (issue 43, item 4): a job that APNs has not taken this long after a worker first
/// took it is dead-lettered `Expired` instead of being sent again; off by default.
final class MaxAgeTests: XCTestCase {
    /// A job retried again and again (429) ends as Expired once it is older than max_age_s,
    /// whatever its retry budget; a job an envelope says was first taken long ago is not sent.
    func testAJobOlderThanMaxAgeIsDeadLetteredExpired() throws {
        let busy = WorkerFixture.token(1, prefix: "429")
        let f = try WorkerFixture(settings: ["max_age_s": 2, "retry": ["backoff_base_ms": 300, "backoff_max_attempts": 100]]) { config in
            config.faults.tokens = [.init(token: busy, status: 429)]
        }
        let longAgo = Int64(Date().timeIntervalSince1970 * 1000) - 600_000
        let stale = String(
            decoding: JobEnvelope.wrap(job: ArraySlice(WorkerFixture.job(2).utf8), meta: .init(attempts: [], since: longAgo)), as: UTF8.self)
        try f.enqueue([WorkerFixture.job(1, prefix: "429"), stale, WorkerFixture.job(3)])
        let started = Date()
        try f.startWorker()
        try f.waitForOutcomes(3, timeout: 30)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1, "dead_lettered": 2])
        let dead = Dictionary(uniqueKeysWithValues: try f.records(f.keys.deadLetters).map { ($0["job_id"] as? String ?? "?", $0) })
        XCTAssertEqual(dead["job-1"]?["reason"] as? String, "Expired")
        XCTAssertTrue((dead["job-1"]?["detail"] as? String ?? "").contains("max_age_s"), "\(dead)")
        XCTAssertGreaterThanOrEqual((dead["job-1"]?["attempts"] as? [Any])?.count ?? 0, 2, "tried while it was young")
        XCTAssertEqual(dead["job-2"]?["reason"] as? String, "Expired")
        XCTAssertLessThan(Date().timeIntervalSince(started), 20, "ended by its age, not its retry budget")
        let sent = Set(try f.mock.logEntries().compactMap { $0["token"] as? String })
        XCTAssertFalse(sent.contains(WorkerFixture.token(2)), "the stale job was never sent")
        XCTAssertTrue(sent.contains(WorkerFixture.token(3)))
    }

    func testMaxAgeIsCheckedAtStart() throws {
        let f = try WorkerFixture(settings: ["max_age_s": 0])
        let w = try f.startWorker("refused")
        XCTAssertEqual(w.wait(timeout: 30), 2)
        XCTAssertTrue(w.output.contains("max_age_s must be in 1...2592000, got 0"), w.output)
    }
}
