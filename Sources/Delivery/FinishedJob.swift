import APNSCore
import PointerTricks

/// A decided send (or a job decided before sending), on its way back to Redis. A decided send
/// is its request, which carries the outcome: deciding allocates nothing.
@dynamicMemberLookup
public enum FinishedJob: @unchecked Sendable {  // handed over whole between threads, never shared
    case sent(SendRequest)
    case unsent(Unsent)

    /// A job decided before any send (unparsable, past its time, no such app…).
    public final class Unsent {
        public let handle: Int64
        public let batch: TakenBatch
        public let index: Int
        public let raw: ArraySlice<UInt8>
        public let job: Job?
        public let appName: String?
        public let topic: String?
        public let outcome: Outcome
        public let attempts: [SendAttempt]
        public let recoveries: Int
        /// What a job that failed its checks says about itself, for its records (`job` is nil).
        public let names: JobNames?
        /// The claim it holds on its `idempotency_key` (a handle; 0: none), for its envelope.
        public let claim: Int64

        public init(
            handle: Int64, batch: TakenBatch, index: Int, raw: ArraySlice<UInt8>, job: Job?, appName: String?, topic: String?,
            outcome: Outcome, attempts: [SendAttempt], recoveries: Int, names: JobNames? = nil, claim: Int64 = 0
        ) {
            self.claim = claim
            self.names = names
            self.handle = handle
            self.batch = batch
            self.index = index
            self.raw = raw
            self.job = job
            self.appName = appName
            self.topic = topic
            self.outcome = outcome
            self.attempts = attempts
            self.recoveries = recoveries
        }
    }

    public static func unsent(
        handle: Int64, batch: TakenBatch, index: Int, raw: ArraySlice<UInt8>, job: Job?, appName: String?, topic: String?,
        outcome: Outcome, attempts: [SendAttempt], recoveries: Int, names: JobNames? = nil, claim: Int64 = 0
    ) -> FinishedJob {
        .unsent(
            Unsent(
                handle: handle, batch: batch, index: index, raw: raw, job: job, appName: appName, topic: topic,
                outcome: outcome, attempts: attempts, recoveries: recoveries, names: names, claim: claim))
    }

    /// The job's fields, read in place (`Lent`); `f.handle` reads `f.lent.handle`.
    public subscript<T>(dynamicMember field: KeyPath<Lent, T>) -> T { lent[keyPath: field] }

    /// This job without a reference count, for a caller that holds it while it reads it.
    public var lent: Lent {
        switch self {
        case .sent(let r): .sent(UncountedReference(r))
        case .unsent(let u): .unsent(UncountedReference(u))
        }
    }

    /// A finished job lent by whoever holds it, valid while they do. A plain value: copied or
    /// captured, it counts nothing, where the completer's loops copied each job (an atomic
    /// retain and release per job and loop) around the calls they make with it.
    public enum Lent {
        case sent(UncountedReference<SendRequest>)
        case unsent(UncountedReference<Unsent>)

        private func read<T>(_ sent: (SendRequest) -> T, _ unsent: (Unsent) -> T) -> T {
            switch self {
            case .sent(let r): r.withObject(sent)
            case .unsent(let u): u.withObject(unsent)
            }
        }

        private func readSent<T>(_ sent: (SendRequest) -> T, else absent: T) -> T {
            if case .sent(let r) = self { r.withObject(sent) } else { absent }
        }

        public var handle: Int64 { read({ $0.ticket.handle }, { $0.handle }) }
        public var batch: TakenBatch { read({ $0.ticket.batch }, { $0.batch }) }
        public func isIn(_ batch: ObjectIdentifier) -> Bool {
            read({ ObjectIdentifier($0.ticket.batch) == batch }, { ObjectIdentifier($0.batch) == batch })
        }
        public var index: Int { read({ $0.ticket.index }, { $0.index }) }
        /// The producer's job bytes (inside any envelope).
        public var raw: ArraySlice<UInt8> { read({ $0.job.raw }, { $0.raw }) }
        public var job: Job? { read({ $0.job }, { $0.job }) }
        /// The job without counting a reference on it.
        public var uncountedJob: UncountedReference<Job>? { read({ UncountedReference($0.job) }, { $0.job.map { UncountedReference($0) } }) }
        /// Nil for a broadcast, which has a channel instead.
        public var token: DeviceToken? { readSent({ $0.token.isAbsent ? nil : $0.token }, else: nil) }
        /// The configured app it counts under (nil: none, counted as "-").
        public var appName: String? { read({ $0.appName }, { $0.appName }) }
        public var topic: String? { read({ $0.topic }, { $0.topic }) }
        public var names: JobNames? { read({ _ in nil }, { $0.names }) }
        /// The topic its records name: the one the job gave, even when it was refused.
        public var recordTopic: String? { read({ $0.topic }, { $0.topic ?? $0.names?.topic }) }
        public var outcome: Outcome { read({ $0.outcome }, { $0.outcome }) }
        /// Whether it was delivered, read in place: `outcome` copies the outcome and its strings.
        public var isDelivered: Bool { readSent({ if case .delivered = $0.outcome { true } else { false } }, else: false) }
        public var attempts: [SendAttempt] { read({ $0.ticket.attempts }, { $0.attempts }) }
        /// How many, read in place: `attempts` copies the array.
        public var attemptCount: Int { read({ $0.ticket.attempts.count }, { $0.attempts.count }) }
        /// The id of a delivered send, lent in place (an empty one for anything else).
        public func withDeliveredID<R>(_ body: (borrowing APNSID) -> R) -> R {
            if case .sent(let r) = self {
                return r.withObject { s in
                    if case .delivered(let id) = s.outcome { return body(id) }
                    return body(APNSID())
                }
            }
            return body(APNSID())
        }
        /// The `apns-unique-id` of the last answer, empty if none came.
        public var uniqueID: APNSID { readSent({ $0.answer.uniqueID }, else: APNSID()) }
        public var recoveries: Int { read({ $0.ticket.recoveries }, { $0.recoveries }) }
        public var claim: Int64 { read({ $0.ticket.claim }, { $0.claim }) }
        public var fanout: Int { readSent({ $0.ticket.fanout }, else: 1) }
        /// When a worker first took the job (UNIX ms); nil for one decided before sending.
        public var sinceMs: Int64? { readSent({ $0.ticket.sinceMs }, else: nil) }
        /// Monotonic times: taken from Redis, last sent, answered (0 when it never was).
        public var takenAtNs: UInt64 { readSent({ $0.ticket.takenAtNs }, else: 0) }
        public var sentAtNs: UInt64 { readSent({ $0.answer.sentAtNs }, else: 0) }
        public var answeredAtNs: UInt64 { readSent({ $0.answer.answeredAtNs }, else: 0) }
    }
}
