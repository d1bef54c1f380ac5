import APNSCore
import APNSTransport
import Foundation
import TLS
import TestSupport
import XCTest

@testable import APNSMock

/// The mock's broadcast path and channel-management API check what Apple documents
/// (apns-protocol.md §3), authentication first, with the reasons of §3.3.
final class MockBroadcastTests: XCTestCase {
    var dir: TemporaryDirectory!
    var validator: MockValidator!
    var channels: MockChannels!
    var token = ""
    var bundle = ""
    let update = #"{"aps":{"event":"update","timestamp":1,"content-state":{"s":1}}}"#

    override func setUpWithError() throws {
        dir = try TemporaryDirectory("apnsw-broadcast")
        let files = try MockCredentials.make(in: dir.path)
        var config = try MockConfiguration.load(path: files.mockConfigFile)
        config.broadcastDisabled = ["com.example.app.off"]
        config.keys[0].topics.append("com.example.app.off")
        let now = Int64(Date().timeIntervalSince1970)
        validator = try MockValidator(configuration: config, now: { now })
        channels = MockChannels(limit: 3)
        bundle = files.topic
        let key = try ES256PrivateKey(pem: [UInt8](XCTUnwrap(FileManager.default.contents(atPath: files.p8File))))
        token = try JWTProvider(teamID: files.teamID, keyID: files.keyID, key: key, clock: { now }).current.token
    }

    override func tearDown() {
        dir = nil
        super.tearDown()
    }

    private func request(_ fields: [String: String?], body: String) -> MockRequest {
        var all: [String: String?] = [":method": "POST", ":scheme": "https", "authorization": "bearer \(token)"]
        for (k, v) in fields { all[k] = v }
        return MockRequest(stream: 1, headers: all.compactMap { k, v in v.map { (k, $0) } }.sorted { $0.0 < $1.0 }, body: Array(body.utf8))
    }

    private func text(_ d: MockDecision) -> String { ([String(d.status)] + (d.reason.map { [$0.rawValue] } ?? [])).joined(separator: " ") }

    private func broadcast(_ overrides: [String: String?] = [:], body: String? = nil, to app: String? = nil) -> String {
        var fields: [String: String?] = [
            "apns-push-type": "liveactivity", "apns-channel-id": overrides["channel"] ?? nil, "apns-expiration": "0", "apns-priority": "10",
        ]
        for (k, v) in overrides where k != "channel" { fields[k] = v }
        let path = "/4/broadcasts/apps/" + (app ?? bundle)
        fields[":path"] = path
        var auth = MockValidator.ConnectionAuth()
        return text(validator.decideBroadcast(request(fields, body: body ?? update), path: path, auth: &auth, channels: channels))
    }

    private func manage(_ method: String, _ path: String, channel: String? = nil, body: String = "") -> MockDecision {
        var auth = MockValidator.ConnectionAuth()
        return validator.decideManagement(
            request([":method": method, ":path": path, "apns-channel-id": channel], body: body), auth: &auth, channels: channels)
    }

