import APNSTransport
import Delivery
import QueueContract

/// One key set's fetcher and completer on one I/O thread: a queue of N shards has a lane per
/// shard (and one for the queue's own keys) spread over the threads.
struct Lane {
    let fetcher: Fetcher
    let completer: Completer
    /// Its queue is strict: it fetches first.
    var strict = false
}

enum LaneAssignment {
    /// The key sets (indexes into `sets`) I/O thread `thread` of `threads` serves: every set has
    /// a thread, every thread a set, and a set has several threads when threads outnumber sets.
    static func keySets(thread: Int, threads: Int, sets: Int) -> [Int] {
        guard threads > sets else { return Array(stride(from: thread, to: sets, by: threads)) }
        return [thread % sets]
    }

    /// The same for several queues (`setsOfQueue`: each queue's key sets, in order): each queue's
    /// sets are spread over every thread, so that a queue alone with jobs has every thread.
    static func keySets(thread: Int, threads: Int, setsOfQueue: [Int]) -> [Int] {
        var first = 0
        return setsOfQueue.flatMap { sets in
            defer { first += sets }
            return keySets(thread: thread, threads: threads, sets: sets).map { first + $0 }
        }
    }
}

/// The decided sends of a thread with several lanes: each goes to the completer of the lane
/// that took its batch.
final class LaneSink: DecidedSink {
    private let completers: [Completer]
    private let gate: InFlightGate

    init(_ completers: [Completer], gate: InFlightGate) {
        self.completers = completers
        self.gate = gate
    }

    func add(_ decided: consuming FinishedJob) {
        let lane = decided.lent.batch.lane
        completers[lane].add(decided)
    }

    func turnEnded(decided: Int) {
        gate.answered(decided)
        for completer in completers { completer.writeIfDue() }
    }

    func dropped(_ n: Int) { gate.dropped(n) }
}
