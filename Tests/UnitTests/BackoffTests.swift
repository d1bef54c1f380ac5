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

/// Each wait the transport and the fetcher set, by its one home (docs/operations.md, "Why did
/// this job wait?"): the bounds that table gives.
final class WaitHomesTests: XCTestCase {
    func testAnUnansweredSendWaits100MsDoublingTo5sAndGoesAtOnceAfterItsConnectionWent() {
        var g = SplitMix64(seed: 7)
        for _ in 0..<200 {
            XCTAssertEqual(TransportWaits.resendMs(afterUnanswered: 1, connectionGone: true, using: &g), 0, "elsewhere, at once")
            XCTAssertTrue((50...100).contains(TransportWaits.resendMs(afterUnanswered: 1, connectionGone: false, using: &g)))
            XCTAssertTrue((100...200).contains(TransportWaits.resendMs(afterUnanswered: 2, connectionGone: true, using: &g)))
            XCTAssertTrue((2500...5000).contains(TransportWaits.resendMs(afterUnanswered: 12, connectionGone: false, using: &g)))
        }
    }

    func testAPausedPoolsExcessWaitsForThePauseLeftAtLeast5sPlusUpTo2s() {
        var g = SplitMix64(seed: 8)
        for _ in 0..<200 {
            XCTAssertTrue((5000...7000).contains(TransportWaits.deferralMs(pauseLeftMs: 800, retired: false, using: &g)))
            XCTAssertTrue((60_000...62_000).contains(TransportWaits.deferralMs(pauseLeftMs: 60_000, retired: false, using: &g)))
            XCTAssertTrue((1000...3000).contains(TransportWaits.deferralMs(pauseLeftMs: 60_000, retired: true, using: &g)))
        }
        var reconnect = TransportWaits.reconnect(baseMs: 250, capMs: 10_000)
        XCTAssertTrue((125...250).contains(reconnect.nextDelayMs(using: &g)))
    }

    func testASendFCMRefusedForItsTokenWaitsHalfASecond() {
        XCTAssertEqual(TransportWaits.tokenRenewalMs, 500)
    }

    func testARemovedAppsSendsWait30sPlusUpTo5s() {
        var g = SplitMix64(seed: 9)
        let waits = (0..<500).map { _ in AppRouter.parkingMs(using: &g) }
        XCTAssertTrue(waits.allSatisfy { (30_000...35_000).contains($0) })
        XCTAssertGreaterThan(Set(waits).count, 100, "spread out")
    }
}
