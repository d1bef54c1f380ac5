import APNSCore
import QueueContract

/// One notification (one job, one token) on its way to APNs, owned by one I/O thread.
/// A class: it moves through queues and dictionaries, and a move should cost one retain.
final class SendRequest: @unchecked Sendable { // handed over whole between threads, never shared
    /// The job's handle: its number in the queue's sequence (written as a string in records).
    let handle: Int64
    /// The job's batch in Redis, and its index there.
    let batch: TakenBatch
    let index: Int
    let job: Job
    let token: DeviceToken
    let app: Int
    let topic: String
    /// Monotonic time the job was taken from Redis.
    let takenAtNs: UInt64
    /// Failed tries so far, carried over from earlier retries in the job's envelope. The try that
    /// delivers is counted, not listed: no record lists the tries of a delivered job.
    var attempts: [OutcomeRecord.Attempt]
    let recoveries: Int
    /// How many sends this handle fanned out to; the job is acked when all are decided.
    let fanout: Int
    /// Monotonic times of the last send and of its answer (for the latency histograms).
    var sentAtNs: UInt64 = 0
    var answeredAtNs: UInt64 = 0
    /// The answer to the last send, filled in by the connection as frames arrive.
    var status = 0
    /// Empty until APNs sends one (`APNSID()`: an optional id costs generic value witnesses).
    var apnsID = APNSID()
    var responseBody: [UInt8] = []
    var answered = false
    /// Set once the send is decided, with the app's name for records and counters; read only
    /// then (through `FinishedJob`). Not optional: an optional outcome is destroyed through
    /// generic value witnesses.
    private(set) var outcome = Outcome.scheduled(atMs: 0)
    private(set) var appName: String?

    init(handle: Int64, batch: TakenBatch, index: Int, job: Job, token: DeviceToken, app: Int, topic: String, takenAtNs: UInt64,
         attempts: [OutcomeRecord.Attempt], recoveries: Int, fanout: Int) {
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
    consuming func decide(_ outcome: Outcome, appName: String) -> FinishedJob {
        self.outcome = outcome
        self.appName = appName
        return .sent(self)
    }

    /// Forgets the answer to any earlier send (a resend after a lost connection).
    func beginSend(atNs now: UInt64) {
        sentAtNs = now
        status = 0
        apnsID = APNSID()
        responseBody.removeAll()
        answered = false
    }
}

/// A decided send (or a job decided before sending), on its way back to Redis. A decided send
/// is its request, which carries the outcome: deciding allocates nothing.
@dynamicMemberLookup
enum FinishedJob: @unchecked Sendable { // handed over whole between threads, never shared
    case sent(SendRequest)
    case unsent(Unsent)

    /// A job decided before any send (unparsable, past its time, no such app…).
    final class Unsent {
        let handle: Int64
        let batch: TakenBatch
        let index: Int
        let raw: ArraySlice<UInt8>
        let job: Job?
        let appName: String?
        let topic: String?
        let outcome: Outcome
        let attempts: [OutcomeRecord.Attempt]
        let recoveries: Int

