import Configuration
import Synchronization

/// How the queues of one worker share its gate (`queues`): a strict queue's lanes fetch first
/// and may fill the gate but for a reserve; while one has jobs, the weighted queues take no more.
/// Otherwise each weighted queue with jobs waiting may hold its weight's part of the gate, so
/// that jobs held, and so jobs sent, go in proportion to the weights. Shared by every lane of
/// every I/O thread; a queue has jobs when one of its lanes' fetches found some in the last second.
final class QueueShares: Sendable {
    struct Member: Equatable {
        let strict: Bool
        let weight: Int
        /// Its lanes in the process (key sets times the threads that serve each).
        let lanes: Int
    }

    let members: [Member]
    /// The queue (index into `members`) of each lane of the process.
    let queueOfLane: [Int]
    /// When each lane's fetch last found jobs (monotonic ms); 0: its last found none.
    private let lastFound: Mutex<[UInt64]>
    /// A queue whose lanes found no jobs for this long counts as empty.
    static let busyForMs: UInt64 = 1000

    init(members: [Member], queueOfLane: [Int]) {
        self.members = members
        self.queueOfLane = queueOfLane
        lastFound = Mutex(Array(repeating: 0, count: queueOfLane.count))
    }

    /// The queues served (in order) and the queue of each lane (`lanes`: each lane's queue
    /// index), counting each queue's lanes.
    convenience init(_ queues: [ServedQueue], queueOfLane: [Int]) {
        let members = queues.indices.map { q in
            Member(strict: queues[q].isStrict, weight: queues[q].weight, lanes: max(1, queueOfLane.filter { $0 == q }.count))
        }
        self.init(members: members, queueOfLane: queueOfLane)
    }

    func isStrict(lane: Int) -> Bool { members[queueOfLane[lane]].strict }

    /// A fetch of `lane` found jobs (`found`) or none, at `nowMs`.
    func fetched(lane: Int, found: Bool, nowMs: UInt64) {
        lastFound.withLock { $0[lane] = found ? max(1, nowMs) : 0 }
    }

    /// The jobs `lane` may hold at `nowMs`, of `room` (the gate less the reserve that a
    /// strict queue's next jobs always find free): a strict lane all of it; a weighted one
    /// nothing while a strict queue has jobs, else its queue's weight's part among the weighted
    /// queues with jobs (its own counted), split between the queue's lanes.
    func allowance(lane: Int, room: Int, nowMs: UInt64) -> Int {
        let own = queueOfLane[lane], member = members[own]
        if member.strict { return room }
        let busy = busyQueues(nowMs: nowMs)
        var weights = 0
        for (q, m) in members.enumerated() where busy[q] || q == own {
            if m.strict { return 0 }
            weights += m.weight
        }
        return room * member.weight / max(1, weights) / member.lanes
    }

    private func busyQueues(nowMs: UInt64) -> [Bool] {
        lastFound.withLock { found in
            var busy = Array(repeating: false, count: members.count)
            for (lane, at) in found.enumerated() where at != 0 && at + Self.busyForMs > nowMs { busy[queueOfLane[lane]] = true }
            return busy
        }
    }
}
