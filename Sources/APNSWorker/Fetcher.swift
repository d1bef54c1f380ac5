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
    private let templates: TemplateSource
    private let runner = ThreadRunner()
    /// The highest handle this process has received. Handles only grow from fetch to fetch, and
    /// each fetch's handles are one run (fetch thread only).
    private var highestReceived: Int64 = 0
    /// While a fetch's reply may have been lost: the highest handle received before, and the runs
    /// of handles received since. The lost jobs are the others above it in the in-flight hash.
    private var loss: (floor: Int64, received: [ClosedRange<Int64>])?
    private var nextLoop = 0

    init(keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, apps: [AppRuntime], sendLoops: [SendLoop],
         completer: Completer, gate: InflightGate, logger: Logger) throws {
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
        templates = try TemplateSource(directory: configuration.templatesDirectory, redisKey: keys.templates, logger: logger)
    }

    func start() { runner.start(name: "apns-fetch") { [self] in run() } }

    /// Stops taking jobs; returns once the thread has finished its current batch.
    func stop() { runner.stop() }

    private func run() {
        let batchSize = configuration.batchSize
        var fetchArgs = RedisArgs(script: QueueScripts.fetch, keys: [keys.jobs, keys.inflight(worker: workerID), keys.handleCounter,
                                                                      keys.workers, keys.staging(worker: workerID)])
        fetchArgs.append(batchSize)
        fetchArgs.append(workerID)
        fetchArgs.append(configuration.leaseMs)
        while runner.isRunning {
            guard gate.waitForRoom(batchSize, timeout: 0.5) else { continue }
            let taken: TakenJobs
            do {
                taken = try redis.with { r throws(RedisError) in
                    try r.run(QueueScripts.fetch, fetchArgs, flat: TakenJobs.init)
                }
            } catch {
                // The script may have run with its reply lost: find such jobs once Redis is back.
                if case .io = error, loss == nil { loss = (highestReceived, []) }
                continue
            }
            if loss != nil {
                if let first = taken.handles.first, let last = taken.handles.last { loss!.received.append(first...last) }
                if reconcile() { loss = nil }
            }
            if taken.isEmpty {
                // Nothing queued: block up to 1 s for the next job, moved atomically to our staging list.
                _ = try? redis.with { r throws(RedisError) in
                    try r.command([ "BLMOVE", keys.jobs, keys.staging(worker: workerID), "RIGHT", "LEFT", "1"])
                }
                continue
            }
            route(taken)
        }
    }

    /// Routes jobs that sit in our in-flight hash but that this process never received: moved by
    /// a fetch whose reply was lost. Returns false if Redis could not be asked.
    private func reconcile() -> Bool {
        guard let loss else { return true }
        guard let all = try? redis.with({ r throws(RedisError) in try r.command(["HGETALL", keys.inflight(worker: workerID)]).array }) else {
            return false
        }
        var inflight: [(handle: Int64, job: [UInt8])] = []
        var i = 0
        while i + 1 < all.count {
            if let handle = all[i].integer, case .string(let job) = all[i + 1] { inflight.append((handle, job)) }
            i += 2
        }
        let lost = TakenJobs.lost(in: inflight, above: loss.floor, except: loss.received)
        if !lost.isEmpty {
            logger.warning("found jobs moved in flight by a fetch whose reply was lost; sending them", ["count": .int(lost.handles.count)])
            route(lost)
        }
        return true
    }

    /// Parses each taken job once; the payload bytes are kept, never re-encoded.
    private func route(_ taken: TakenJobs) {
        let now = MonotonicClock.nowNanoseconds()
        let nowMs = WallClock.nowMilliseconds()
        var batches = Array(repeating: [SendRequest](), count: sendLoops.count)
        var decided: [FinishedJob] = []
        var units = 0
        for (h, bytes) in zip(taken.handles, taken.jobs) {
            let handle = String(h)
            var meta = JobEnvelope.Meta()
            var raw = bytes
            do {
                if JobEnvelope.isEnvelope(bytes) { (meta, raw) = try JobEnvelope.open(bytes) }
                let parsed = try Job.parse(raw)
                let (app, topic) = try resolve(parsed)
                if case .template = parsed.content { templates.refreshIfStale(redis) }
                let job = try PayloadRenderer.render(parsed, templates: templates.library,
                                                     truncateByDefault: apps[app].configuration.truncateBody)
                if let sendAt = job.sendAt, sendAt * 1000 > nowMs {
                    units += 1
                    decided.append(.unsent(handle: handle, raw: raw, job: job, appName: apps[app].name, topic: topic,
                                                     outcome: .scheduled(atMs: sendAt * 1000), attempts: meta.attempts,
                                                     recoveries: meta.recoveries))
                    continue
                }
                let tokens = meta.token.flatMap(DeviceToken.init).map { [$0] } ?? job.tokens
                units += tokens.count
                for token in tokens {
                    batches[nextLoop].append(SendRequest(handle: handle, job: job, token: token, app: app, topic: topic, takenAtNs: now,
                                                         attempts: meta.attempts, recoveries: meta.recoveries, fanout: tokens.count))
                    nextLoop = (nextLoop + 1) % sendLoops.count
                }
            } catch {
                units += 1
                decided.append(.unsent(handle: handle, raw: raw, job: nil, appName: nil, topic: nil,
                                       outcome: .deadLetter(error), attempts: meta.attempts, recoveries: meta.recoveries))
            }
        }
        gate.add(units)
        if let top = taken.handles.max() { highestReceived = max(highestReceived, top) }
        for (loop, batch) in zip(sendLoops, batches) where !batch.isEmpty { loop.submit(batch) }
        if !decided.isEmpty {
            let dead = decided.filter { if case .deadLetter = $0.outcome { return true } else { return false } }
            if !dead.isEmpty {
                logger.info("dead-lettered jobs that cannot be sent", ["count": .int(dead.count), "first_reason": .string(Self.reason(dead[0]))])
            }
            completer.submit(decided)
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

/// The jobs one fetch took, with their in-flight handles.
struct TakenJobs {
    var handles: [Int64] = []
    var jobs: [[UInt8]] = []

    var isEmpty: Bool { handles.isEmpty }

    init() {}

    /// Jobs of the in-flight hash that fetches with lost replies moved there: above `floor` (the
    /// highest handle received before the first loss) and in none of the runs received since.
    static func lost(in inflight: [(handle: Int64, job: [UInt8])], above floor: Int64, except received: [ClosedRange<Int64>]) -> TakenJobs {
        var lost = TakenJobs()
        for (handle, job) in inflight.sorted(by: { $0.handle < $1.handle })
        where handle > floor && !received.contains(where: { $0.contains(handle) }) {
            lost.handles.append(handle)
            lost.jobs.append(job)
        }
        return lost
    }

    /// The fetch script's reply: handle, job, handle, job, … (an empty array when nothing was queued).
    init(_ reply: RedisFlatReply) throws(RedisError) {
        guard reply.count > 0, reply.isArray(0) else { throw .server("the fetch script answered no list") }
        let n = (reply.count - 1) / 2
        handles.reserveCapacity(n)
        jobs.reserveCapacity(n)
        var i = 1
        while i + 1 < reply.count {
            if let handle = reply.integer(i), let job = reply.bytes(i + 1) {
                handles.append(handle)
                jobs.append(job)
            }
            i += 2
        }
    }
}
