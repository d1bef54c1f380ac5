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

final class JobEnvelopeTests: XCTestCase {
    func testEnvelopeRoundTripKeepsTheJobBytes() throws {
        let job = Array(#"{"token":"ab","payload":{"x":1.50,"y":"é"}}"#.utf8)[...]
        let meta = JobEnvelope.Meta(
            token: "abcd", attempts: [.init(timeMs: 1_700_000_000_000, status: 429, reason: "TooManyRequests")],
            recoveries: 2, nonce: "w/1", done: ["aa01", "aa02"])
        let wrapped = JobEnvelope.wrap(job: job, meta: meta)
        XCTAssertTrue(JobEnvelope.isEnvelope(wrapped[...]))
        XCTAssertFalse(JobEnvelope.isEnvelope(job))
        let (m, inner) = try JobEnvelope.open(wrapped[...])
        XCTAssertEqual(m, meta)
        XCTAssertEqual(inner, job)
        // Inside a batch's shared buffer the envelope starts past index 0, and so does its job.
        let before = Array("[\"x\",".utf8)
        let shared = before + wrapped + Array("]".utf8)
        let slice = shared[before.count..<(before.count + wrapped.count)]
        XCTAssertTrue(JobEnvelope.isEnvelope(slice))
        let (m3, inner3) = try JobEnvelope.open(slice)
        XCTAssertEqual(m3, meta)
        XCTAssertTrue(inner3.elementsEqual(job))
        // The Lua recovery script writes an empty list as {} and adds fields in its own order.
        let lua = Array(#"{"_apnsw":{"recoveries":1,"attempts":{}},"job":{"token":"ab","payload":{}}}"#.utf8)
        let (m2, inner2) = try JobEnvelope.open(lua[...])
        XCTAssertEqual(m2.recoveries, 1)
        XCTAssertEqual(m2.attempts, [])
        XCTAssertEqual(try JobEnvelope.open(Array(#"{"_apnsw":{"done":["ab"]},"job":{}}"#.utf8)[...]).meta.done, ["ab"])
        XCTAssertEqual(String(decoding: inner2, as: UTF8.self), #"{"token":"ab","payload":{}}"#)
    }

    func testFanOutAndScheduleFieldsParse() throws {
        let a = String(repeating: "ab", count: 32), b = String(repeating: "cd", count: 32)
        let job = try Job.parse(Array(#"{"tokens":["\#(a)","\#(b)"],"send_at":1800000000,"max_attempts":5,"payload":{"a":1}}"#.utf8))
        XCTAssertEqual(job.tokens.map(\.hex), [a, b])
        XCTAssertEqual(job.sendAt, 1_800_000_000)
        XCTAssertEqual(job.maxAttempts, 5)
        XCTAssertThrowsError(try Job.parse(Array(#"{"token":"\#(a)","tokens":["\#(b)"],"payload":{"a":1}}"#.utf8)))
        XCTAssertThrowsError(try Job.parse(Array(#"{"tokens":[],"payload":{"a":1}}"#.utf8)))
        XCTAssertThrowsError(try Job.parse(Array(#"{"tokens":[1],"payload":{"a":1}}"#.utf8)))
        let many = (0...Job.maxTokens).map { "\"\(String(format: "%064x", $0))\"" }.joined(separator: ",")
        XCTAssertThrowsError(try Job.parse(Array(#"{"tokens":[\#(many)],"payload":{"a":1}}"#.utf8))) { error in
            XCTAssertEqual((error as? JobRejection)?.reason, JobRejection.tooManyTokens)
        }
    }
}
