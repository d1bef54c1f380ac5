import APNSCore
import Buffers
import Configuration
import Delivery
import Foundation
import PointerTricks
import QueueContract
import Synchronization
import XCTest

@testable import APNSTransport
@testable import APNSWorker

final class OutcomeRecordTests: XCTestCase {
    /// Records and envelopes are written into room sized beforehand: every field at its
    /// longest (each byte escaped as six, numbers of 20 characters) must still fit, and read
    /// back. The cursor checks each write against the room.
    func testRecordsWithEveryFieldAtItsLongestFitTheirRoom() throws {
        let worst = String(repeating: "\u{1}", count: 40)
        let longestToken = DeviceToken(String(repeating: "f", count: DeviceToken.lengthRange.upperBound))
        let ctx = OutcomeRecord.Context(handle: .min, jobID: worst, app: worst, token: longestToken, topic: worst, worker: worst, timeMs: .min)
        let r = Rejection(status: .min, reason: APNSReason(worst), apnsID: worst, timestamp: .min)
        let attempts = [SendAttempt](repeating: .init(timeMs: .min, status: .min, reason: worst), count: 3)
        let records = [
            OutcomeRecord.result(ctx, delivered: APNSID(worst), rejection: r, attempts: .min),
            OutcomeRecord.invalidToken(ctx, rejection: r),
            OutcomeRecord.deadLetter(ctx, reason: worst, detail: worst, job: (Array(worst.utf8) + [0xFF])[...], attempts: attempts),
            OutcomeRecord.deadLetter(ctx, reason: worst, detail: worst, job: Array("[1]".utf8)[...], attempts: []),
            JobEnvelope.wrap(job: Array("{}".utf8)[...], meta: JobEnvelope.Meta(token: worst, attempts: attempts, recoveries: .min, nonce: worst)),
        ]
        for record in records {
            let object = try JSONSerialization.jsonObject(with: Data(record)) as? [String: Any]
            XCTAssertNotNil(object, String(decoding: record, as: UTF8.self))
        }
        XCTAssertEqual((try JSONSerialization.jsonObject(with: Data(records[0])) as? [String: Any])?["handle"] as? String, String(Int64.min))
        XCTAssertEqual(try JobEnvelope.open(records[4][...]).meta.attempts, attempts)
    }

    func testOutcomeRecordsAreJSONWithTheContractFields() throws {
        let ctx = OutcomeRecord.Context(handle: 7, jobID: "j", app: "a", token: DeviceToken("ABCDEF0123456789"), topic: "t", worker: "w", timeMs: 5)
        let ok =
            try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: "id-1", rejection: nil, attempts: 1))) as! [String: Any]
        XCTAssertEqual(ok["status"] as? String, "ok")
        XCTAssertEqual(ok["token"] as? String, "abcdef0123456789")
        XCTAssertEqual(ok["apns_id"] as? String, "id-1")
        XCTAssertEqual(ok["v"] as? Int, 1)
        XCTAssertEqual(ok["handle"] as? String, "7", "a handle is a string of its digits")
        let r = Rejection(status: 410, reason: .unregistered, apnsID: "id-2", timestamp: 99)
        let failed =
            try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: nil, rejection: r, attempts: 2))) as! [String: Any]
        XCTAssertEqual(failed["status"] as? String, "failed")
        XCTAssertEqual(failed["http_status"] as? Int, 410)
        XCTAssertEqual(failed["reason"] as? String, "Unregistered")
        XCTAssertEqual(failed["apns_timestamp"] as? Int, 99)
        XCTAssertEqual(failed["apns_id"] as? String, "id-2", "the id APNs gave with its rejection")
        var delivered = ByteBuffer(capacity: 16)  // grows: the writer reserves its room first
        OutcomeRecord.delivered(ctx, apnsID: "id-1", attempts: 1, into: &delivered)
        XCTAssertEqual(Array(delivered.bytes()), OutcomeRecord.result(ctx, delivered: "id-1", rejection: nil, attempts: 1))
        let dead =
            try JSONSerialization.jsonObject(
                with: Data(
                    OutcomeRecord.deadLetter(
                        ctx, reason: "X", detail: "d", job: Array("not json".utf8)[...],
                        attempts: [.init(timeMs: 1, status: 500, reason: "InternalServerError")]))) as! [String: Any]
        XCTAssertEqual(dead["job_text"] as? String, "not json")
        XCTAssertEqual((dead["attempts"] as? [[String: Any]])?.first?["status"] as? Int, 500)
    }

    /// A batch's records share one set of app, topic, worker and time fields per app and
    /// topic; a record written through them reads back with each of its own fields.
    func testRecordsShareTheirAppTopicWorkerAndTimeFields() throws {
        var cache = SharedFieldsCache(worker: "w-1", timeMs: 42)
        let a = cache.fields(app: "app", topic: "t.1"), b = cache.fields(app: "app", topic: "t.2")
        XCTAssertEqual(cache.fields(app: "app", topic: "t.1").baseAddress, a.baseAddress, "met again after another")
        XCTAssertEqual(cache.fields(app: "app", topic: "t.2").baseAddress, b.baseAddress)
        XCTAssertNotEqual(cache.fields(app: nil, topic: "t.2").baseAddress, b.baseAddress)
        let none = cache.fields(app: nil, topic: nil)
        let job = try Job.parse(Array(#"{"id":"j\"9","token":"00ff00ff00ff00ff","payload":{"aps":{}}}"#.utf8))
        for (shared, app, topic) in [(a, "app", "t.1"), (b, "app", "t.2"), (none, nil, nil)] as [(UnsafeBufferPointer<UInt8>, String?, String?)] {
            // Lent: `cache` and `job` outlive the context.
            let ctx = OutcomeRecord.Context(handle: 9, lending: UncountedReference(job), token: DeviceToken("00ff00ff00ff00ff"), shared: shared)
            let record =
                try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: "id", rejection: nil, attempts: 1)))
                as! [String: Any]
            XCTAssertEqual(record["app"] as? String, app)
            XCTAssertEqual(record["topic"] as? String, topic)
            XCTAssertEqual(record["worker"] as? String, "w-1")
            XCTAssertEqual(record["time_ms"] as? Int, 42)
            XCTAssertEqual(record["job_id"] as? String, "j\"9")
            XCTAssertEqual(record["token"] as? String, "00ff00ff00ff00ff")
            XCTAssertEqual(record.count, app == nil ? 9 : 11, "\(record.keys.sorted())")
            withExtendedLifetime(job) {}
        }
        withExtendedLifetime(cache) {}
        let noToken = OutcomeRecord.Context(
            handle: 1, jobID: nil, token: nil, shared: OutcomeRecord.SharedFields(app: nil, topic: nil, worker: "w", timeMs: 1))
        let record =
            try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(noToken, delivered: nil, rejection: nil, attempts: 0))) as! [String: Any]
        XCTAssertNil(record["token"], "an absent token is left out")
        XCTAssertNil(record["apns_id"], "no id, none written")
        XCTAssertTrue(DeviceToken.absent.isAbsent)
        XCTAssertFalse(DeviceToken("00ff00ff00ff00ff")!.isAbsent)
    }
}
