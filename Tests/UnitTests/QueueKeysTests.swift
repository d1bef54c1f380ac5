import APNSCore
import QueueContract
import XCTest

final class QueueKeysTests: XCTestCase {
    func testKeysShareOneHashTag() {
        let k = QueueKeys(queue: "push")
        let all = [
            k.jobs, k.batches(worker: "w1"), k.batch(worker: "w1", id: "a-1"), k.batchDone(worker: "w1", id: "a-1"),
            k.takeback(worker: "w1"), k.staging(worker: "w1"), k.handleCounter, k.workers, k.results,
            k.invalidTokens, k.deadLetters, k.stats,
        ]
        XCTAssertEqual(Set(all).count, all.count)
        for key in all { XCTAssertTrue(key.hasPrefix("apns:{push}:"), key) }
    }
}
