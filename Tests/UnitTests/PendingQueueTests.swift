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

final class PendingQueueTests: XCTestCase {
    func testPendingQueueIsFIFOWithFrontPushes() throws {
        let job = try Job.parse(Array(#"{"token":"\#(String(repeating: "ab", count: 32))","payload":{"a":1}}"#.utf8))
        let batch = TakenBatch(id: "b", number: 1, jobs: 5000)
        func r(_ h: Int64) -> SendRequest {
            SendRequest(
                ticket: QueueTicket(handle: h, batch: batch, index: 0, takenAtNs: 0, sinceMs: 0, attempts: [], recoveries: 0, fanout: 1),
                job: job, token: job.tokens[0], app: 0, topic: "t")
        }
        var q = PendingQueue()
        for i in 0..<5000 { q.append(r(Int64(i))) }
        XCTAssertEqual(q.popFirst()?.ticket.handle, 0)
        q.pushFront(r(-1))
        XCTAssertEqual(q.popFirst()?.ticket.handle, -1)
        for i in 1..<5000 { XCTAssertEqual(q.popFirst()?.ticket.handle, Int64(i)) }
        XCTAssertTrue(q.isEmpty)
        XCTAssertNil(q.popFirst())
    }
}
