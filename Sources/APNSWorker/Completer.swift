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
    private let logger: Logger
    private let redis: RedisLink
    private let condition = NSCondition()
    private var queue: [FinishedJob] = []
    private let runner = ThreadRunner()
    private static let chunk = 500

    init(keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, gate: InflightGate, logger: Logger) {
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        self.gate = gate
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
        args.reserveCapacity(3 + batch.count * 5)
        let now = WallClock.nowMilliseconds()
        for f in batch {
            let r = OutcomeRecords.make(f, worker: workerID, timeMs: now)
            args.append(Array(f.handle.utf8))
            args.append(Array(r.stat.utf8))
            args.append(r.result)
            args.append(r.dead)
            args.append(r.invalid)
        }
        let scriptKeys = [keys.inflight(worker: workerID), keys.results, keys.deadLetters, keys.invalidTokens, keys.stats]
        while true {
            do {
                _ = try redis.with { r throws(RedisError) in try r.run(QueueScripts.complete, keys: scriptKeys, args: args) }
                return
            } catch {
                let stopping = !runner.isRunning
                // During shutdown with Redis gone, give up: the jobs stay in flight and are recovered.
                if stopping, case .io = error { return }
            }
        }
    }
}

/// Turns a decided outcome into the records of the Redis contract.
enum OutcomeRecords {
    struct Records {
        var stat: String
        var result: [UInt8] = []
        var dead: [UInt8] = []
        var invalid: [UInt8] = []
    }

    static func make(_ f: FinishedJob, worker: String, timeMs: Int64) -> Records {
        let context = OutcomeRecord.Context(handle: f.handle, jobID: f.job?.id, app: f.appName, token: f.job?.token.hex,
                                            topic: f.topic, worker: worker, timeMs: timeMs)
        let attempts = max(1, f.attempts.count)
        switch f.outcome {
        case .delivered(let apnsID):
            return Records(stat: "delivered", result: OutcomeRecord.result(context, delivered: apnsID, rejection: nil, attempts: attempts))
        case .rejected(let rejection):
            var r = Records(stat: "failed", result: OutcomeRecord.result(context, delivered: nil, rejection: rejection, attempts: attempts))
            switch rejection.reason.info.disposition {
            case .invalidToken:
                r.stat = "invalid_token"
                r.invalid = OutcomeRecord.invalidToken(context, rejection: rejection)
            default:
                r.stat = "dead_lettered"
                r.dead = OutcomeRecord.deadLetter(context, reason: rejection.reason.rawValue,
                                                  detail: "APNs answered \(rejection.status): \(rejection.reason.info.meaning)",
                                                  job: f.raw, attempts: f.attempts)
            }
            return r
        case .deadLetter(let why):
            let rejection = APNSRejection(status: 0, reason: APNSReason(why.reason), apnsID: nil, timestamp: nil)
            return Records(stat: "dead_lettered",
                           result: OutcomeRecord.result(context, delivered: nil, rejection: rejection, attempts: 0),
                           dead: OutcomeRecord.deadLetter(context, reason: why.reason, detail: why.detail, job: f.raw, attempts: f.attempts))
        }
    }
}
