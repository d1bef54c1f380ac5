import Foundation
import TestSupport
import XCTest

/// `results: all | failures | none` (issue 30, item 6): which outcomes get a record in the
/// results stream. Deliveries straight away (the completion transaction), deliveries after a
/// 429 (the schedule, then the complete script), invalid tokens and dead letters, in each mode.
final class ResultsModeTests: XCTestCase {
    private func run(_ mode: String) throws -> (results: [[String: Any]], dead: Int, invalid: Int, stats: [String: Int]) {
        let f = try WorkerFixture(settings: ["results": mode]) { config in
            config.faults.tokens = [.init(tokenPrefix: "dead", status: 410), .init(tokenPrefix: "429", status: 429, attempts: 1)]
        }
        try f.enqueue(
            (0..<100).map { WorkerFixture.job($0) } + (100..<105).map { WorkerFixture.job($0, prefix: "429") }
                + (105..<110).map { WorkerFixture.job($0, prefix: "dead") } + [#"{"v":1,"id":"bad","token":"zz","payload":{}}"#])
        let w = try f.startWorker("w-results-\(mode)")
        try f.waitForOutcomes(111, timeout: 60)
        w.signal(SIGTERM)
        XCTAssertEqual(w.wait(timeout: 20), 0, w.output)
        return (
            try f.records(f.keys.results), try f.records(f.keys.deadLetters).count, try f.records(f.keys.invalidTokens).count,
            try f.finalStats()
        )
    }

    func testEachModeWritesTheResultsItNamesAndCountsEverything() throws {
        for mode in ["all", "failures", "none"] {
            let r = try run(mode)
            XCTAssertEqual(r.stats, ["delivered": 105, "invalid_token": 5, "dead_lettered": 1], mode)
            XCTAssertEqual(r.dead, 1, "\(mode): dead letters are always written")
            XCTAssertEqual(r.invalid, 5, "\(mode): invalid tokens are always written")
            let delivered = r.results.filter { $0["status"] as? String == "ok" }.count
            let failed = r.results.count - delivered
            switch mode {
            case "all":
                XCTAssertEqual(delivered, 105, "every delivery, the retried ones too")
                XCTAssertEqual(failed, 6)
            case "failures":
                XCTAssertEqual(delivered, 0, "no delivery's record")
                XCTAssertEqual(failed, 6, "every failure's")
            default:
                XCTAssertEqual(r.results.count, 0, "no result at all")
            }
        }
    }

    func testAnUnknownModeStopsTheWorkerNamingTheSetting() throws {
        let f = try WorkerFixture(settings: ["results": "some"])
        let w = try f.startWorker("w-results-bad")
        XCTAssertEqual(w.wait(timeout: 20), 2, w.output)
        XCTAssertTrue(w.output.contains("results must be all, failures or none, got some"), w.output)
    }
}
