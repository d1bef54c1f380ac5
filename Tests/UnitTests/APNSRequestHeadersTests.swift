import APNSCore
import QueueContract
import XCTest

final class APNSRequestHeadersTests: XCTestCase {
    func testRequestHeaders() throws {
        struct Sink: HeaderSink {
            var fields: [(String, String, Bool)] = []
            mutating func add(_ name: StaticString, _ value: String, sensitive: Bool) { fields.append(("\(name)", value, sensitive)) }
        }
        let token = String(repeating: "0f", count: 32)
        let job = try Job.parse(
            Array(
                #"{"token":"\#(token)","push_type":"voip","priority":5,"expiration":0,"collapse_id":"c","apns_id":"123e4567-e89b-12d3-a456-426655440000","payload":{"a":1}}"#
                    .utf8))
        var sink = Sink()
        APNSRequestHeaders.write(job: job, token: job.tokens[0], topic: "b.voip", authority: "api.push.apple.com", bearer: "JWT", into: &sink)
        let map = Dictionary(uniqueKeysWithValues: sink.fields.map { ($0.0, $0.1) })
        XCTAssertEqual(
            map,
            [
                ":method": "POST", ":scheme": "https", ":path": "/3/device/\(token)", ":authority": "api.push.apple.com",
                "authorization": "bearer JWT", "apns-push-type": "voip", "apns-topic": "b.voip", "apns-priority": "5",
                "apns-expiration": "0", "apns-collapse-id": "c", "apns-id": "123e4567-e89b-12d3-a456-426655440000",
            ])
        XCTAssertEqual(Set(sink.fields.filter(\.2).map(\.0)), [":path", "apns-id"])
        var bare = Sink()
        let simple = try Job.parse(Array(#"{"token":"\#(token)","payload":{"a":1}}"#.utf8))
        APNSRequestHeaders.write(job: simple, token: simple.tokens[0], topic: "b", authority: "h", bearer: nil, into: &bare)
        XCTAssertEqual(bare.fields.map(\.0), [":method", ":scheme", ":path", ":authority", "apns-push-type", "apns-topic", "apns-priority"])
        XCTAssertEqual(bare.fields.last?.1, "10", "the priority the checks used is always sent")
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
        let shared = APNSRequestHeaders.share(authority: "h", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: .conserve, into: &sink)
        XCTAssertEqual(sink.kept.count, 7)
        for job in jobs {
            sink.fields.removeAll()
            var alone = Sink()
            let sharedFit = shared.fits(authority: "h", bearer: "JWT", pushType: job.pushType, topic: "b.voip", priority: job.effectivePriority)
            let own =
                sharedFit
                ? shared
                : APNSRequestHeaders.share(
                    authority: "h", bearer: "JWT", pushType: job.pushType, topic: "b.voip",
                    priority: job.effectivePriority, into: &sink)
            APNSRequestHeaders.write(job: job, token: job.token, shared: own, into: &sink)
            APNSRequestHeaders.write(job: job, token: job.token, topic: "b.voip", authority: "h", bearer: "JWT", into: &alone)
            XCTAssertEqual(sink.fields.map { "\($0)" }, alone.fields.map { "\($0)" })
        }
        XCTAssertTrue(shared.fits(authority: "h", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: .conserve))
        XCTAssertFalse(shared.fits(authority: "g", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: .conserve))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT2", pushType: .voip, topic: "b.voip", priority: .conserve))
        XCTAssertFalse(shared.fits(authority: "h", bearer: nil, pushType: .voip, topic: "b.voip", priority: .conserve))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT", pushType: .alert, topic: "b.voip", priority: .conserve))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT", pushType: .voip, topic: "b", priority: .conserve))
        XCTAssertFalse(shared.fits(authority: "h", bearer: "JWT", pushType: .voip, topic: "b.voip", priority: .immediate))
    }
}
