import APNSCore

/// One notification (one job, one token) on its way to APNs, owned by one I/O thread.
/// A class: it moves through queues and dictionaries, and a move should cost one retain.
final class SendRequest: @unchecked Sendable { // handed over whole between threads, never shared
    let handle: String
    let job: Job
    let token: DeviceToken
    let app: Int
    let topic: String
    /// Monotonic time the job was taken from Redis.
    let takenAtNs: UInt64
    /// Tries so far, carried over from earlier retries in the job's envelope.
    var attempts: [OutcomeRecord.Attempt]
    let recoveries: Int
    /// How many sends this handle fanned out to; the job is acked when all are decided.
    let fanout: Int
    /// Monotonic times of the last send and of its answer (for the latency histograms).
    var sentAtNs: UInt64 = 0
    var answeredAtNs: UInt64 = 0

    init(handle: String, job: Job, token: DeviceToken, app: Int, topic: String, takenAtNs: UInt64,
         attempts: [OutcomeRecord.Attempt], recoveries: Int, fanout: Int) {
        self.handle = handle
        self.job = job
        self.token = token
        self.app = app
        self.topic = topic
        self.takenAtNs = takenAtNs
        self.attempts = attempts
        self.recoveries = recoveries
        self.fanout = fanout
    }
}

/// A decided send (or a job that cannot be sent), on its way back to Redis.
final class FinishedJob: @unchecked Sendable { // handed over whole between threads, never shared
    let handle: String
    /// The producer's job bytes (inside any envelope).
    let raw: [UInt8]
    let job: Job?
    let token: DeviceToken?
    let appName: String?
    let topic: String?
    let outcome: Outcome
    let attempts: [OutcomeRecord.Attempt]
    let recoveries: Int
    let fanout: Int
    /// Monotonic times: taken from Redis, last sent, answered (0 when it never was).
    var takenAtNs: UInt64 = 0
    var sentAtNs: UInt64 = 0
    var answeredAtNs: UInt64 = 0

    convenience init(_ r: SendRequest, appName: String, outcome: Outcome) {
        self.init(handle: r.handle, raw: r.job.raw, job: r.job, token: r.token, appName: appName, topic: r.topic,
                  outcome: outcome, attempts: r.attempts, recoveries: r.recoveries, fanout: r.fanout)
        takenAtNs = r.takenAtNs
        sentAtNs = r.sentAtNs
        answeredAtNs = r.answeredAtNs
    }

    init(handle: String, raw: [UInt8], job: Job?, token: DeviceToken?, appName: String?, topic: String?, outcome: Outcome,
         attempts: [OutcomeRecord.Attempt], recoveries: Int, fanout: Int) {
        self.handle = handle
        self.raw = raw
        self.job = job
        self.token = token
        self.appName = appName
        self.topic = topic
        self.outcome = outcome
        self.attempts = attempts
        self.recoveries = recoveries
        self.fanout = fanout
    }
}
