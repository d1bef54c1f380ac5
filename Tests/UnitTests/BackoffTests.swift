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

final class BackoffTests: XCTestCase {
    func testBackoffGrowsWithJitterUpToTheCap() {
        var b = Backoff(baseMs: 100, capMs: 1000)
        var g = SystemRandomNumberGenerator()
        let delays = (0..<8).map { _ in b.nextDelayMs(using: &g) }
        XCTAssertTrue((50...100).contains(delays[0]))
        XCTAssertTrue((100...200).contains(delays[1]))
        XCTAssertTrue((200...400).contains(delays[2]))
        XCTAssertTrue(delays[5...].allSatisfy { (500...1000).contains($0) })
        b.reset()
        XCTAssertTrue((50...100).contains(b.nextDelayMs(using: &g)))
    }
}
