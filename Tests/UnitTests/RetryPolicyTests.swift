import APNSCore
import Buffers
import Configuration
import Foundation
import PointerTricks
import QueueContract
import Synchronization
import XCTest

@testable import APNSTransport
@testable import APNSWorker

final class RetryPolicyTests: XCTestCase {
    func testBackoffGapsGrowAndStopAtTheLimit() {
        var policy = RetryPolicy()
        policy.backoffBaseMs = 1000
        var g = SystemRandomNumberGenerator()
        var last = 0
        for attempt in 1..<8 {
            guard case .retry(let ms) = policy.decide(.tooManyRequests, attempts: attempt, jobMaxAttempts: nil, using: &g) else {
                return XCTFail("attempt \(attempt) should be retried")
            }
            XCTAssertGreaterThan(ms, last)
            XCTAssertLessThanOrEqual(ms, policy.backoffCapMs)
            last = min(ms, policy.backoffCapMs / 2)
        }
        XCTAssertEqual(policy.decide(.tooManyRequests, attempts: 8, jobMaxAttempts: nil, using: &g), .giveUp)
        XCTAssertEqual(policy.decide(.tooManyRequests, attempts: 2, jobMaxAttempts: 2, using: &g), .giveUp)
    }

    func testServerErrorsGetThreeTriesOneToFiveSecondsApart() {
        let policy = RetryPolicy()
        var g = SystemRandomNumberGenerator()
        for attempt in 1...2 {
            guard case .retry(let ms) = policy.decide(.serverError, attempts: attempt, jobMaxAttempts: nil, using: &g) else {
                return XCTFail("try \(attempt) of 3 should be retried")
            }
            XCTAssertTrue((1000...5000).contains(ms))
        }
        XCTAssertEqual(policy.decide(.serverError, attempts: 3, jobMaxAttempts: nil, using: &g), .giveUp)
    }

}
