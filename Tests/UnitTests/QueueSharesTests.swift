import Configuration
import Foundation
import QueueContract
import Synchronization
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

    /// Lane 0 serves a strict queue; lanes 1 and 2 a weighted one (3); lane 3 another (1).
    private func shares() -> QueueShares {
        QueueShares(
            [ServedQueue(name: "otp", share: .strict), ServedQueue(name: "bulk", share: .weight(3)), ServedQueue(name: "news")],
            queueOfLane: [0, 1, 1, 2])
    }

    private func turn(_ s: QueueShares, lane: Int, held: Int = 0, at nowMs: UInt64, woken: Woken? = nil) -> QueueShares.Turn {
        s.turn(lane: lane, held: held, room: 1000, minimum: 100, nowMs: nowMs) { woken?.count.add(1, ordering: .relaxed) }
    }

    /// A lane's fetch asks for `jobs` and takes `taken` of them.
    private func fetch(_ s: QueueShares, lane: Int, jobs: Int = 100, taken: Int? = nil, at nowMs: UInt64) {
        s.asked(lane: lane, jobs: jobs)
        s.fetched(lane: lane, asked: jobs, taken: taken ?? jobs, nowMs: nowMs)
    }

    final class Woken: Sendable { let count = Atomic<Int>(0) }

    func testAStrictQueueWithJobsHoldsTheWeightedBackAndKeepsItsReserve() {
        let s = shares()
        XCTAssertEqual(turn(s, lane: 0, held: 300, at: 5000), .init(jobs: 700, least: 1), "a strict lane may fill the room")
        XCTAssertEqual(turn(s, lane: 1, held: 200, at: 5000), .init(jobs: 800, least: 1), "alone with jobs, bulk may fill it too")
        XCTAssertEqual(turn(s, lane: 3, held: 300, at: 5000), .init(jobs: 500, least: 1), "the weighted lanes together keep within the room")
        fetch(s, lane: 0, taken: 3, at: 5000)
        let woken = Woken()
        XCTAssertEqual(turn(s, lane: 1, at: 5500, woken: woken), .wait, "the strict queue has jobs")
        XCTAssertEqual(turn(s, lane: 3, at: 5500), .wait)
        XCTAssertEqual(turn(s, lane: 0, held: 3, at: 5500).jobs, 997)
        fetch(s, lane: 0, taken: 0, at: 5600)
        XCTAssertEqual(woken.count.load(ordering: .relaxed), 1, "a waiting lane is woken when a fetch may have changed its turn")
        XCTAssertEqual(turn(s, lane: 1, at: 5600).jobs, 1000, "its fetch found none: the weighted go on")
        fetch(s, lane: 0, taken: 1, at: 6000)
        XCTAssertEqual(turn(s, lane: 1, at: 7001).jobs, 1000, "a strict lane silent for a second counts as empty")
    }

    func testWeightedQueuesWithABacklogTakeTurnsByWeight() {
        let s = QueueShares([ServedQueue(name: "bulk", share: .weight(3)), ServedQueue(name: "news")], queueOfLane: [0, 0, 1])
        XCTAssertEqual(turn(s, lane: 2, held: 100, at: 1000), .init(jobs: 900, least: 1), "without a strict queue, the lane's room")
        // Both have a backlog: the lanes take whole batches, bulk three for each of news's.
        var taken = [0, 0, 0]
        for ms in 1000..<1400 {
            for lane in [0, 1, 2] where turn(s, lane: lane, at: UInt64(ms)).jobs > 0 {
                fetch(s, lane: lane, at: UInt64(ms))
                taken[lane] += 100
            }
        }
        let ratio = Double(taken[0] + taken[1]) / Double(taken[2])
        XCTAssertEqual(ratio, 3, accuracy: 0.1, "bulk took \(taken[0] + taken[1]), news \(taken[2])")
        XCTAssertTrue(turn(s, lane: 2, at: 1400).jobs > 0 || turn(s, lane: 0, at: 1400).jobs > 0, "one of them may always go")
        XCTAssertEqual(turn(s, lane: 0, at: 1400).least, 100, "a queue with a backlog fetches whole batches")
    }

    func testAQueueWithoutABacklogHoldsNoneBackAndIsOwedNothing() {
        let s = QueueShares([ServedQueue(name: "heavy"), ServedQueue(name: "light")], queueOfLane: [0, 1])
        // light takes a job at a time: heavy fetches at will.
        for ms in UInt64(1000)..<1100 {
            XCTAssertGreaterThan(turn(s, lane: 0, at: ms).jobs, 0, "at \(ms) ms")
            fetch(s, lane: 0, at: ms)
            XCTAssertEqual(turn(s, lane: 1, at: ms), .init(jobs: 1000, least: 1), "a queue without a backlog takes what there is")
            fetch(s, lane: 1, taken: 1, at: ms)
        }
        // light comes to have a backlog: it starts level with heavy, and they alternate.
        fetch(s, lane: 1, at: 1100)
        var turns: [Int] = []
        for ms in UInt64(1101)..<1111 {
            for lane in [0, 1] where turn(s, lane: lane, at: ms).jobs > 0 {
                fetch(s, lane: lane, at: ms)
                turns.append(lane)
            }
        }
        XCTAssertLessThanOrEqual(abs(turns.filter { $0 == 0 }.count - turns.filter { $0 == 1 }.count), 1, "\(turns)")
    }

    func testEachQueuesKeySetsSpreadOverEveryThread() {
        XCTAssertEqual((0..<2).map { LaneAssignment.keySets(thread: $0, threads: 2, setsOfQueue: [1, 1, 1, 1]) }, [[0, 1, 2, 3], [0, 1, 2, 3]])
        XCTAssertEqual((0..<2).map { LaneAssignment.keySets(thread: $0, threads: 2, setsOfQueue: [1, 5]) }, [[0, 1, 3, 5], [0, 2, 4]])
        XCTAssertEqual((0..<3).map { LaneAssignment.keySets(thread: $0, threads: 3, setsOfQueue: [2]) }, [[0], [1], [0]])
    }
}
