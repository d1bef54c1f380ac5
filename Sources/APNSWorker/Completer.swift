import APNSCore
import Foundation
import RedisClient

/// The completion thread: writes decided outcomes to Redis in batches, each job's ack in the
/// same atomic step as its records (QueueScripts.complete), then frees room in the gate.
final class Completer: @unchecked Sendable {
    private let keys: QueueKeys
    private let workerID: String
    private let configuration: WorkerConfiguration
    private let gate: InflightGate
    private let outstanding: OutstandingHandles
    private let logger: Logger
    private let redis: RedisLink
    private let condition = NSCondition()
    private var queue: [FinishedJob] = []
    private let runner = ThreadRunner()
    private static let chunk = 500

    init(keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, gate: InflightGate,
         outstanding: OutstandingHandles, logger: Logger) {
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        self.gate = gate
        self.outstanding = outstanding
        self.logger = logger
        redis = RedisLink(configuration.redis, timeoutMs: 5000, logger: logger)
    }

    func start() { runner.start(name: "apns-complete") { [self] in run() } }

    /// Safe from any thread.
    func submit(_ batch: [FinishedJob]) {
        condition.lock()
        queue.append(contentsOf: batch)
        condition.signal()
        condition.unlock()
    }

    /// Writes what is queued, then ends the thread.
    func stop() {
        runner.stop { condition.lock(); condition.broadcast(); condition.unlock() }
    }

    private func run() {
        while true {
            condition.lock()
            while queue.isEmpty && runner.isRunning { condition.wait(until: Date(timeIntervalSinceNow: 0.5)) }
            if queue.isEmpty && !runner.isRunning { condition.unlock(); return }
            let batch = queue
            queue.removeAll(keepingCapacity: true)
            condition.unlock()
            var start = 0
            while start < batch.count {
                let end = min(start + Completer.chunk, batch.count)
                write(batch[start..<end])
                gate.remove(end - start)
                start = end
            }
        }
    }

    /// Retries until Redis takes the batch: an outcome is never dropped.
    private func write(_ batch: ArraySlice<FinishedJob>) {
        var args: [[UInt8]] = [Array(String(configuration.resultsMax).utf8), Array(String(configuration.deadLettersMax).utf8),
                               Array(String(configuration.invalidTokensMax).utf8)]
        args.reserveCapacity(3 + batch.count * 8)
        let now = WallClock.nowMilliseconds()
        var acked: [String] = []
        for f in batch {
            let r = records.make(f, worker: workerID, timeMs: now)
            let last = isLastPiece(f)
            if last { acked.append(f.handle) }
            args.append(Array(f.handle.utf8))
            args.append(last ? [UInt8(ascii: "1")] : [UInt8(ascii: "0")])
            args.append(Array(r.stat.utf8))
            args.append(r.result)
            args.append(r.dead)
            args.append(r.invalid)
            args.append(r.schedule)
            args.append(Array(r.scheduleAt.utf8))
        }
        let scriptKeys = [keys.inflight(worker: workerID), keys.results, keys.deadLetters, keys.invalidTokens, keys.stats, keys.scheduled]
        while true {
            do {
                _ = try redis.with { r throws(RedisError) in try r.run(QueueScripts.complete, keys: scriptKeys, args: args) }
                outstanding.remove(acked)
                return
            } catch {
                // During shutdown with Redis gone, give up: the jobs stay in flight and are recovered.
                if !runner.isRunning, case .io = error { return }
            }
        }
    }

    /// Fan-out pieces of one handle still to come; the job is acked with its last piece.
    private var remainingPieces: [String: Int] = [:]

    private func isLastPiece(_ f: FinishedJob) -> Bool {
        guard f.fanout > 1 else { return true }
        let left = (remainingPieces[f.handle] ?? f.fanout) - 1
        remainingPieces[f.handle] = left == 0 ? nil : left
        return left == 0
    }

    private lazy var records = OutcomeRecords(policy: configuration.retryPolicy)
}

/// Turns a decided outcome into the records of the Redis contract, and decides retries.
struct OutcomeRecords {
    let policy: RetryPolicy
    private var rng = SystemRandomNumberGenerator()

    init(policy: RetryPolicy) { self.policy = policy }

    struct Records {
        var stat: String
        var result: [UInt8] = []
        var dead: [UInt8] = []
        var invalid: [UInt8] = []
        /// An envelope to put in the schedule, and when: "+<ms>" from now, or "=<UNIX ms>".
        var schedule: [UInt8] = []
        var scheduleAt = ""
    }

    mutating func make(_ f: FinishedJob, worker: String, timeMs: Int64) -> Records {
        let context = OutcomeRecord.Context(handle: f.handle, jobID: f.job?.id, app: f.appName, token: f.token?.hex,
                                            topic: f.topic, worker: worker, timeMs: timeMs)
        let attempts = f.attempts.count
        switch f.outcome {
        case .delivered(let apnsID):
            return Records(stat: "delivered", result: OutcomeRecord.result(context, delivered: apnsID, rejection: nil, attempts: attempts))
        case .scheduled(let atMs):
            let meta = JobEnvelope.Meta(attempts: f.attempts, recoveries: f.recoveries, nonce: worker + "/" + f.handle)
            return Records(stat: "scheduled", schedule: JobEnvelope.wrap(job: f.raw, meta: meta), scheduleAt: "=\(atMs)")
        case .deadLetter(let why):
            let rejection = APNSRejection(status: 0, reason: APNSReason(why.reason), apnsID: nil, timestamp: nil)
            return Records(stat: "dead_lettered",
                           result: OutcomeRecord.result(context, delivered: nil, rejection: rejection, attempts: attempts),
                           dead: OutcomeRecord.deadLetter(context, reason: why.reason, detail: why.detail, job: f.raw, attempts: f.attempts))
        case .rejected(let rejection):
            let info = rejection.reason.info
            if case .retry(let kind) = info.disposition {
                switch policy.decide(kind, attempts: attempts, jobMaxAttempts: f.job?.maxAttempts, using: &rng) {
                case .retry(let afterMs):
                    let meta = JobEnvelope.Meta(token: f.token?.hex, attempts: f.attempts, recoveries: f.recoveries,
                                                nonce: worker + "/" + f.handle + "/" + (f.token?.hex ?? ""))
                    return Records(stat: "retried", schedule: JobEnvelope.wrap(job: f.raw, meta: meta), scheduleAt: "+\(afterMs)")
                case .giveUp:
                    break
                }
            }
            var r = Records(stat: "dead_lettered", result: OutcomeRecord.result(context, delivered: nil, rejection: rejection, attempts: attempts))
            if info.disposition == .invalidToken {
                r.stat = "invalid_token"
                r.invalid = OutcomeRecord.invalidToken(context, rejection: rejection)
            } else {
                r.dead = OutcomeRecord.deadLetter(context, reason: rejection.reason.rawValue,
                                                  detail: "APNs answered \(rejection.status): \(info.meaning) (after \(attempts) attempts)",
                                                  job: f.raw, attempts: f.attempts)
            }
            return r
        }
    }
}
