import APNSCore
import Foundation
import PointerTricks
import QueueContract
import XCTest

/// Broadcast jobs (issue 31, item 1): a `channel` instead of tokens, checked by the broadcast
/// rules before sending, sent as `POST /4/broadcasts/apps/<bundle>`, and recorded by channel.
final class BroadcastJobTests: XCTestCase {
    static let channel = "dHN0LTEyMzQ1Njc4OTA="
    static let update = #""event":"update","timestamp":1700000000,"content-state":{"score":"1-0"}"#

    static func job(_ extra: String = "", aps: String = update) -> String {
        #"{"id":"b1","channel":"\#(channel)"\#(extra),"payload":{"aps":{\#(aps)}}}"#
    }

    /// nil if the job renders; else its rejection's reason and detail.
    private func refusal(_ job: String) -> String? {
        do throws(JobRejection) {
            _ = try PayloadRenderer.render(try Job.parse(Array(job.utf8)), templates: TemplateLibrary())
            return nil
        } catch {
            return "\(error.reason): \(error.detail)"
        }
    }

    static let padding = String(repeating: "x", count: 4500)
    static let accepted = [
        job(), job(#","push_type":"liveactivity","priority":1"#), job(#","channel_storage":"none","expiration":0"#),
        job(#","channel_storage":"most-recent","expiration":1800000000"#), job(#","expiration":1800000000"#),
        job(aps: #""event":"end","timestamp":1,"content-state":{},"dismissal-date":2"#),
        job(aps: update + #","pad":"\#(padding)""#),
        #"{"channel":"\#(channel)","notification":{"event":"update","timestamp":1,"content_state":{"s":1}}}"#,
    ]
    static let refused: [(String, String)] = [
        (job(#","token":"\#(String(repeating: "ab", count: 32))""#), "MalformedJob"),
        (job(#","tokens":["\#(String(repeating: "ab", count: 32))"]"#), "MalformedJob"),
        (#"{"channel":"not base64!","payload":{"aps":{\#(update)}}}"#, "BadChannelId"),
        (#"{"channel":"","payload":{"aps":{\#(update)}}}"#, "BadChannelId"),
        (job(#","push_type":"alert""#), "InvalidPushType"),
        (job(#","topic":"com.example.app.push-type.liveactivity""#), "TopicDisallowed"),
        (job(#","collapse_id":"c""#), "BadRequestParams"),
        (job(#","channel_storage":"none","expiration":1800000000"#), "BadExpirationDate"),
        (job(#","channel_storage":"all""#), "WrongFieldType"),
        (#"{"token":"\#(String(repeating: "ab", count: 32))","channel_storage":"none","payload":{"aps":{"alert":"x"}}}"#, "WrongFieldType"),
        (job(aps: PushToStartTests.start), "BadPayloadForPushType"),
        (job(aps: #""timestamp":1"#), "BadPayloadForPushType"),
        (job(aps: update + #","pad":"\#(String(repeating: "x", count: 5100))""#), "PayloadTooLarge"),
    ]

    func testABroadcastIsCheckedByTheBroadcastRules() {
        for job in Self.accepted { XCTAssertNil(refusal(job), job) }
        for (job, reason) in Self.refused {
            let why = refusal(job)
            XCTAssertEqual(why?.hasPrefix(reason + ":"), true, "\(job.prefix(200)): \(why ?? "accepted")")
        }
        XCTAssertTrue(refusal(Self.job(aps: PushToStartTests.start))!.contains("cannot start"))
    }

    func testTheSchemaAgrees() throws {
        // A schema cannot count a payload's bytes.
        let samples = Self.accepted + Self.refused.filter { $0.1 != "PayloadTooLarge" }.map(\.0)
        let schemaSays = try JobSchemaFileTests.validate(samples)
        XCTAssertEqual(
            schemaSays, samples.map { refusal($0) == nil }, zip(samples, schemaSays).map { "\($1) \($0.prefix(200))" }.joined(separator: "\n"))
    }

    func testABroadcastJobIsALiveActivityPushToItsChannel() throws {
        let job = try Job.parse(Array(Self.job().utf8))
        XCTAssertTrue(job.isBroadcast)
        XCTAssertEqual(job.channel, Self.channel)
        XCTAssertEqual(job.pushType, .liveactivity)
        XCTAssertTrue(job.token.isAbsent)
        XCTAssertEqual(job.tokenCount, 1, "one send, one outcome")
        XCTAssertEqual(job.maxPayloadBytes, 5120)
    }

    func testTheHeadersAreTheBroadcastOnes() throws {
        struct Sink: HeaderSink {
            var fields: [(String, String)] = []
            mutating func add(_ name: StaticString, _ value: String, sensitive: Bool) { fields.append(("\(name)", value)) }
        }
        let id = "123e4567-e89b-12d3-a456-426655440000"
        let job = try Job.parse(Array(Self.job(#","priority":5,"apns_id":"\#(id)""#).utf8))
        var sink = Sink()
        APNSRequestHeaders.writeBroadcast(job: job, bundle: "com.example.app", authority: "api.push.apple.com", bearer: "JWT", into: &sink)
        XCTAssertEqual(
            Dictionary(uniqueKeysWithValues: sink.fields),
            [
                ":method": "POST", ":scheme": "https", ":path": "/4/broadcasts/apps/com.example.app", ":authority": "api.push.apple.com",
                "authorization": "bearer JWT", "apns-push-type": "liveactivity", "apns-channel-id": Self.channel, "apns-priority": "5",
                "apns-expiration": "0", "apns-request-id": id,
            ])
        XCTAssertEqual(sink.fields.count, 10, "each once, and no apns-topic")
    }

    func testItsRecordsNameTheChannelAndTheRequestID() throws {
        let job = try Job.parse(Array(Self.job().utf8))
        let shared = OutcomeRecord.SharedFields(app: "a", topic: "com.example.app", worker: "w", timeMs: 1)
        let context = OutcomeRecord.Context(handle: 7, lending: UncountedReference(job), token: nil, shared: shared.jsonBytes)
        let id = APNSID("0a0b0c0d-0000-4000-8000-000000000001")
        let result =
            try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(context, delivered: id, rejection: nil, attempts: 1))) as! [String: Any]
        XCTAssertEqual(result["channel"] as? String, Self.channel)
        XCTAssertEqual(result["apns_request_id"] as? String, id.description)
        XCTAssertNil(result["apns_id"])
        XCTAssertNil(result["token"])
        let gone = Rejection(status: 400, reason: .channelNotRegistered, apnsID: nil, timestamp: nil)
        let feed = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.invalidToken(context, rejection: gone))) as! [String: Any]
        XCTAssertEqual(feed["channel"] as? String, Self.channel)
        XCTAssertEqual(feed["reason"] as? String, "ChannelNotRegistered")
        withExtendedLifetime((job, shared)) {}
    }
}
