import XCTest

@testable import APNSTransport

/// When a connection that refuses streams is given up (issue 43, item 2).
final class RefusalWatchTests: XCTestCase {
    func testAConnectionGoesAfterRefusingEverythingForTheWindow() {
        var w = RefusalWatch(minimum: 5, windowMs: 2000)
        for t in stride(from: UInt64(0), to: 2000, by: 100) { XCTAssertFalse(w.refused(atMs: 10_000 + t), "within the window: \(t)") }
        XCTAssertTrue(w.refused(atMs: 12_000), "every stream refused for 2 s")
        XCTAssertEqual(w.refusingMs(atMs: 12_000), 2000)
    }

    func testAnAnswerOrTooFewRefusalsKeepIt() {
        var w = RefusalWatch(minimum: 5, windowMs: 2000)
        XCTAssertFalse(w.refused(atMs: 0))
        XCTAssertFalse(w.refused(atMs: 5000), "two refusals over 5 s are not every stream")
        for t in [5001, 5002] as [UInt64] { XCTAssertFalse(w.refused(atMs: t)) }
        w.answered()
        for t in [6000, 6500, 7000, 7500] as [UInt64] { XCTAssertFalse(w.refused(atMs: t)) }
        XCTAssertFalse(w.refused(atMs: 7900), "the window starts again after an answer")
        XCTAssertTrue(w.refused(atMs: 8000))
        XCTAssertEqual(w.refusingMs(atMs: 8000), 2000)
    }
}
