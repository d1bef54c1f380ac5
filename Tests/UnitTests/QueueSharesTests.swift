import Configuration
import Foundation
import QueueContract
import XCTest

@testable import APNSWorker

/// `queues`: how the setting reads, and how the queues' lanes share the gate (`QueueShares`).
final class QueueSharesTests: XCTestCase {
    private func load(_ settings: String, _ env: [String: String] = [:]) throws -> WorkerConfiguration {
        let path = NSTemporaryDirectory() + "queues-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try """
        {\(settings), "apps":[{"name":"a","bundle_id":"com.a","token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}]}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return try WorkerConfiguration.load(path: path, environment: env)
    }

    private func refusal(_ settings: String, _ env: [String: String] = [:]) -> String {
        do {
            _ = try load(settings, env)
            return "loaded"
        } catch { return "\(error)" }
    }

    func testQueuesListsEachQueueWithItsShareAndShards() throws {
        let c = try load(#""queues":[{"name":"otp","strict":true},{"name":"bulk","weight":3,"shards":4},{"name":"news"}]"#)
        XCTAssertEqual(c.servedQueues.map(\.name), ["otp", "bulk", "news"])
        XCTAssertEqual(c.servedQueues.map(\.share), [.strict, .weight(3), .weight(1)])
        XCTAssertEqual(c.servedKeys.map(\.label), ["otp", "bulk", "bulk.0", "bulk.1", "bulk.2", "bulk.3", "news"])
        XCTAssertEqual(c.queue, "otp", "the first queue is what takes one (apnsctl's default)")
        let one = try load(#""queue":"q1","shards":2"#)
        XCTAssertEqual(one.servedQueues, [ServedQueue(name: "q1", shards: 2)], "queue stays the one-queue form")
    }

    func testASettingThatCannotWorkNamesWhatToFix() {
        XCTAssertTrue(refusal(#""queue":"q","queues":[{"name":"a"}]"#).contains("not both"))
        XCTAssertTrue(refusal(#""queues":[{"name":"a","strict":true,"weight":2}]"#).contains("strict or has a weight, not both"))
        XCTAssertTrue(refusal(#""queues":[{"name":"a","weight":0}]"#).contains("weight must be in 1...1000"))
        XCTAssertTrue(refusal(#""queues":[{"name":"a"},{"name":"a"}]"#).contains("each queue is named once"))
        XCTAssertTrue(refusal(#""queues":[]"#).contains("queues is empty"))
        XCTAssertTrue(refusal(#""queues":[{"weight":2}]"#).contains("needs a \"name\""))
        XCTAssertTrue(refusal(#""queues":[{"name":"a{b}"}]"#).contains("must not contain braces"))
        XCTAssertTrue(refusal(#""queues":[{"name":"a","shards":0}]"#).contains("shards must be in 1...256"))
        XCTAssertTrue(refusal(#""queues":[{"name":"a","priority":1}]"#).contains("unknown setting \"priority\""))
        XCTAssertTrue(refusal(#""queues":[{"name":"a"}]"#, ["APNSW_QUEUE": "b"]).contains("APNSW_QUEUE"))
    }

    /// Lanes 0 and 1 serve a strict queue and a weighted one; lanes 2-4 two weighted queues (3 and 1), the first over two lanes.
    private func shares() -> QueueShares {
        QueueShares(
            [ServedQueue(name: "otp", share: .strict), ServedQueue(name: "bulk", share: .weight(3)), ServedQueue(name: "news")],
            queueOfLane: [0, 1, 1, 2])
    }

    func testAStrictQueueWithJobsHoldsTheWeightedBack() {
        let s = shares()
        XCTAssertEqual(s.allowance(lane: 0, room: 1000, nowMs: 5000), 1000, "a strict lane may take the room")
        XCTAssertEqual(s.allowance(lane: 1, room: 1000, nowMs: 5000), 500, "alone with jobs, bulk takes the room, over its 2 lanes")
        s.fetched(lane: 0, found: true, nowMs: 5000)
        XCTAssertEqual(s.allowance(lane: 1, room: 1000, nowMs: 5500), 0, "the strict queue has jobs")
        XCTAssertEqual(s.allowance(lane: 3, room: 1000, nowMs: 5500), 0)
        XCTAssertEqual(s.allowance(lane: 0, room: 1000, nowMs: 5500), 1000)
        s.fetched(lane: 0, found: false, nowMs: 5600)
        XCTAssertEqual(s.allowance(lane: 1, room: 1000, nowMs: 5600), 500, "its fetch found none: the weighted go on")
        s.fetched(lane: 0, found: true, nowMs: 6000)
        XCTAssertEqual(s.allowance(lane: 1, room: 1000, nowMs: 7001), 500, "a strict lane silent for a second counts as empty")
    }

    func testWeightedQueuesWithJobsSplitTheRoomByWeight() {
        let s = shares()
        XCTAssertEqual(s.allowance(lane: 3, room: 1000, nowMs: 1000), 1000, "news alone takes the room")
        s.fetched(lane: 1, found: true, nowMs: 1000)
        XCTAssertEqual(s.allowance(lane: 3, room: 1000, nowMs: 1000), 250, "with bulk: 1 of 4")
        XCTAssertEqual(s.allowance(lane: 2, room: 1000, nowMs: 1000), 500, "news has no jobs: bulk takes the room")
        s.fetched(lane: 3, found: true, nowMs: 1000)
        XCTAssertEqual(s.allowance(lane: 2, room: 1000, nowMs: 1000), 375, "bulk: 3 of 4, over its two lanes")
        XCTAssertEqual(s.allowance(lane: 1, room: 1000, nowMs: 1000), 375)
        s.fetched(lane: 1, found: false, nowMs: 1100)
        XCTAssertEqual(s.allowance(lane: 3, room: 1000, nowMs: 1100), 1000, "bulk found none: news alone again")
        XCTAssertEqual(s.allowance(lane: 2, room: 1000, nowMs: 3000), 500, "news silent for a second: bulk alone")
    }
}
