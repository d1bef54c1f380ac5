import APNSCore
import Foundation
import HTTP2TLS
import RedisClient

/// The fetch thread: takes jobs from Redis in atomic batches, parses and checks them, and hands
/// sendable ones to the I/O threads and bad ones straight to the completer.
final class Fetcher: @unchecked Sendable {
    private let keys: QueueKeys
    private let workerID: String
    private let configuration: WorkerConfiguration
    private let apps: [AppRuntime]
    private let sendLoops: [SendLoop]
    private let completer: Completer
    private let gate: InflightGate
    private let logger: Logger
    private let redis: RedisLink
    private let runner = ThreadRunner()
    private var nextLoop = 0

    init(keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, apps: [AppRuntime], sendLoops: [SendLoop],
         completer: Completer, gate: InflightGate, logger: Logger) {
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        self.apps = apps
        self.sendLoops = sendLoops
        self.completer = completer
        self.gate = gate
        self.logger = logger
        // Above the 1 s blocking wait, so the hiredis context never times out under it.
        redis = RedisLink(configuration.redis, timeoutMs: 5000, logger: logger)
    }

    func start() { runner.start(name: "apns-fetch") { [self] in run() } }

    /// Stops taking jobs; returns once the thread has finished its current batch.
    func stop() { runner.stop() }

    private func run() {
        let batchSize = configuration.batchSize
        while runner.isRunning {
            guard gate.waitForRoom(batchSize, timeout: 0.5) else { continue }
            let taken: [RedisReply]
            do {
                taken = try redis.with { r throws(RedisError) in
                    try r.run(QueueScripts.fetch,
                              keys: [keys.jobs, keys.inflight(worker: workerID), keys.handleCounter, keys.workers, keys.staging(worker: workerID)],
                              args: [Array(String(batchSize).utf8), Array(workerID.utf8), Array(String(configuration.leaseMs).utf8)]).array
                }
            } catch {
                continue
            }
            if taken.isEmpty {
                // Nothing queued: block up to 1 s for the next job, moved atomically to our staging list.
                _ = try? redis.with { r throws(RedisError) in
                    try r.command([ "BLMOVE", keys.jobs, keys.staging(worker: workerID), "RIGHT", "LEFT", "1"])
                }
                continue
            }
            gate.add(taken.count / 2)
            route(taken)
        }
    }

    /// Parses each taken job once; the payload bytes are kept, never re-encoded.
    private func route(_ taken: [RedisReply]) {
        let now = MonotonicClock.nowNanoseconds()
        var batches = Array(repeating: [SendRequest](), count: sendLoops.count)
        var rejected: [FinishedJob] = []
        var i = 0
        while i + 1 < taken.count {
            let handle = taken[i].text ?? ""
            guard case .string(let raw) = taken[i + 1] else { i += 2; continue }
            i += 2
            do {
                let job = try Job.parse(raw)
                let (app, topic) = try resolve(job)
                batches[nextLoop].append(SendRequest(handle: handle, job: job, app: app, topic: topic, takenAtNs: now))
                nextLoop = (nextLoop + 1) % sendLoops.count
            } catch {
                rejected.append(FinishedJob(handle: handle, raw: raw, job: nil, appName: nil, topic: nil,
                                            outcome: .deadLetter(error), attempts: []))
            }
        }
        for (loop, batch) in zip(sendLoops, batches) where !batch.isEmpty { loop.submit(batch) }
        if !rejected.isEmpty {
            logger.info("dead-lettered jobs that cannot be sent", ["count": .int(rejected.count), "first_reason": .string(rejected.first.map(Self.reason) ?? "")])
            completer.submit(rejected)
        }
    }

    private static func reason(_ f: FinishedJob) -> String {
        if case .deadLetter(let why) = f.outcome { return why.description }
        return ""
    }

    /// The app a job names (or the only/default app) and the topic it goes to.
    private func resolve(_ job: Job) throws(JobRejection) -> (Int, String) {
        let index: Int?
        if let name = job.app {
            index = apps.firstIndex { $0.name == name }
        } else {
            index = apps.count == 1 ? 0 : apps.firstIndex { $0.name == "default" }
        }
        guard let index else {
            throw JobRejection(JobRejection.unknownApp, job.app.map { "no app named \"\($0)\" is configured (known: \(apps.map(\.name).joined(separator: ", ")))" }
                               ?? "the job names no \"app\" and there is no app named \"default\"")
        }
        let bundle = apps[index].configuration.bundleID
        let topic = job.topic ?? job.pushType.topic(forBundle: bundle)
        guard topic == bundle || topic.hasPrefix(bundle + ".") else {
            throw JobRejection(.topicDisallowed, "topic \"\(topic)\" is not a topic of app \(apps[index].name) (bundle \(bundle))")
        }
        return (index, topic)
    }
}
