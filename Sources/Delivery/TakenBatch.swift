/// One fetch's jobs as the completer sees them: the batch's id in Redis and how many of its
/// jobs are not yet acked. When none are left, the batch's keys go.
public final class TakenBatch: @unchecked Sendable {  // an I/O thread's alone: its fetcher makes it, its completer acks it
    public let id: String
    /// Fetch order within this process: a later batch has a higher number.
    public let number: Int
    /// Which of its I/O thread's lanes (one per key set it serves) took it, and acks it.
    public let lane: Int
    /// Jobs not yet acked, and all it took.
    public var unfinished: Int
    public let jobs: Int
    /// Another worker took the batch back (this one's lease had lapsed): its jobs are not ours.
    public var takenBack = false

    public init(id: String, number: Int, jobs: Int, lane: Int = 0) {
        self.id = id
        self.lane = lane
        self.number = number
        unfinished = jobs
        self.jobs = jobs
    }
}
