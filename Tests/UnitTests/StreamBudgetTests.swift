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

final class StreamBudgetTests: XCTestCase {
    func testStreamBudgetStartsAtOneUntilFirstSuccessThenFollowsSettings() {
        var b = StreamBudget(localLimit: 500, needsFirstSuccess: true)
        XCTAssertEqual(b.available, 1)
        b.settingsReceived(maxConcurrentStreams: 1000)
        XCTAssertEqual(b.available, 1)
        b.opened()
        XCTAssertEqual(b.available, 0)
        b.succeeded()
        XCTAssertEqual(b.available, 499)
        b.settingsReceived(maxConcurrentStreams: 1)
        XCTAssertEqual(b.available, 0, "never above the live server limit")
        b.closed()
        XCTAssertEqual(b.available, 1)
        b.settingsReceived(maxConcurrentStreams: 10)
        XCTAssertEqual(b.available, 10)
        b.goAway()
        XCTAssertEqual(b.available, 0)
        var cert = StreamBudget(localLimit: 5, needsFirstSuccess: false)
        cert.settingsReceived(maxConcurrentStreams: 100)
        XCTAssertEqual(cert.available, 5)
    }
}
