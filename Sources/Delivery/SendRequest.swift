import APNSCore

/// The queue's half of a send: where the job came from and what it has been through. The
/// transport carries it and never reads it for sending; the completer writes it back to Redis.
public struct QueueTicket {
    /// The job's handle: its number in the queue's sequence (written as a string in records).
    public let handle: Int64
    /// The job's batch in Redis, and its index there.
    public let batch: TakenBatch
    public let index: Int
    /// Monotonic time the job was taken from Redis.
    public let takenAtNs: UInt64
    /// When a worker first took the job (UNIX ms), this take or an earlier one: `max_age_s` counts from it.
    public let sinceMs: Int64
    /// Failed tries so far, carried over from earlier retries in the job's envelope. The try that
    /// delivers is counted, not listed: no record lists the tries of a delivered job.
    public var attempts: [SendAttempt]
    public let recoveries: Int
    /// How many sends this handle fanned out to; the job is acked when all are decided.
    public let fanout: Int
    /// The claim it holds on its `idempotency_key` (a handle; 0: it has none), for its envelopes.
    /// Not a string: every job carries it, and copies of an optional string cost on each.
    public let claim: Int64

    public init(
        handle: Int64, batch: TakenBatch, index: Int, takenAtNs: UInt64, sinceMs: Int64, attempts: [SendAttempt], recoveries: Int,
        fanout: Int, claim: Int64 = 0
    ) {
        self.claim = claim
        self.handle = handle
        self.batch = batch
        self.index = index
        self.takenAtNs = takenAtNs
        self.sinceMs = sinceMs
        self.attempts = attempts
        self.recoveries = recoveries
        self.fanout = fanout
    }
}

/// A provider's answer to the last send, filled in by the connection as frames arrive.
public struct ProviderAnswer {
    /// Monotonic times of the last send and of its answer (for the latency histograms).
    public var sentAtNs: UInt64 = 0
    public var answeredAtNs: UInt64 = 0
    public var status = 0
    /// The id the provider answered with (`apns-id`); empty until it sends one (an optional id
    /// costs generic value witnesses).
    public var id = APNSID()
    /// `apns-unique-id`, which APNs's development environment sends: the key to the Delivery Log
    /// of Apple's Push Notifications Console. Empty until it does.
    public var uniqueID = APNSID()
    public var body: [UInt8] = []
    public var answered = false
    /// The answer's `retry-after` in ms (FCM's 429 and 503); 0: none.
    public var retryAfterMs = 0

    public init() {}

    /// Forgets the answer to an earlier send (a resend after a lost connection).
    mutating func restart(atNs now: UInt64) {
        sentAtNs = now
        status = 0
        id = APNSID()
        uniqueID = APNSID()
        body.removeAll()
        answered = false
        retryAfterMs = 0
    }
}

/// One notification (one job, one token) on its way to a provider, owned by one I/O thread:
/// the queue's ticket, what to send, and the provider's answer.
/// A class: it moves through queues and dictionaries, and a move should cost one retain.
public final class SendRequest: @unchecked Sendable {  // handed over whole between threads, never shared
    public var ticket: QueueTicket
    public let job: Job
    public let token: DeviceToken
    public let app: Int
    public let topic: String
    public var answer = ProviderAnswer()
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

    public init(ticket: QueueTicket, job: Job, token: DeviceToken, app: Int, topic: String) {
        self.ticket = ticket
        self.job = job
        self.token = token
        self.app = app
        self.topic = topic
    }

    /// The send is decided: the request becomes its own outcome record.
    public consuming func decide(_ outcome: Outcome, appName: String) -> FinishedJob {
        self.outcome = outcome
        self.appName = appName
        return .sent(self)
    }

    /// Forgets the answer to any earlier send (a resend after a lost connection).
    public func beginSend(atNs now: UInt64) { answer.restart(atNs: now) }
}
