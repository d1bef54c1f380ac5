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

final class AckGroupsTests: XCTestCase {
    /// A completion groups its marks by batch; a batch goes once its last unfinished job is
    /// acked, and the oldest batch touched is the one whose list proves none was taken back.
    func testAcksAreGroupedByBatchAndABatchFinishesWithItsLastJob() {
        let older = TakenBatch(id: "x-3", number: 3, jobs: 3), newer = TakenBatch(id: "x-4", number: 4, jobs: 2)
        var groups = AckGroups()
        XCTAssertNil(groups.oldest)
        XCTAssertTrue(groups.note(newer, index: 0, piece: nil) == (0, nil))
        XCTAssertTrue(groups.note(older, index: 2, piece: nil) == (1, nil))
        XCTAssertTrue(groups.note(newer, index: 1, piece: "ab") == (0, "1:ab"), "a fan-out piece that is not the job's last acks nothing")
        XCTAssertTrue(groups.note(newer, index: 1, piece: nil) == (0, nil))
        XCTAssertEqual(groups.all.map(\.batch.id), ["x-4", "x-3"])
        XCTAssertEqual(groups.all.map(\.acks), [[0, 1], [2]])
        XCTAssertEqual(groups.all.map(\.pieces), [["1:ab"], []])
        XCTAssertEqual(groups.all.map(\.finishes), [true, false])
        XCTAssertTrue(groups.oldest === older)
        XCTAssertTrue(groups.finishing.count == 1 && groups.finishing[0] === newer)
        groups.commit()
        XCTAssertEqual([older.unfinished, newer.unfinished], [2, 0])
        var next = AckGroups()
        _ = next.note(older, index: 0, piece: nil)
        _ = next.note(older, index: 1, piece: nil)
        XCTAssertTrue(next.all[0].finishes, "the rest of the batch")
    }
}
