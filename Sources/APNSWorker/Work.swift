import APNSCore

/// A job on its way to APNs, owned by one I/O thread.
struct SendRequest {
    let handle: String
    let job: Job
    let app: Int
    let topic: String
    /// Monotonic time the job was taken from Redis.
    let takenAtNs: UInt64
    var attempts: [OutcomeRecord.Attempt] = []
}

/// A job whose outcome is decided, on its way back to Redis.
struct FinishedJob {
    let handle: String
    let raw: [UInt8]
    let job: Job?
    let appName: String?
    let topic: String?
    let outcome: Outcome
    let attempts: [OutcomeRecord.Attempt]
}
