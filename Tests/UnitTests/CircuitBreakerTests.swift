import APNSMock
import APNSTransport
import APNSWorker
import Configuration
import Foundation
import TLS
import Telemetry
import XCTest

final class CircuitBreakerTests: XCTestCase {
    func testCircuitBreakerPausesProbesAndCloses() {
        var b = CircuitBreaker(pauseMs: 100, probeTimeoutMs: 1000)
        XCTAssertEqual(b.allowance(nowMs: 0), .max)
        let pause = b.failed(nowMs: 1000)
        XCTAssertTrue((100...200).contains(pause))
        XCTAssertEqual(b.allowance(nowMs: 1050), 0)
        XCTAssertEqual(b.allowance(nowMs: 1000 + UInt64(pause)), 1, "one probe once the pause is over")
        XCTAssertEqual(b.allowance(nowMs: 1000 + UInt64(pause) + 1), 0, "and only one")
        let second = b.failed(nowMs: 2000)
        XCTAssertGreaterThan(second, 150, "pauses grow")
        XCTAssertEqual(b.allowance(nowMs: 2000 + UInt64(second)), 1)
        XCTAssertEqual(b.allowance(nowMs: 2000 + UInt64(second) + 1000), 1, "a probe lost with its connection is replaced")
        b.succeeded()
        XCTAssertEqual(b.allowance(nowMs: 10_000), .max)
    }
}