    func testABroadcastIsCheckedAsAppleDocumentsIt() throws {
        let quiet = try XCTUnwrap(channels.create(bundle: bundle, storage: .none))
        let keeping = try XCTUnwrap(channels.create(bundle: bundle, storage: .mostRecent))
        XCTAssertEqual(broadcast(["channel": quiet]), "200")
        XCTAssertEqual(broadcast(["channel": keeping, "apns-expiration": "1800000000", "apns-priority": "1"]), "200")
        XCTAssertEqual(broadcast(["channel": quiet, "authorization": nil]), "403 MissingProviderToken", "authentication first")
        XCTAssertEqual(broadcast(["channel": quiet], to: "com.someone.else"), "403 TopicMismatch")
        XCTAssertEqual(broadcast(["channel": quiet, "apns-topic": bundle + ".push-type.liveactivity"]), "400 TopicDisallowed")
        XCTAssertEqual(broadcast(["channel": quiet], to: "com.example.app.off"), "400 FeatureNotEnabled")
        XCTAssertEqual(broadcast(["channel": quiet, "apns-push-type": nil]), "400 MissingPushType")
        XCTAssertEqual(broadcast(["channel": quiet, "apns-push-type": "alert"]), "400 InvalidPushType")
        XCTAssertEqual(broadcast([:]), "400 MissingChannelId")
        XCTAssertEqual(broadcast(["channel": "not base64!"]), "400 BadChannelId")
        XCTAssertEqual(broadcast(["channel": "dW5rbm93bg=="]), "400 ChannelNotRegistered")
        XCTAssertEqual(broadcast(["channel": quiet, "apns-priority": "7"]), "400 BadPriority")
        XCTAssertEqual(broadcast(["channel": quiet, "apns-expiration": nil]), "400 BadExpirationDate")
        XCTAssertEqual(broadcast(["channel": quiet, "apns-expiration": "1800000000"]), "400 BadExpirationDate", "a channel that stores nothing")
        XCTAssertEqual(broadcast(["channel": quiet, "apns-request-id": "nope"]), "400 BadMessageId")
        XCTAssertEqual(broadcast(["channel": quiet], body: ""), "400 PayloadEmpty")
        let big = #"{"aps":{"event":"update","timestamp":1},"pad":""# + String(repeating: "x", count: 5100) + #""}"#
        XCTAssertEqual(broadcast(["channel": quiet], body: big), "413 PayloadTooLarge")
        XCTAssertEqual(broadcast(["channel": quiet], body: #"{"aps":{"event":"start","timestamp":1}}"#), "400 BadRequestPayload")
        XCTAssertEqual(broadcast(["channel": quiet], body: "{nope"), "400 BadRequestPayload")
        XCTAssertEqual(broadcast(["channel": quiet, ":method": "GET"]), "405 MethodNotAllowed")
        XCTAssertTrue(channels.delete(bundle: bundle, id: quiet))
        XCTAssertEqual(broadcast(["channel": quiet]), "400 ChannelNotRegistered", "a deleted channel")
    }

    func testChannelsAreCreatedReadListedAndDeletedUpToTheLimit() throws {
        let base = "/1/apps/\(bundle)"
        var made: [String] = []
        for policy in [0, 1, 0] {
            let d = manage("POST", base + "/channels", body: #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#)
            XCTAssertEqual(d.status, 201)
            XCTAssertEqual(d.idHeader, .requestID)
            made.append(try XCTUnwrap(d.channelID))
        }
        XCTAssertEqual(Set(made).count, 3)
        XCTAssertTrue(made.allSatisfy(BroadcastRules.isChannelID))
        let full = manage("POST", base + "/channels", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#)
        XCTAssertEqual(text(full), "400 CannotCreateChannelConfig", "the app's limit (3 here, 10,000 by default)")
        let read = manage("GET", base + "/channels", channel: made[1])
        XCTAssertEqual(read.status, 200)
        let body = try JSONSerialization.jsonObject(with: Data(XCTUnwrap(read.body))) as? [String: Any]
        XCTAssertEqual(body?["message-storage-policy"] as? Int, 1)
        XCTAssertEqual(body?["push-type"] as? String, "LiveActivity")
        let list = try JSONSerialization.jsonObject(with: Data(XCTUnwrap(manage("GET", base + "/all-channels").body))) as? [String: Any]
        XCTAssertEqual(Set(list?["channels"] as? [String] ?? []), Set(made))
        XCTAssertEqual(manage("DELETE", base + "/channels", channel: made[0]).status, 204)
        XCTAssertEqual(text(manage("DELETE", base + "/channels", channel: made[0])), "400 ChannelNotRegistered")
        XCTAssertEqual(text(manage("GET", base + "/channels", channel: made[0])), "400 ChannelNotRegistered")
        XCTAssertEqual(text(manage("GET", base + "/channels")), "400 MissingChannelId")
        XCTAssertEqual(text(manage("GET", base + "/channels", channel: "a b")), "400 BadChannelId")
        XCTAssertEqual(text(manage("POST", base + "/channels", body: #"{"push-type":"LiveActivity"}"#)), "400 MissingChannelQueueSize")
        XCTAssertEqual(
            text(manage("POST", base + "/channels", body: #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#)), "400 MissingChannelQueueSize"
        )
        XCTAssertEqual(text(manage("POST", base + "/channels", body: #"{"message-storage-policy":0}"#)), "400 MissingPushType")
        XCTAssertEqual(text(manage("POST", base + "/channels", body: #"{"message-storage-policy":0,"push-type":"Alert"}"#)), "400 InvalidPushType")
        XCTAssertEqual(
            text(manage("POST", base + "/channels", body: #"{"message-storage-policy":0,"push-type":"LiveActivity","x":1}"#)), "400 BadRequestParams")
        XCTAssertEqual(text(manage("POST", base + "/channels", body: "nope")), "400 BadRequestPayload")
        XCTAssertEqual(text(manage("PUT", base + "/channels", channel: made[1])), "405 MethodNotAllowed")
        XCTAssertEqual(text(manage("GET", "/1/apps/com.someone.else/all-channels")), "403 TopicMismatch")
        XCTAssertEqual(text(manage("GET", "/3/device/abcd")), "404 BadPath")
        XCTAssertEqual(
            manage("POST", base + "/channels", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#).status, 201, "room again")
    }
}
