import APNSCore

/// One notification (one job, one token) on its way to APNs, owned by one I/O thread.
/// A class: it moves through queues and dictionaries, and a move should cost one retain.
public final class SendRequest: @unchecked Sendable {  // handed over whole between threads, never shared
    /// The job's handle: its number in the queue's sequence (written as a string in records).
    public let handle: Int64
    /// The job's batch in Redis, and its index there.
    public let batch: TakenBatch
    public let index: Int
    public let job: Job
    public let token: DeviceToken
    public let app: Int
    public let topic: String
    /// Monotonic time the job was taken from Redis.
    public let takenAtNs: UInt64
    /// When a worker first took the job (UNIX ms), this take or an earlier one: `max_age_s` counts from it.
    public let sinceMs: Int64
    /// Failed tries so far, carried over from earlier retries in the job's envelope. The try that
    /// delivers is counted, not listed: no record lists the tries of a delivered job.
    public var attempts: [OutcomeRecord.Attempt]
    public let recoveries: Int
    /// How many sends this handle fanned out to; the job is acked when all are decided.
    public let fanout: Int
    /// Monotonic times of the last send and of its answer (for the latency histograms).
    public var sentAtNs: UInt64 = 0
    public var answeredAtNs: UInt64 = 0
    /// The answer to the last send, filled in by the connection as frames arrive.
    public var status = 0
    /// Empty until APNs sends one (`APNSID()`: an optional id costs generic value witnesses).
    public var apnsID = APNSID()
    /// `apns-unique-id`, which APNs's development environment sends: the key to the Delivery Log
    /// of Apple's Push Notifications Console. Empty until it does.
    public var uniqueID = APNSID()
    public var responseBody: [UInt8] = []
    public var answered = false
    /// Sends in a row that got no answer (refused, cut, timed out): each waits longer to go again.
    public var unansweredSends = 0
    /// Times the server reset this stream alone while it answered others (RejectionPolicy.Answer.resetAlone).
    public var resetsAlone = 0
    /// Times this send went unanswered past the request timeout while its connection answered
    /// others (RejectionPolicy.Answer.timedOutAlone).
    public var timeoutsAlone = 0
    /// Set once the send is decided, with the app's name for records and counters; read only
    /// then (through `FinishedJob`). Not optional: an optional outcome is destroyed through
    /// generic value witnesses.
    public private(set) var outcome = Outcome.scheduled(atMs: 0)
    public private(set) var appName: String?

    public init(
        handle: Int64, batch: TakenBatch, index: Int, job: Job, token: DeviceToken, app: Int, topic: String, takenAtNs: UInt64,
        attempts: [OutcomeRecord.Attempt], recoveries: Int, fanout: Int, sinceMs: Int64
    ) {
        self.sinceMs = sinceMs
        self.handle = handle
        self.batch = batch
        self.index = index
        self.job = job
        self.token = token
        self.app = app
        self.topic = topic
        self.takenAtNs = takenAtNs
        self.attempts = attempts
        self.recoveries = recoveries
        self.fanout = fanout
    }

    /// The send is decided: the request becomes its own outcome record.
    public consuming func decide(_ outcome: Outcome, appName: String) -> FinishedJob {
        self.outcome = outcome
        self.appName = appName
        return .sent(self)
    }

    /// Forgets the answer to any earlier send (a resend after a lost connection).
    public func beginSend(atNs now: UInt64) {
        sentAtNs = now
        status = 0
        apnsID = APNSID()
        uniqueID = APNSID()
        responseBody.removeAll()
        answered = false
    }
}
