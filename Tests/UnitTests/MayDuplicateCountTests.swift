import Telemetry
import XCTest

/// Resends that may reach a device twice are counted by cause in the metrics, and gathered for
/// the stats hash until the worker writes them there.
final class MayDuplicateCountTests: XCTestCase {
    func testResendsAreCountedByCauseAndGatheredForTheStatsHash() {
        let metrics = Metrics()
        metrics.mayDuplicate(3, cause: "connection_lost")
        metrics.mayDuplicate(2, cause: "handed_back")
        metrics.mayDuplicate(0, cause: "timed_out")
        let text = metrics.render()
        XCTAssertTrue(text.contains(#"apns_resends_may_duplicate_total{cause="connection_lost"} 3"#), text)
        XCTAssertTrue(text.contains(#"apns_resends_may_duplicate_total{cause="handed_back"} 2"#), text)
        XCTAssertFalse(text.contains(#"cause="timed_out""#), "a cause with nothing to count makes no series")
        XCTAssertEqual(metrics.takeMayDuplicate(), 5)
        XCTAssertEqual(metrics.takeMayDuplicate(), 0, "taken once")
        metrics.returnMayDuplicate(5)  // Redis did not take it
        XCTAssertEqual(metrics.takeMayDuplicate(), 5)
    }
}
