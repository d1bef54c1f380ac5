import APNSTransport
import XCTest

final class TokenBucketTests: XCTestCase {
    /// Over ten simulated seconds of a sender that always has work, a cap of 100 a second lets
    /// 1,000 go (and the burst), and no one second carries more than the cap and its burst.
    func testACapHoldsOverTimeWithASmallBurst() {
        var b = TokenBucket(perSecond: 100, nowMs: 0)
        var perSecond = [Int](repeating: 0, count: 10)
        for ms in stride(from: UInt64(0), to: 10_000, by: 7) {
            let n = b.available(nowMs: ms)
            b.take(n)
            perSecond[Int(ms / 1000)] += n
        }
        XCTAssertEqual(perSecond.reduce(0, +), 1000, accuracy: 12)
        XCTAssertTrue(perSecond.allSatisfy { $0 <= 110 }, "\(perSecond)")
        XCTAssertEqual(b.available(nowMs: 10_000), 0)
        XCTAssertGreaterThan(b.msUntilNext, 0)
        XCTAssertLessThanOrEqual(b.msUntilNext, 10)
    }
}
