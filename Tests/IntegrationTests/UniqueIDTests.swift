import Foundation
import TestSupport
import XCTest

/// `apns-unique-id` (issue 31, item 4): APNs's development environment answers with it, the key
/// to the Delivery Log of Apple's Push Notifications Console, and results carry it.
final class UniqueIDTests: XCTestCase {
    private func results(development: Bool) throws -> [String: [String: Any]] {
        let f = try WorkerFixture { config in
            config.environment = development ? "development" : "production"
            config.faults.tokens = [.init(tokenPrefix: "f0f0", status: 400, reason: "BadTopic")]
        }
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(1), WorkerFixture.job(2, prefix: "f0f0")])
        try f.waitForOutcomes(2)
        return Dictionary(uniqueKeysWithValues: try f.records(f.keys.results).map { ($0["job_id"] as! String, $0) })
    }

    func testResultsCarryTheUniqueIDOfTheDevelopmentEnvironment() throws {
        let records = try results(development: true)
        for job in ["job-1", "job-2"] {
            let id = try XCTUnwrap(records[job]?["apns_unique_id"] as? String, "\(records[job] ?? [:])")
            XCTAssertNotNil(UUID(uuidString: id), id)
            XCTAssertNotEqual(id, records[job]?["apns_id"] as? String)
        }
        XCTAssertEqual(records["job-1"]?["status"] as? String, "ok")
        XCTAssertEqual(records["job-2"]?["status"] as? String, "failed")
        XCTAssertNotEqual(records["job-1"]?["apns_unique_id"] as? String, records["job-2"]?["apns_unique_id"] as? String)
    }

    func testProductionAnswersCarryNoneAndResultsNameNone() throws {
        let records = try results(development: false)
        XCTAssertEqual(records.count, 2)
        for record in records.values { XCTAssertNil(record["apns_unique_id"], "\(record)") }
    }
}
