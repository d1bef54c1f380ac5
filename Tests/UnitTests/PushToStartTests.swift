import APNSCore
import Foundation
import XCTest

/// Push-to-start (issue 31, item 3): a `liveactivity` job with `event: "start"` carries
/// `attributes-type`, `attributes`, `content-state` and `alert`, and optionally
/// `input-push-token: 1` or an `input-push-channel`; checked before sending, raw and structured
/// alike, and the JSON Schema agrees.
final class PushToStartTests: XCTestCase {
    static let token = String(repeating: "ab", count: 32)
    static let channel = "dHN0LTEyMzQ1Njc4OTA="
    static let start =
        #""event":"start","timestamp":1700000000,"content-state":{"score":"0-0"},"attributes-type":"Match","attributes":{"home":"A"},"alert":{"title":"Kick-off"}"#
    static let startFields =
        #""event":"start","timestamp":1700000000,"content_state":{"score":"0-0"},"attributes_type":"Match","attributes":{"home":"A"},"alert":{"title":"Kick-off"}"#

    private static func job(raw aps: String) -> String {
        #"{"token":"\#(token)","push_type":"liveactivity","payload":{"aps":{\#(aps)}}}"#
    }

    private static func job(fields: String) -> String {
        #"{"token":"\#(token)","push_type":"liveactivity","notification":{\#(fields)}}"#
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

    static let accepted = [
        job(raw: start), job(raw: start + #","input-push-token":1"#), job(raw: start + #","input-push-channel":"\#(channel)""#),
        job(fields: startFields), job(fields: startFields + #","input_push_token":true"#),
        job(fields: startFields + #","input_push_channel":"\#(channel)""#),
        job(raw: #""event":"update","timestamp":1,"content-state":{"score":"1-0"}"#),
    ]
    static let refused: [(String, String)] = [
        (job(raw: start.replacingOccurrences(of: #","attributes-type":"Match""#, with: "")), "attributes-type"),
        (job(raw: start.replacingOccurrences(of: #","attributes":{"home":"A"}"#, with: "")), "aps.attributes"),
        (job(raw: start.replacingOccurrences(of: #","alert":{"title":"Kick-off"}"#, with: "")), "aps.alert"),
        (job(raw: start.replacingOccurrences(of: #","content-state":{"score":"0-0"}"#, with: "")), "content-state"),
        (job(raw: start + #","input-push-token":2"#), "input-push-token"),
        (job(raw: start + #","input-push-channel":"not base64!""#), "input-push-channel"),
        (job(raw: start + #","input-push-channel":"""#), "input-push-channel"),
        (job(fields: startFields.replacingOccurrences(of: #","attributes_type":"Match""#, with: "")), "attributes-type"),
        (job(fields: startFields + #","input_push_channel":"a b""#), "input-push-channel"),
        (job(raw: #""event":"begin","timestamp":1"#), "aps.event"),
    ]

    func testAPushToStartNeedsWhatApplesDocumentsItNeeds() {
        for job in Self.accepted { XCTAssertNil(refusal(job), job) }
        for (job, names) in Self.refused {
            let why = refusal(job)
            XCTAssertEqual(why?.hasPrefix("BadPayloadForPushType:"), true, "\(job): \(why ?? "accepted")")
            XCTAssertEqual(why?.contains(names), true, "\(job): \(why ?? "accepted")")
        }
    }

    /// The JSON Schema says the same of every sample.
    func testTheSchemaAgrees() throws {
        let samples = Self.accepted + Self.refused.map(\.0)
        let schemaSays = try JobSchemaFileTests.validate(samples)
        XCTAssertEqual(schemaSays, samples.map { refusal($0) == nil }, zip(samples, schemaSays).map { "\($1) \($0)" }.joined(separator: "\n"))
    }
}
