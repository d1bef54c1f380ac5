import APNSCore
import Buffers
import Delivery
import PointerTricks
import QueueContract
import RedisClient

/// Turns a decided outcome into the records of the Redis contract, and decides retries.
/// Each outcome's two records are written straight into the completion transaction
/// (`writeFirst`, `writeSecond`), or with its kind into the complete script's arguments
/// (QueueScripts.complete) when the batch goes to the script.
enum OutcomeRecords {

    /// What to write for one outcome, and the counter it goes to.
    struct Decision {
        fileprivate let plan: Plan
        let stat: QueueStat
        fileprivate let attempts: Int

        /// The complete script's kind: r (result), d (result, dead letter), i (result, invalid
        /// token), c (result, invalid channel), s (schedule).
        var kind: CompletionKind {
            switch plan {
            case .delivered, .failed(_, .duplicate): .result
            case .schedule: .schedule
            case .failed(_, .deadLetter): .deadLetter
            case .failed(_, .invalidToken): .invalidToken
            case .failed(_, .invalidChannel): .invalidChannel
            }
        }

        /// A dead letter's reason, for its tally.
        var deadLetterReason: String? {
            if case .failed(let r, .deadLetter) = plan { return r.reason.rawValue }
            return nil
        }
    }

    fileprivate enum Plan {
        static func scheduled(_ meta: JobEnvelope.Meta, at: String, stat: QueueStat) -> Plan { .schedule(Scheduled(meta: meta, at: at, stat: stat)) }

        /// The id is read from the job's answer when its record is written: copied here, it
        /// was copied and destroyed once more per job.
        case delivered
        /// Boxed: a schedule is rare, and its envelope inline made every decision's copy larger.
        case schedule(Scheduled)
        /// Final and failed: a result, plus a record in one of the feeds.
        case failed(Rejection, Feed)
    }

    /// A send back to the schedule: its envelope's meta, when (`=ms` or `+ms`), and its counter.
    fileprivate final class Scheduled {
        let meta: JobEnvelope.Meta
        let at: String
        let stat: QueueStat
        init(meta: JobEnvelope.Meta, at: String, stat: QueueStat) {
            self.meta = meta
            self.at = at
            self.stat = stat
        }
    }

    /// Where a failed outcome's second record goes.
    fileprivate enum Feed {
        case deadLetter(detail: String)
        case invalidToken, invalidChannel
        /// Not sent: another job holds its idempotency key.
        case duplicate

        var stat: QueueStat {
            switch self {
            case .duplicate: .duplicate
            case .deadLetter: .deadLettered
            case .invalidToken: .invalidToken
            case .invalidChannel: .invalidChannel
            }
        }
    }

    static func decide(_ f: FinishedJob.Lent, worker: String) -> Decision {
        var attempts = f.attemptCount
        if f.isDelivered { attempts += 1 }  // the delivering try is not listed
        let plan = plan(f, worker: worker)
        let stat: QueueStat
        switch plan {
        case .delivered: stat = .delivered
        case .schedule(let s): stat = s.stat
        case .failed(_, let feed): stat = feed.stat
        }
        return Decision(plan: plan, stat: stat, attempts: attempts)
    }

    /// Appends the outcome's kind and its two records, each written in `record` first (emptied
    /// here; a caller's one buffer serves a whole batch).
    static func append(
        _ d: Decision, of f: FinishedJob.Lent, shared: UnsafeBufferPointer<UInt8>, withResult: Bool, to args: inout RedisArgs,
        using record: inout ByteBuffer
    ) {
        args.append(d.kind.rawValue)
        record.removeAll()
        // An empty first record: no result (the `results` setting).
        if withResult { writeFirst(d, of: f, shared: shared, into: &record) }
        args.append(bytes: record.bytes())
        record.removeAll()
        writeSecond(d, of: f, shared: shared, into: &record)
        args.append(bytes: record.bytes())
    }

