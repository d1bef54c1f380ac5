import APNSCore
import Foundation
import TestSupport
import XCTest

/// Broadcast jobs end to end (issue 31, item 1): the worker sends a `channel` job as
/// `POST /4/broadcasts/apps/<bundle>` to the mock, which checks it as APNs does; the result names
/// the channel and the answer's `apns-request-id`; a deleted channel's job ends in the
/// invalid-channel feed; a job the broadcast rules refuse never reaches APNs.
final class BroadcastTests: XCTestCase {
    static let update = #"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"score":"1-0"}}}"#

    static func job(_ id: String, _ channel: String, _ extra: String = "", payload: String = update) -> String {
        #"{"id":"\#(id)","channel":"\#(channel)"\#(extra),"payload":\#(payload)}"#
    }

    func testABroadcastGoesToItsChannelAndAGoneChannelEndsInTheChannelFeed() throws {
        let f = try WorkerFixture()
        let bundle = f.mock.files.topic
        let quiet = try XCTUnwrap(f.mock.server.createChannel(bundle: bundle, storage: .none))
        let keeping = try XCTUnwrap(f.mock.server.createChannel(bundle: bundle, storage: .mostRecent))
        let gone = try XCTUnwrap(f.mock.server.createChannel(bundle: bundle, storage: .none))
        XCTAssertTrue(f.mock.server.deleteChannel(bundle: bundle, id: gone))
        let requestID = "0a0b0c0d-1111-4222-8333-444455556666"
        try f.startWorker()
        try f.enqueue([
            Self.job("plain", quiet),
            Self.job("named", quiet, #","apns_id":"\#(requestID)","priority":5"#),
            Self.job("stored", keeping, #","expiration":\#(Int(Date().timeIntervalSince1970) + 3600),"channel_storage":"most-recent""#),
            Self.job("gone", gone),
            Self.job(
                "start", quiet,
                payload: #"{"aps":{"event":"start","timestamp":1,"content-state":{},"attributes-type":"A","attributes":{},"alert":"x"}}"#),
            Self.job("stores-nothing", quiet, #","channel_storage":"none","expiration":1800000000"#),
            Self.job("fanout", quiet, #","token":"\#(WorkerFixture.token(1))""#),
            WorkerFixture.job(1),
        ])
        try f.waitForOutcomes(8)
        XCTAssertEqual(try f.finalStats(), ["delivered": 4, "invalid_channel": 1, "dead_lettered": 3])
        let results = Dictionary(uniqueKeysWithValues: try f.records(f.keys.results).map { ($0["job_id"] as! String, $0) })
        for id in ["plain", "named", "stored"] {
            XCTAssertEqual(results[id]?["status"] as? String, "ok", id)
            XCTAssertNotNil(results[id]?["channel"] as? String, id)
            XCTAssertNil(results[id]?["token"], id)
            XCTAssertNil(results[id]?["apns_id"], "a broadcast's answer has a request id: \(id)")
            XCTAssertEqual(results[id]?["topic"] as? String, bundle, id)
        }
        XCTAssertEqual(results["named"]?["apns_request_id"] as? String, requestID)
        let generated = try XCTUnwrap(results["plain"]?["apns_request_id"] as? String)
        XCTAssertNotNil(UUID(uuidString: generated))
        XCTAssertEqual(results["job-1"]?["status"] as? String, "ok", "device pushes go on beside broadcasts")
        XCTAssertNotNil(results["job-1"]?["apns_id"])

        let feed = try f.records(f.keys.invalidChannels)
        XCTAssertEqual(feed.count, 1)
        XCTAssertEqual(feed.first?["channel"] as? String, gone)
        XCTAssertEqual(feed.first?["reason"] as? String, "ChannelNotRegistered")
        XCTAssertEqual(feed.first?["job_id"] as? String, "gone")
        XCTAssertEqual(results["gone"]?["status"] as? String, "failed")
        XCTAssertTrue(try f.records(f.keys.invalidTokens).isEmpty, "the device-token feed is not the channel one")

        let dead = Dictionary(uniqueKeysWithValues: try f.records(f.keys.deadLetters).map { ($0["job_id"] as! String, $0) })
        XCTAssertEqual(dead["start"]?["reason"] as? String, "BadPayloadForPushType")
        XCTAssertEqual(dead["stores-nothing"]?["reason"] as? String, "BadExpirationDate")
        XCTAssertEqual(dead["fanout"]?["reason"] as? String, "MalformedJob")
        XCTAssertEqual(dead["start"]?["channel"] as? String, quiet, "a refused broadcast's records name its channel")

        let sent = try f.mock.logEntries().filter { ($0["path"] as? String)?.hasPrefix("/4/") == true }
        XCTAssertEqual(sent.count, 4, "the refused ones never reached APNs")
        for e in sent {
            let h = try XCTUnwrap(e["headers"] as? [String: String])
            XCTAssertEqual(h[":path"], "/4/broadcasts/apps/\(bundle)")
            XCTAssertEqual(h["apns-push-type"], "liveactivity")
            XCTAssertNil(h["apns-topic"])
            XCTAssertNotNil(h["apns-channel-id"])
            XCTAssertNotNil(h["apns-expiration"])
        }
        XCTAssertEqual(Set(sent.compactMap { ($0["headers"] as? [String: String])?["apns-expiration"] }).contains("0"), true)
    }
}
