import APNSCore
import QueueContract
import XCTest

final class ReasonTableTests: XCTestCase {
    func testEveryDocumentedReasonHasItsStatusAndDisposition() {
        // apns-protocol.md §5.2 lists these 32 device-push reasons (plus BadEnvironmentKeyInToken seen in the wild).
        XCTAssertEqual(APNSReason.table.count, 33)
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
        for (reason, info) in APNSReason.table {
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
        let r = APNSRejection.parse(status: 410, body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8), apnsID: "id")
        XCTAssertEqual(r, APNSRejection(status: 410, reason: .unregistered, apnsID: "id", timestamp: 1_700_000_000_123))
        XCTAssertEqual(APNSRejection.parse(status: 400, body: Array(#"{"reason":"BadTopic"}"#.utf8), apnsID: nil).reason, .badTopic)
        XCTAssertEqual(APNSRejection.parse(status: 502, body: Array("<html>".utf8), apnsID: nil).reason.rawValue, "<html>")
        XCTAssertEqual(APNSRejection.parse(status: 503, body: [], apnsID: nil).reason.rawValue, "HTTP503")
    }

    func testKeysShareOneHashTag() {
        let k = QueueKeys(queue: "push")
        let all = [k.jobs, k.batches(worker: "w1"), k.batch(worker: "w1", id: "a-1"), k.batchDone(worker: "w1", id: "a-1"),
                   k.takeback(worker: "w1"), k.staging(worker: "w1"), k.handleCounter, k.workers, k.results,
                   k.invalidTokens, k.deadLetters, k.stats]
        XCTAssertEqual(Set(all).count, all.count)
        for key in all { XCTAssertTrue(key.hasPrefix("apns:{push}:"), key) }
    }

    func testRequestHeaders() throws {
        struct Sink: HeaderSink {
            var fields: [(String, String, Bool)] = []
            mutating func add(_ name: StaticString, _ value: String, sensitive: Bool) { fields.append(("\(name)", value, sensitive)) }
        }
        let token = String(repeating: "0f", count: 32)
        let job = try Job.parse(Array(#"{"token":"\#(token)","push_type":"voip","priority":5,"expiration":0,"collapse_id":"c","apns_id":"123e4567-e89b-12d3-a456-426655440000","payload":{"a":1}}"#.utf8))
        var sink = Sink()
        APNSRequestHeaders.write(job: job, token: job.tokens[0], topic: "b.voip", authority: "api.push.apple.com", bearer: "JWT", into: &sink)
        let map = Dictionary(uniqueKeysWithValues: sink.fields.map { ($0.0, $0.1) })
        XCTAssertEqual(map, [":method": "POST", ":scheme": "https", ":path": "/3/device/\(token)", ":authority": "api.push.apple.com",
                             "authorization": "bearer JWT", "apns-push-type": "voip", "apns-topic": "b.voip", "apns-priority": "5",
                             "apns-expiration": "0", "apns-collapse-id": "c", "apns-id": "123e4567-e89b-12d3-a456-426655440000"])
        XCTAssertEqual(Set(sink.fields.filter(\.2).map(\.0)), [":path", "apns-id"])
        var bare = Sink()
        let simple = try Job.parse(Array(#"{"token":"\#(token)","payload":{"a":1}}"#.utf8))
        APNSRequestHeaders.write(job: simple, token: simple.tokens[0], topic: "b", authority: "h", bearer: nil, into: &bare)
        XCTAssertEqual(bare.fields.map(\.0), [":method", ":scheme", ":path", ":authority", "apns-push-type", "apns-topic"])
    }

    /// Values kept once for a run of requests give each request the same fields as writing it
    /// alone, and a request that differs in any shared value does not fit them.
    func testSharedHeaderValuesGiveTheSameFieldsAndFitOnlyTheirRequests() throws {
        struct KeepingSink: HeaderSink {
            var kept: [String] = []
            var fields: [(String, String, Bool)] = []
            mutating func keep(_ value: String) -> Int { kept.append(value); return kept.count - 1 }
            mutating func add(_ name: StaticString, kept value: Int, sensitive: Bool) { fields.append(("\(name)", kept[value], sensitive)) }
            mutating func add(_ name: StaticString, _ value: String, sensitive: Bool) { fields.append(("\(name)", value, sensitive)) }
            mutating func add(_ name: StaticString, _ prefix: String, utf8 value: UnsafeBufferPointer<UInt8>, sensitive: Bool) {
                fields.append(("\(name)", prefix + String(decoding: value, as: UTF8.self), sensitive))
            }
        }
        struct Sink: HeaderSink {
            var fields: [(String, String, Bool)] = []
            mutating func add(_ name: StaticString, _ value: String, sensitive: Bool) { fields.append(("\(name)", value, sensitive)) }
        }
        let jobs = try [#""priority":5,"expiration":7"#, #""apns_id":"123e4567-e89b-12d3-a456-426655440000""#].enumerated().map { i, extra in
            try Job.parse(Array(#"{"token":"\#(String(repeating: "0\(i)", count: 32))","push_type":"voip",\#(extra),"payload":{"a":1}}"#.utf8))
        }
        var sink = KeepingSink()
        let shared = APNSRequestHeaders.share(authority: "h", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: Priority(5), into: &sink)
        XCTAssertEqual(sink.kept.count, 7)
        for job in jobs {
            sink.fields.removeAll()
            var alone = Sink()
            let sharedFit = shared.fits(authority: "h", bearer: "JWT", pushType: job.pushType, topic: "b.voip", priority: job.priority)
            let own = sharedFit ? shared : APNSRequestHeaders.share(authority: "h", bearer: "JWT", pushType: job.pushType, topic: "b.voip",
                                                                    priority: job.priority, into: &sink)
            APNSRequestHeaders.write(job: job, token: job.token, shared: own, into: &sink)
            APNSRequestHeaders.write(job: job, token: job.token, topic: "b.voip", authority: "h", bearer: "JWT", into: &alone)
            XCTAssertEqual(sink.fields.map { "\($0)" }, alone.fields.map { "\($0)" })
        }
        XCTAssertTrue(shared.fits(authority: "h", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: Priority(5)))
        XCTAssertFalse(shared.fits(authority: "g", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: Priority(5)))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT2", pushType: .voip, topic: "b.voip", priority: Priority(5)))
        XCTAssertFalse(shared.fits(authority: "h", bearer: nil, pushType: .voip, topic: "b.voip", priority: Priority(5)))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT", pushType: .alert, topic: "b.voip", priority: Priority(5)))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT", pushType: .voip, topic: "b", priority: Priority(5)))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: nil))
    }
}
