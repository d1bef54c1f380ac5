import Configuration
import Synchronization

/// How the queues of one worker share its gate (`queues`), shared by every lane of every I/O
/// thread. A strict queue's lanes fetch first, and while one has jobs the weighted queues take
/// no more. Among the weighted queues with a backlog, fetches take turns by weight: each queue
/// counts the jobs it asked for over its weight (its virtual time, as in weighted fair queueing),
/// and a lane may fetch while its queue is less than a batch ahead of every other queue with a
/// backlog. Whole batches and the whole gate stay in use (a queue alone goes at the worker's
/// full rate), and the jobs taken, so the jobs sent, go in proportion to the weights.
final class QueueShares: Sendable {
    struct Member: Equatable {
        let strict: Bool
        let weight: Int
    }

    /// What a lane may fetch now: up to `jobs`, and not fewer than `least` (0 jobs: its turn
    /// has not come; it is woken when it may have).
    struct Turn: Equatable {
        let jobs: Int
        let least: Int
        static let wait = Turn(jobs: 0, least: 1)
    }

    let members: [Member]
    /// The queue (index into `members`) of each lane of the process.
    let queueOfLane: [Int]
    private let hasStrict: Bool
    private let state: Mutex<State>
    /// A queue whose lanes found no jobs (or had no backlog) for this long counts as without.
    static let busyForMs: UInt64 = 1000

    private struct State {
        /// When each lane's fetch last found jobs (monotonic ms); 0: its last found none.
        var lastFound: [UInt64]
        /// When each queue's fetch last came back with all it asked for: it has a backlog.
        var lastFull: [UInt64]
        /// Each queue's jobs asked for over its weight.
        var virtualTime: [Double]
        /// The jobs each lane holds.
        var held: [Int]
        /// Lanes whose turn has not come, to wake when it may have.
        var waiting: [(@Sendable () -> Void)?]
    }

    init(members: [Member], queueOfLane: [Int]) {
        self.members = members
        self.queueOfLane = queueOfLane
        hasStrict = members.contains(where: \.strict)
        state = Mutex(
            State(
                lastFound: Array(repeating: 0, count: queueOfLane.count), lastFull: Array(repeating: 0, count: members.count),
                virtualTime: Array(repeating: 0, count: members.count), held: Array(repeating: 0, count: queueOfLane.count),
                waiting: Array(repeating: nil, count: queueOfLane.count)))
    }

    /// The queues served (in order), and the queue of each lane (an index into `queues`).
    convenience init(_ queues: [ServedQueue], queueOfLane: [Int]) {
        self.init(members: queues.map { Member(strict: $0.isStrict, weight: $0.weight) }, queueOfLane: queueOfLane)
    }

    func isStrict(lane: Int) -> Bool { members[queueOfLane[lane]].strict }

    /// What `lane`, holding `held` jobs, may fetch at `nowMs`. `room`: what one lane may hold
    /// (the gate less a reserve, so that a lane that waits never holds all of it); a queue
    /// with a strict one beside it leaves that reserve free for the strict queue's next jobs.
    /// `minimum`: the least a whole fetch takes. `wake`: called once when a lane told to wait may go.
    func turn(lane: Int, held: Int, room: Int, minimum: Int, nowMs: UInt64, wake: @escaping @Sendable () -> Void) -> Turn {
        let own = queueOfLane[lane], member = members[own]
        return state.withLock { s in
            s.held[lane] = held
            // A queue with a backlog fetches whole batches; one without takes what there is.
            let least = Self.recent(s.lastFull[own], nowMs) ? min(minimum, room) : 1
            if member.strict { return Turn(jobs: max(0, room - held), least: least) }
            var jobs = room - held
            if hasStrict {
                if queueOfLane.indices.contains(where: { members[queueOfLane[$0]].strict && Self.recent(s.lastFound[$0], nowMs) }) {
                    s.waiting[lane] = wake
                    return .wait
                }
                let weightedHeld = queueOfLane.indices.reduce(0) { $0 + (members[queueOfLane[$1]].strict ? 0 : s.held[$1]) }
                jobs = min(jobs, room - weightedHeld)
            }
            let ahead = s.virtualTime[own] - Double(minimum) / Double(member.weight)
            for (q, m) in members.enumerated() where q != own && !m.strict && Self.recent(s.lastFull[q], nowMs) {
                guard ahead < s.virtualTime[q] else {
                    s.waiting[lane] = wake
                    return .wait
                }
            }
            return Turn(jobs: max(0, jobs), least: least)
        }
    }

    /// `lane` asks Redis for `jobs`: its queue's turn moves on, and the lanes waiting for
    /// theirs look again.
    func asked(lane: Int, jobs: Int) {
        let own = queueOfLane[lane]
        let wakes = state.withLock { s in
            s.virtualTime[own] += Double(jobs) / Double(members[own].weight)
            return Self.takeWaiting(&s)
        }
        for wake in wakes { wake() }
    }

    /// A fetch of `lane` that asked for `asked` jobs took `taken`, at `nowMs`. A queue that
    /// comes to have a backlog starts level with the others that have one: the turns it did
    /// not take while it had none are not owed to it.
    func fetched(lane: Int, asked: Int, taken: Int, nowMs: UInt64) {
        let own = queueOfLane[lane], member = members[own]
        let wakes = state.withLock { s in
            s.lastFound[lane] = taken > 0 ? max(1, nowMs) : 0
            s.virtualTime[own] -= Double(asked - taken) / Double(member.weight)
            if taken < asked {
                s.lastFull[own] = 0
            } else {
                if !Self.recent(s.lastFull[own], nowMs) {
                    let others = members.indices.filter { $0 != own && !members[$0].strict && Self.recent(s.lastFull[$0], nowMs) }
                    if let level = others.map({ s.virtualTime[$0] }).min() { s.virtualTime[own] = max(s.virtualTime[own], level) }
                }
                s.lastFull[own] = max(1, nowMs)
            }
            return Self.takeWaiting(&s)
        }
        for wake in wakes { wake() }
    }

    private static func recent(_ atMs: UInt64, _ nowMs: UInt64) -> Bool { atMs != 0 && atMs + busyForMs > nowMs }

    private static func takeWaiting(_ s: inout State) -> [@Sendable () -> Void] {
        let wakes = s.waiting.compactMap { $0 }
        if !wakes.isEmpty { s.waiting = Array(repeating: nil, count: s.waiting.count) }
        return wakes
    }
}
