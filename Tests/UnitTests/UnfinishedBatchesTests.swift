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

final class UnfinishedBatchesTests: XCTestCase {
    /// The oldest batch with unfinished jobs, not counting those a completion is finishing.
    func testTheOldestUnfinishedBatchSkipsFinishedOnes() {
        let ledger = UnfinishedBatches()
        let batches = (1...3).map { ledger.open(id: "b-\($0)", jobs: 1) }
        XCTAssertEqual(batches.map(\.number), [1, 2, 3], "numbered in the order opened")
        XCTAssertTrue(ledger.oldest(besides: []) === batches[0])
        XCTAssertTrue(ledger.oldest(besides: [batches[0]]) === batches[1])
        batches[0].unfinished = 0
        batches[1].unfinished = 0
        XCTAssertTrue(ledger.oldest(besides: []) === batches[2])
        XCTAssertNil(ledger.oldest(besides: [batches[2]]))
    }
}
