import APNSCore
import QueueContract
import XCTest

final class ReasonTableTests: XCTestCase {
    func testEveryDocumentedReasonHasItsStatusAndDisposition() {
        // apns-protocol.md §5.2 lists 32 device-push reasons (plus BadEnvironmentKeyInToken seen in the wild), and
        // §3.3 ten more for broadcasts and channels (plus MissingChannelQueueSize, observed).
        XCTAssertEqual(APNSReason.apnsTable.count, 44)
        XCTAssertEqual(APNSReason.table.count, 44 + APNSReason.fcmTable.count)
        XCTAssertEqual(APNSReason.channelNotRegistered.info.disposition, .invalidChannel)
        XCTAssertEqual(APNSReason.unregistered.info.status, 410)
        XCTAssertEqual(APNSReason.unregistered.info.disposition, .invalidToken)
        XCTAssertEqual(APNSReason.badDeviceToken.info.disposition, .invalidToken)
        XCTAssertEqual(APNSReason.deviceTokenNotForTopic.info.disposition, .invalidToken)
        XCTAssertEqual(APNSReason.expiredToken.info.disposition, .invalidToken)
        XCTAssertEqual(APNSReason.tooManyRequests.info.disposition, .retry(.tooManyRequests))
        XCTAssertEqual(APNSReason.internalServerError.info.disposition, .retry(.serverError))
        XCTAssertEqual(APNSReason.serviceUnavailable.info.disposition, .retry(.serverError))
        XCTAssertEqual(APNSReason.expiredProviderToken.info.disposition, .refreshAuthAndRetry)
        XCTAssertEqual(APNSReason.tooManyProviderTokenUpdates.info.disposition, .pauseCredential)
        XCTAssertEqual(APNSReason.invalidProviderToken.info.disposition, .pauseCredential)
        XCTAssertEqual(APNSReason.payloadTooLarge.info.status, 413)
        for (reason, info) in APNSReason.apnsTable {
            XCTAssertTrue([400, 403, 404, 405, 410, 413, 429, 500, 503].contains(info.status), "\(reason)")
            XCTAssertFalse(info.meaning.isEmpty)
        }
    }

    func testUnknownReasonsKeepTheirTextAndAreDeadLettered() {
        let r = APNSReason("SomethingNew")
        XCTAssertFalse(r.isKnown)
        XCTAssertEqual(r.info.disposition, .deadLetter)
        XCTAssertEqual(r.rawValue, "SomethingNew")
    }

    func testParsesRejectionBodies() {
        let r = Rejection.parse(status: 410, body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8), apnsID: "id")
        XCTAssertEqual(r, Rejection(status: 410, reason: .unregistered, apnsID: "id", timestamp: 1_700_000_000_123))
        XCTAssertEqual(Rejection.parse(status: 400, body: Array(#"{"reason":"BadTopic"}"#.utf8), apnsID: nil).reason, .badTopic)
        XCTAssertEqual(Rejection.parse(status: 502, body: Array("<html>".utf8), apnsID: nil).reason.rawValue, "<html>")
        XCTAssertEqual(Rejection.parse(status: 503, body: [], apnsID: nil).reason.rawValue, "HTTP503")
    }

}
