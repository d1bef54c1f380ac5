import Foundation
import TestSupport
import XCTest

/// Every record names its job, as the job named itself, even when the job was refused for
/// another field, and carries the producer's `meta` (issue 28, item 1).
final class RecordNamingTests: XCTestCase {
    func testEveryRecordNamesItsJobAndCarriesItsMeta() throws {
        let f = try WorkerFixture()
        let token = WorkerFixture.token(1)
        let huge = String(repeating: "x", count: 1_000_000)
        try f.enqueue([
            #"{"id":"j-unknown","app":"legacy","token":"\#(token)","meta":{"trace":"t-1"},"payload":{"aps":{"alert":"a"}}}"#,
            #"{"id":"j-prio","app":"default","token":"\#(token)","priority":7,"meta":{"trace":"t-2"},"payload":{"aps":{"alert":"a"}}}"#,
            #"{"id":"j-token","token":"\#(String(repeating: "zz", count: 32))","topic":"\#(f.mock.files.topic)","payload":{"aps":{"alert":"a"}}}"#,
            #"{"id":"j-huge","app":"\#(huge)","token":"\#(token)","payload":{"aps":{"alert":"a"}}}"#,
            #"{"id":"j-ok","token":"\#(token)","meta":{"trace":"t-5","campaign":7},"payload":{"aps":{"alert":"a"}}}"#,
            #"{"id":"j-bigmeta","token":"\#(token)","meta":{"x":"\#(String(repeating: "m", count: 2000))"},"payload":{"aps":{"alert":"a"}}}"#,
        ])
        try f.startWorker()
        try f.waitForOutcomes(6)
        let results = Dictionary(uniqueKeysWithValues: try f.records(f.keys.results).map { ($0["job_id"] as? String ?? "?", $0) })
        let dead = Dictionary(uniqueKeysWithValues: try f.records(f.keys.deadLetters).map { ($0["job_id"] as? String ?? "?", $0) })
        XCTAssertEqual(Set(results.keys), ["j-unknown", "j-prio", "j-token", "j-huge", "j-ok", "j-bigmeta"])
        XCTAssertEqual(Set(dead.keys), ["j-unknown", "j-prio", "j-token", "j-huge", "j-bigmeta"])

        for record in [results["j-unknown"]!, dead["j-unknown"]!] {
            XCTAssertEqual(record["app"] as? String, "legacy", "the app the job named")
            XCTAssertEqual(record["token"] as? String, token)
            XCTAssertEqual((record["meta"] as? [String: Any])?["trace"] as? String, "t-1")
        }
        XCTAssertEqual(dead["j-prio"]?["reason"] as? String, "BadPriority")
        XCTAssertEqual(dead["j-prio"]?["app"] as? String, "default")
        XCTAssertEqual((dead["j-prio"]?["meta"] as? [String: Any])?["trace"] as? String, "t-2")
        XCTAssertEqual(dead["j-token"]?["token"] as? String, String(repeating: "zz", count: 32), "the token as given")
        XCTAssertEqual(dead["j-token"]?["topic"] as? String, f.mock.files.topic)
        XCTAssertEqual((results["j-ok"]?["meta"] as? [String: Any])?["campaign"] as? Int, 7, "a delivered job's record carries its meta")
        XCTAssertEqual(dead["j-bigmeta"]?["reason"] as? String, "MetaTooLarge")

        // A megabyte app name makes no megabyte detail, nor a megabyte result.
        let rawDead = try f.connect().command(["XREVRANGE", f.keys.deadLetters, "+", "-"]).array.compactMap { $0.array[1].array[1].text }
        let hugeDead = try XCTUnwrap(rawDead.first { $0.contains("j-huge") })
        XCTAssertLessThan(hugeDead.utf8.count, 1_010_000, "the job once, the detail bounded")
        let rawResults = try f.connect().command(["XREVRANGE", f.keys.results, "+", "-"]).array.compactMap { $0.array[1].array[1].text }
        XCTAssertLessThan(try XCTUnwrap(rawResults.first { $0.contains("j-huge") }).utf8.count, 4096)

        // Counted under a configured app, or "-" for one no app is; listed by the app they named.
        let stats = try f.stats()
        XCTAssertEqual(stats["dead_lettered:default"], 3, "\(stats)")  // BadPriority, the bad token, the big meta
        XCTAssertEqual(stats["dead_lettered:-"], 2, "\(stats)")
        XCTAssertNil(stats["dead_lettered:legacy"], "a job cannot make counters of its own")
    }
}
