import Buffers
import Foundation
import PointerTricks
import QueueContract
import XCTest

@testable import APNSCore

final class JobParsingTests: XCTestCase {
    static let token = String(repeating: "ab", count: 32)

    private func parse(_ text: String) throws(JobRejection) -> Job { try Job.parse(Array(text.utf8)) }

    private func reason(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> String? {
        do {
            _ = try parse(text)
            XCTFail("expected a rejection for \(text)", file: file, line: line)
            return nil
        } catch {
            XCTAssertFalse(error.detail.isEmpty, file: file, line: line)
            return error.reason
        }
    }

    func testParsesEveryField() throws {
        let job = try parse(
            """
            {"v":1,"id":"j-1","app":"shop","token":"\(Self.token.uppercased())","topic":"com.example.app.voip","push_type":"voip",
             "priority":5,"expiration":1800000000,"collapse_id":"c1","apns_id":"123E4567-E89B-12D3-A456-426655440000",
             "payload":{"aps":{"alert":"hi"}, "x": [1, 2]}}
            """)
        XCTAssertEqual(job.id, "j-1")
        XCTAssertEqual(job.app, "shop")
        XCTAssertEqual(job.tokens.map(\.hex), [Self.token])
        XCTAssertEqual(job.topic, "com.example.app.voip")
        XCTAssertEqual(job.pushType, .voip)
        XCTAssertEqual(job.priority, .conserve)
        XCTAssertEqual(job.expiration, 1_800_000_000)
        XCTAssertEqual(job.collapseID, "c1")
        XCTAssertEqual(job.apnsID, "123e4567-e89b-12d3-a456-426655440000")
        // The payload is the producer's bytes, untouched.
        XCTAssertEqual(String(decoding: job.payload, as: UTF8.self), #"{"aps":{"alert":"hi"}, "x": [1, 2]}"#)
    }

    /// Today's 64-digit tokens are kept inline and longer ones as a string; both read back
    /// lowercase, compare and hash by their digits, and bad ones are refused.
    /// A plain id stays in the job's bytes, an escaped one is decoded; either way it reads back,
    /// and a record built from the job writes it as JSON that decodes to it, from a slice that
    /// does not start at index 0 too.
    func testIdsPlainOrEscapedReadBackAndGoIntoRecords() throws {
        let shared = OutcomeRecord.SharedFields(app: nil, topic: nil, worker: "w", timeMs: 1)
        for (json, id) in [(#""j-1""#, "j-1"), (#""q\"\u00e9\\""#, "q\"é\\"), (#""""#, ""), (#""héllo""#, "héllo")] as [(String, String)] {
            let text = #"{"id":\#(json),"token":"\#(Self.token)","payload":{"aps":{}}}"#
            let bytes = Array(("xyz" + text).utf8)
            let job = try Job.parse(bytes[3...])
            XCTAssertEqual(job.id, id, json)
            XCTAssertEqual(job.idCount, id.utf8.count)
            let ctx = OutcomeRecord.Context(handle: 1, lending: UncountedReference(job), token: job.token, shared: shared.jsonBytes)
            let record =
                try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: nil, rejection: nil, attempts: 1))) as! [String: Any]
            XCTAssertEqual(record["job_id"] as? String, id, json)
            withExtendedLifetime(job) {}
        }
        let none = try parse(#"{"token":"\#(Self.token)","payload":{"aps":{}}}"#)
        XCTAssertNil(none.id)
        let ctx = OutcomeRecord.Context(handle: 1, lending: UncountedReference(none), token: none.token, shared: shared.jsonBytes)
        XCTAssertNil(
            (try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: nil, rejection: nil, attempts: 1))) as! [String: Any])[
                "job_id"])
        withExtendedLifetime((job: none, shared: shared)) {}
        XCTAssertEqual(none.rendered(Array("{}".utf8)).id, nil)
        XCTAssertEqual(try parse(#"{"id":"k","token":"\#(Self.token)","payload":{"aps":{}}}"#).rendered(Array("{}".utf8)).id, "k")
    }

    func testDeviceTokensInlineAndLong() throws {
        let short = DeviceToken("ABCDEF01"), today = DeviceToken(Self.token.uppercased()), long = DeviceToken(String(repeating: "C0", count: 100))
        XCTAssertEqual(short?.hex, "abcdef01")
        XCTAssertEqual(today?.hex, Self.token)
        XCTAssertEqual(long?.hex, String(repeating: "c0", count: 100))
        XCTAssertEqual(long?.utf8Count, 200)
        XCTAssertEqual(today, DeviceToken(Self.token))
        XCTAssertNotEqual(today, DeviceToken(String(repeating: "ab", count: 31) + "ac"))
        XCTAssertEqual(Set([today, DeviceToken(Self.token), long, long]).count, 2)
        XCTAssertEqual(today?.withHex { Array($0) }, Array(Self.token.utf8))
        for bad in ["", "abc", "abcdef0", "abcdefgh", String(repeating: "a", count: 202), "abcd ef0"] { XCTAssertNil(DeviceToken(bad), bad) }
        // A token with escapes in its JSON string reads as its decoded digits.
        let escaped = try parse(#"{"token":"\u0061\u0062\#(String(repeating: "ab", count: 31))","payload":{"a":1}}"#)
        XCTAssertEqual(escaped.token.hex, Self.token)
        XCTAssertEqual(reason(#"{"token":"ab\u0000cdef01","payload":{"a":1}}"#), "BadDeviceToken")
    }

    /// The eight-digits-at-a-time check agrees with a byte-by-byte one for every byte value at
    /// every position of today's token, and of a shorter one with a tail.
    func testEveryByteAtEveryPositionOfATokenIsCheckedAlike() {
        let hex = Set(Array("0123456789abcdefABCDEF".utf8))
        for length in [64, 18] {
            let valid = Array(String(repeating: "a1", count: length / 2).utf8)
            for position in 0..<length {
                for b in UInt8.min...UInt8.max {
                    var bytes = valid
                    bytes[position] = b
                    let token = bytes.withUnsafeBufferPointer { DeviceToken(utf8: $0) }
                    XCTAssertEqual(token != nil, hex.contains(b), "byte \(b) at \(position) of \(length)")
                    if let token { XCTAssertEqual(token.hex, String(decoding: bytes.map { $0 | 0x20 }, as: UTF8.self)) }
                }
            }
        }
    }

    func testDefaults() throws {
        let job = try parse(#"{"token":"\#(Self.token)","payload":{"aps":{}}}"#)
        XCTAssertEqual(job.pushType, .alert)
        XCTAssertNil(job.priority)
        XCTAssertEqual(job.effectivePriority, .immediate)
        let bg = try parse(#"{"token":"\#(Self.token)","push_type":"background","payload":{"aps":{"content-available":1}}}"#)
        XCTAssertEqual(bg.effectivePriority, .conserve)
    }

    func testEachBadInputHasItsReason() {
        let t = Self.token
        XCTAssertEqual(reason("not json"), JobRejection.malformedJSON)
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{}"#), JobRejection.malformedJSON)
        XCTAssertEqual(reason(#"["x"]"#), JobRejection.malformedJSON)
        XCTAssertEqual(reason(#"{"token":"\#(t)","token":"\#(t)","payload":{"a":1}}"#), JobRejection.malformedJSON)
        XCTAssertEqual(reason(#"{"token":"\#(t)","priorty":5,"payload":{"a":1}}"#), JobRejection.unknownField)
        XCTAssertEqual(reason(#"{"v":2,"token":"\#(t)","payload":{"a":1}}"#), JobRejection.unsupportedVersion)
        XCTAssertEqual(reason(#"{"payload":{"a":1}}"#), "MissingDeviceToken")
        XCTAssertEqual(reason(#"{"token":"xyz","payload":{"a":1}}"#), "BadDeviceToken")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"push_type":"shout"}"#), "InvalidPushType")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"priority":7}"#), "BadPriority")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"priority":"10"}"#), JobRejection.wrongType)
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"aps":{}},"push_type":"background","priority":10}"#), "BadPriority")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"push_type":"pushtotalk","priority":5}"#), "BadPriority")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"collapse_id":"\#(String(repeating: "c", count: 65))"}"#), "BadCollapseId")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"apns_id":"nope"}"#), "BadMessageId")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"expiration":-5}"#), "BadExpirationDate")
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"topic":"com.x.voip"}"#), "BadTopic")
        XCTAssertEqual(reason(#"{"token":"\#(t)"}"#), JobRejection.missingPayload)
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":"hi"}"#), JobRejection.wrongType)
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{}}"#), "PayloadEmpty")
    }

    /// A value HTTP/2 forbids in a header (RFC 9113 §8.2.1) would break the connection that
    /// carries it, and every other job on it: the job is refused with Apple's reason for the field.
    /// Valid JSON is never called invalid, and each text says what to fix (issue 28, item 2).
    func testErrorTextsSayWhatToFix() {
        // As an APNs app's job: a token that is not hex parses (an FCM app's may be anything)
        // and is refused when the job goes with an APNs app.
        func detail(_ text: String) -> (String, String) {
            do {
                try DeviceToken.requireHex(try parse(text))
                return ("", "")
            } catch { return (error.reason, error.detail) }
        }
        for text in [#"{"v":1.0,"token":"\#(Self.token)","payload":{}}"#, #"{"v":18446744073709551616,"token":"\#(Self.token)","payload":{}}"#] {
            let (reason, message) = detail(text)
            XCTAssertEqual(reason, JobRejection.wrongType, message)
            XCTAssertFalse(message.contains("not valid JSON"), message)
            XCTAssertTrue(message.contains("whole number"), message)
        }
        let deep = #"{"token":"\#(Self.token)","payload":{"a":"# + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}}"
        let (_, nested) = detail(deep)
        XCTAssertFalse(nested.contains("not valid JSON"), nested)
        XCTAssertTrue(nested.contains("deeper than 64 levels, the limit"), nested)
        let (tokenReason, token) = detail(#"{"token":"\#(String(repeating: "zz", count: 32))","payload":{"a":1}}"#)
        XCTAssertEqual(tokenReason, "BadDeviceToken")
        XCTAssertTrue(token.contains("hex digits (0-9, a-f)") && !token.contains("even number"), token)
        let (_, odd) = detail(#"{"token":"abc","payload":{}}"#)
        XCTAssertTrue(odd.contains("even number of hex digits"), odd)
        let (_, typed) = detail(#"{"tokens":{"a":1},"payload":{}}"#)
        XCTAssertTrue(typed.contains("must be an array, not an object"), typed)
        XCTAssertTrue(detail("{oops").1.contains("not valid JSON"))
    }

    func testHeaderValuesWithControlCharactersAreRefusedBeforeSending() {
        let t = Self.token
        for bad in [#"a\u0000b"#, #"a\rb"#, #"a\nb"#, #"a\u001fb"#, #"a\u007fb"#, #" a"#, #"a\t"#] {
            XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"collapse_id":"\#(bad)"}"#), "BadCollapseId", bad)
            XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"topic":"com.x\#(bad)"}"#), "BadTopic", bad)
        }
        XCTAssertEqual(reason(#"{"token":"\#(t)","payload":{"a":1},"apns_id":"123e4567-e89b-12d3-a456-42665544000\u0000"}"#), "BadMessageId")
        XCTAssertNoThrow(try parse(#"{"token":"\#(t)","payload":{"a":1},"collapse_id":"a b c é"}"#), "inner spaces and UTF-8 are fine")
    }

    func testPayloadSizeLimitsCountTheExactBytes() throws {
        func job(_ bytes: Int, _ type: String) -> String {
            // {"a":"xxxx"} is 8 bytes of framing around the string.
            let filler = String(repeating: "x", count: bytes - 8)
            return #"{"token":"\#(Self.token)","push_type":"\#(type)","payload":{"a":"\#(filler)"}}"#
        }
        XCTAssertEqual(try parse(job(4096, "alert")).payload.count, 4096)
        XCTAssertEqual(reason(job(4097, "alert")), "PayloadTooLarge")
        XCTAssertEqual(try parse(job(5120, "voip")).payload.count, 5120)
        XCTAssertEqual(reason(job(5121, "voip")), "PayloadTooLarge")
    }

    func testPushTypeTopicRules() {
        XCTAssertTrue(PushType.alert.matches(topic: "com.example.app"))
        XCTAssertFalse(PushType.alert.matches(topic: "com.example.app.voip"))
        XCTAssertTrue(PushType.voip.matches(topic: "com.example.app.voip"))
        XCTAssertFalse(PushType.voip.matches(topic: ".voip"))
        XCTAssertEqual(PushType.liveactivity.topic(forBundle: "b"), "b.push-type.liveactivity")
        XCTAssertEqual(PushType.fileprovider.topic(forBundle: "b"), "b.pushkit.fileprovider")
        XCTAssertEqual(PushType.all.count, 11)
    }

    /// Push types compare by which one they are: each name reads back as itself and no other.
    func testEachPushTypeEqualsOnlyItself() {
        for (i, a) in PushType.all.enumerated() {
            XCTAssertEqual(PushType(a.rawValue), a)
            for (j, b) in PushType.all.enumerated() { XCTAssertEqual(a == b, i == j, "\(a) vs \(b)") }
        }
        XCTAssertEqual(Set(PushType.all).count, PushType.all.count)
    }

    /// The parser's field switch and the published field list agree, name for name and in order
    /// (the order gives each field its bit in the duplicate check).
    func testEveryPublishedFieldNameMapsToItsField() {
        func field(_ name: String) -> Job.Field? { name.withUTF8Bytes { Job.Field(utf8: $0) } }
        XCTAssertEqual(Job.fieldNames.count, Job.Field.allCases.count)
        for (i, name) in Job.fieldNames.enumerated() {
            XCTAssertEqual(field(name)?.rawValue, i, name)
            XCTAssertEqual(Job.Field(rawValue: i)?.name, name)
            // The same length with any one byte changed, and one byte more or less, match nothing.
            for j in name.utf8.indices {
                var changed = Array(name.utf8)
                changed[name.utf8.distance(from: name.utf8.startIndex, to: j)] ^= 0x20
                XCTAssertNil(field(String(decoding: changed, as: UTF8.self)), name)
            }
            for other in [name + "s", String(name.dropLast())] where !Job.fieldNames.contains(other) {
                XCTAssertNil(field(other), other)
            }
        }
        XCTAssertNil(field("priorty"))
        XCTAssertNil(field(""))
    }

    /// Keys are matched on their decoded text: an escaped key is the field it spells.
    func testEscapedKeysAreTheFieldsTheySpell() throws {
        let job = try parse(#"{"\u0074oken":"\#(Self.token)","p\u0061yload":{"a":1},"id":"x"}"#)
        XCTAssertEqual(job.token.hex, Self.token)
        XCTAssertEqual(Array(job.payload), Array(#"{"a":1}"#.utf8))
        XCTAssertEqual(job.id, "x")
        XCTAssertThrowsError(try parse(#"{"token":"\#(Self.token)","payload":{"a":1},"t\u00f6pic":"x"}"#)) { error in
            XCTAssertEqual((error as? JobRejection)?.reason, JobRejection.unknownField)
            XCTAssertTrue((error as? JobRejection)?.detail.contains("\"töpic\"") ?? false, "\(error)")
        }
        XCTAssertEqual(reason(#"{"token":"\#(Self.token)","t\u006fken":"\#(Self.token)","payload":{"a":1}}"#), JobRejection.malformedJSON)
    }
}
