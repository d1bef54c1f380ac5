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

final class APNSIDTests: XCTestCase {
    /// An apns-id is kept inline when short and plain JSON string content (a UUID), as text
    /// otherwise (a byte above 0x7F, a quote, a backslash or a control character, in any word or
    /// in the tail); either way it reads back and goes into records, escaped as needed, as APNs
    /// sent it.
    func testAnAPNSIDReadsBackAsSentInlineOrNot() throws {
        let uuid = "1f00193f-cf32-4254-abc1-eefeb1c5c3a4"
        for text in [
            uuid, "", "x", String(repeating: "7", count: 40), String(repeating: "7", count: 41), "héllo \"quoted\"", "é", "1234567é", "12345678é",
            "a\"b", "back\\slash", "tab\there", "1234\"678", "12345678\"", "12345678\\9",
        ] {
            let id = Array(text.utf8).withUnsafeBufferPointer { APNSID($0) }
            XCTAssertEqual(id.description, text)
            XCTAssertEqual(id, APNSID(text))
            XCTAssertEqual(id.isEmpty, text.isEmpty)
            XCTAssertEqual(id.isPlainJSON, text.utf8.count <= 40 && text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x80 && $0 != 0x22 && $0 != 0x5C })
            let ctx = OutcomeRecord.Context(handle: 1, jobID: nil, app: nil, token: nil, topic: nil, worker: "w", timeMs: 1)
            let record = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: id, rejection: nil, attempts: 1)))
            XCTAssertEqual((record as? [String: Any])?["apns_id"] as? String, text)
        }
        XCTAssertNotEqual(APNSID(uuid), APNSID(uuid.uppercased()))
    }
}