    /// The first record: the result (or, for a schedule, the job in its envelope).
    static func writeFirst(_ d: Decision, of f: FinishedJob.Lent, shared: UnsafeBufferPointer<UInt8>, into out: inout ByteBuffer) {
        let context = Self.context(f, shared: shared)
        switch d.plan {
        case .delivered: f.withDeliveredID { OutcomeRecord.delivered(context, apnsID: $0, attempts: d.attempts, into: &out) }
        case .failed(let r, .duplicate): OutcomeRecord.duplicate(context, of: r.apnsID ?? "", into: &out)
        case .failed(let r, _): OutcomeRecord.result(context, delivered: nil, rejection: r, attempts: d.attempts, into: &out)
        case .schedule(let s): JobEnvelope.wrap(job: f.raw, meta: s.meta, into: &out)
        }
    }

    /// The second record: the dead letter or invalid-token record (for a schedule, its time);
    /// nothing for a delivery.
    static func writeSecond(_ d: Decision, of f: FinishedJob.Lent, shared: UnsafeBufferPointer<UInt8>, into out: inout ByteBuffer) {
        switch d.plan {
        case .delivered, .failed(_, .duplicate): break
        case .failed(let r, .deadLetter(let detail)):
            OutcomeRecord.deadLetter(
                Self.context(f, shared: shared), reason: r.reason.rawValue, detail: detail, job: f.raw,
                attempts: f.attempts, into: &out)
        case .failed(let r, .invalidToken), .failed(let r, .invalidChannel):
            OutcomeRecord.invalidToken(Self.context(f, shared: shared), rejection: r, into: &out)
        case .schedule(let s): s.at.withUTF8Bytes { out.append(UnsafeRawBufferPointer($0)) }
        }
    }

    /// Lends the job and the shared fields: the batch holds both while its records are written.
    private static func context(_ f: FinishedJob.Lent, shared: UnsafeBufferPointer<UInt8>) -> OutcomeRecord.Context {
        var context = OutcomeRecord.Context(handle: f.handle, lending: f.uncountedJob, token: f.token, shared: shared, names: f.names)
        context.uniqueID = f.uniqueID
        return context
    }

    /// The envelope of a send that waits in the schedule: only its token goes again.
    private static func tokenMeta(_ f: FinishedJob.Lent, worker: String) -> JobEnvelope.Meta {
        JobEnvelope.Meta(
            token: f.token?.hex, attempts: f.attempts, recoveries: f.recoveries,
            nonce: worker + "/" + String(f.handle) + "/" + (f.token?.hex ?? ""), since: f.sinceMs, claim: f.claim == 0 ? nil : f.claim)
    }

    private static func plan(_ f: FinishedJob.Lent, worker: String) -> Plan {
        if f.isDelivered { return .delivered }  // read in place: `outcome` copies it
        switch f.outcome {
        case .delivered:
            return .delivered
        case .scheduled(let atMs):
            return .scheduled(
                JobEnvelope.Meta(
                    attempts: f.attempts, recoveries: f.recoveries, nonce: worker + "/" + String(f.handle), claim: f.claim == 0 ? nil : f.claim),
                at: "=\(atMs)", stat: .scheduled)
        case .duplicate(let first):
            // The holder's claim rides as the rejection's id: one more case with a payload made
            // every decision's copy dearer.
            return .failed(Rejection(status: 0, reason: APNSReason("Duplicate"), apnsID: first, timestamp: nil), .duplicate)
        case .deadLetter(let why):
            return .failed(Rejection(status: 0, reason: APNSReason(why.reason), apnsID: nil, timestamp: nil), .deadLetter(detail: why.detail))
        case .rejected(_, .retry(let afterMs)):
            return .scheduled(tokenMeta(f, worker: worker), at: "+\(afterMs)", stat: .retried)
        case .deferred(let afterMs):
            return .scheduled(tokenMeta(f, worker: worker), at: "+\(afterMs)", stat: .deferred)
        case .rejected(let rejection, .invalidToken):
            return .failed(rejection, .invalidToken)
        case .rejected(let rejection, .invalidChannel):
            return .failed(rejection, .invalidChannel)
        case .rejected(let rejection, .deadLetter(let detail)):
            return .failed(rejection, .deadLetter(detail: detail))
        }
    }
}
