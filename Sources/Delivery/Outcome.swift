import APNSCore

/// What finally happened to one job, as the worker records it in Redis, whichever provider
/// answered: the provider's own detail (its id, status and reason) rides inside.
public enum Outcome: Sendable {
    /// The provider accepted the notification; `id` is the id it answered with (APNs's `apns-id`).
    case delivered(id: APNSID)
    /// The provider refused it (or never answered); the answer is kept as it gave it, with what
    /// the rejection policy made of it.
    case rejected(Rejection, RejectionPolicy.Verdict)
    /// Not sent: another job took its `idempotency_key` within the window; `first` is the claim
    /// of that job (its handle).
    case duplicate(of: String)
    /// The worker could not send it (bad input or pre-send validation).
    case deadLetter(JobRejection)
    /// Not final: the job waits in the schedule until `atMs` (UNIX ms), for its `send_at`.
    case scheduled(atMs: Int64)
    /// Not final: the send waits in the schedule for `afterMs`, costing no attempt, because its
    /// pool is paused (refused credentials, or APNs out of reach) and holds enough already.
    case deferred(afterMs: Int)
}