        init(handle: Int64, batch: TakenBatch, index: Int, raw: ArraySlice<UInt8>, job: Job?, appName: String?, topic: String?,
             outcome: Outcome, attempts: [OutcomeRecord.Attempt], recoveries: Int) {
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

    static func unsent(handle: Int64, batch: TakenBatch, index: Int, raw: ArraySlice<UInt8>, job: Job?, appName: String?, topic: String?,
                       outcome: Outcome, attempts: [OutcomeRecord.Attempt], recoveries: Int) -> FinishedJob {
        .unsent(Unsent(handle: handle, batch: batch, index: index, raw: raw, job: job, appName: appName, topic: topic,
                       outcome: outcome, attempts: attempts, recoveries: recoveries))
    }

    /// The job's fields, read in place (`Lent`); `f.handle` reads `f.lent.handle`.
    subscript<T>(dynamicMember field: KeyPath<Lent, T>) -> T { lent[keyPath: field] }

    /// This job without a reference count, for a caller that holds it while it reads it.
    var lent: Lent {
        switch self {
        case .sent(let r): .sent(Unmanaged.passUnretained(r))
        case .unsent(let u): .unsent(Unmanaged.passUnretained(u))
        }
    }

    /// A finished job lent by whoever holds it, valid while they do. A plain value: copied or
    /// captured, it counts nothing, where the completer's loops copied each job (an atomic
    /// retain and release per job and loop) around the calls they make with it.
    enum Lent {
        case sent(Unmanaged<SendRequest>)
        case unsent(Unmanaged<Unsent>)

        private func read<T>(_ sent: (SendRequest) -> T, _ unsent: (Unsent) -> T) -> T {
            switch self {
            case .sent(let r): r._withUnsafeGuaranteedRef(sent)
            case .unsent(let u): u._withUnsafeGuaranteedRef(unsent)
            }
        }

        private func readSent<T>(_ sent: (SendRequest) -> T, else absent: T) -> T {
            if case .sent(let r) = self { r._withUnsafeGuaranteedRef(sent) } else { absent }
        }

        var handle: Int64 { read({ $0.handle }, { $0.handle }) }
        var batch: TakenBatch { read({ $0.batch }, { $0.batch }) }
        func isIn(_ batch: ObjectIdentifier) -> Bool { read({ ObjectIdentifier($0.batch) == batch }, { ObjectIdentifier($0.batch) == batch }) }
        var index: Int { read({ $0.index }, { $0.index }) }
        /// The producer's job bytes (inside any envelope).
        var raw: ArraySlice<UInt8> { read({ $0.job.raw }, { $0.raw }) }
        var job: Job? { read({ $0.job }, { $0.job }) }
        /// The job without counting a reference on it.
        var unmanagedJob: Unmanaged<Job>? { read({ Unmanaged.passUnretained($0.job) }, { $0.job.map { Unmanaged.passUnretained($0) } }) }
        var token: DeviceToken? { readSent({ $0.token }, else: nil) }
        var appName: String? { read({ $0.appName }, { $0.appName }) }
        var topic: String? { read({ $0.topic }, { $0.topic }) }
        var outcome: Outcome { read({ $0.outcome }, { $0.outcome }) }
        /// Whether it was delivered, read in place: `outcome` copies the outcome and its strings.
        var isDelivered: Bool { readSent({ if case .delivered = $0.outcome { true } else { false } }, else: false) }
        var attempts: [OutcomeRecord.Attempt] { read({ $0.attempts }, { $0.attempts }) }
        /// How many, read in place: `attempts` copies the array.
        var attemptCount: Int { read({ $0.attempts.count }, { $0.attempts.count }) }
        /// The id of a delivered send, lent in place (an empty one for anything else).
        func withDeliveredID<R>(_ body: (borrowing APNSID) -> R) -> R {
            if case .sent(let r) = self {
                return r._withUnsafeGuaranteedRef { s in
                    if case .delivered(let id) = s.outcome { return body(id) }
                    return body(APNSID())
                }
            }
            return body(APNSID())
        }
        var recoveries: Int { read({ $0.recoveries }, { $0.recoveries }) }
        var fanout: Int { readSent({ $0.fanout }, else: 1) }
        /// Monotonic times: taken from Redis, last sent, answered (0 when it never was).
        var takenAtNs: UInt64 { readSent({ $0.takenAtNs }, else: 0) }
        var sentAtNs: UInt64 { readSent({ $0.sentAtNs }, else: 0) }
        var answeredAtNs: UInt64 { readSent({ $0.answeredAtNs }, else: 0) }
    }
}

extension Array {
    /// Appends `batch`; an empty array takes the batch's buffer instead, so that handing a batch
    /// between threads counts no reference per element.
    mutating func adopt(_ batch: [Element]) {
        if isEmpty { self = batch } else { append(contentsOf: batch) }
    }
}
