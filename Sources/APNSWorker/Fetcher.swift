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
    /// Batch ids are this process's start time and a count: unique to the worker's life, so a
    /// batch left by an earlier run under the same worker id is never overwritten.
    private let life = String(WallClock.nowMilliseconds(), radix: 36)
    private var batchCount = 0
    /// Batches whose fetch reply was lost: the script may have run. Looked up once Redis answers.
    private var lost: [(id: String, number: Int)] = []
    private var nextLoop = 0
    /// Recorded jobs still to free (`Completer.takeRecorded`): one is freed as each job is taken,
    /// so that each free hands malloc's per-thread cache the blocks the next job allocates. Freed
    /// a batch at a time, most went back to the arena's bins and came out again the slow way.
    private var unfreed = UnfreedJobs()

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
        while runner.isRunning {
            let room = gate.waitForRoom(batchSize, timeout: 0.5)
            unfreed.add(completer.takeRecorded())
            guard room else { unfreed.freeAll(); continue }
            batchCount += 1
            let (id, number) = ("\(life)-\(batchCount)", batchCount)
            let taken: TakenJobs
            do {
                taken = try redis.with { r throws(RedisError) in
                    try r.run(QueueScripts.fetch, fetchArgs(id: id, max: batchSize), then: listArgs(id), flat: TakenJobs.init)
                }
            } catch {
                // The script may have run with its reply lost: look for the batch once Redis is back.
                if case .io = error { lost.append((id, number)) }
                continue
            }
            if !lost.isEmpty { findLost() }
            if taken.isEmpty {
                unfreed.freeAll()
                // Nothing queued: block up to 1 s for the next job, moved atomically to our staging list.
                _ = try? redis.with { r throws(RedisError) in
                    try r.command([ "BLMOVE", keys.jobs, keys.staging(worker: workerID), "RIGHT", "LEFT", "1"])
                }
                continue
            }
            route(taken, batch: TakenBatch(id: id, number: number, jobs: taken.count))
        }
    }

    private func fetchArgs(id: String, max: Int) -> RedisArgs {
        var args = RedisArgs(script: QueueScripts.fetch, keys: [keys.jobs, keys.batch(worker: workerID, id: id), keys.batches(worker: workerID),
                                                                 keys.workers, keys.staging(worker: workerID), keys.handleCounter,
                                                                 keys.holders])
        args.append(max)
        args.append(workerID)
        args.append(configuration.leaseMs)
        args.append(id)
        return args
    }

    private func listArgs(_ id: String) -> RedisArgs {
        RedisArgs(["LRANGE", keys.batch(worker: workerID, id: id), "0", "-1"])
    }

    /// Routes the batches of fetches whose reply was lost, if their script ran: their jobs are
    /// in flight under this worker, and nobody else would send them until it stops.
    private func findLost() {
        var found: [(TakenJobs, TakenBatch)] = []
        for (id, number) in lost {
            let hget = RedisArgs(["HGET", keys.batches(worker: workerID), id])
            guard let taken = try? redis.with({ r throws(RedisError) in
                try r.commands([hget, listArgs(id)], flat: TakenJobs.init)
            }) else { return } // Redis is still away: try again after the next fetch
            if !taken.isEmpty { found.append((taken, TakenBatch(id: id, number: number, jobs: taken.count))) }
        }
        lost.removeAll()
        for (taken, batch) in found {
            logger.warning("found jobs taken by a fetch whose reply was lost; sending them", ["count": .int(taken.count)])
            route(taken, batch: batch)
        }
    }

    /// Parses each taken job once; the payload bytes are kept, never re-encoded.
    private func route(_ taken: TakenJobs, batch: TakenBatch) {
        completer.unfinished.opened(batch)
        let now = MonotonicClock.nowNanoseconds()
        let nowMs = WallClock.nowMilliseconds()
        var batches = Array(repeating: [SendRequest](), count: sendLoops.count)
        var decided: [FinishedJob] = []
        var units = 0
        // Read in place; a job's slice of the buffer is made once, for the job to keep.
        taken.bytes.withUnsafeBufferPointer { all in
            for (index, range) in taken.ranges.enumerated() {
                unfreed.freeOne()
                let handle = taken.first + Int64(index)
                var meta = JobEnvelope.Meta()
                var opened: ArraySlice<UInt8>? // the job inside an envelope
                do throws(JobRejection) {
                    if JobEnvelope.isEnvelope(UnsafeBufferPointer(rebasing: all[range])) { (meta, opened) = try JobEnvelope.open(taken.bytes[range]) }
                    let parsed = try Job.parse(opened ?? taken.bytes[range])
                    let (app, topic) = try resolve(parsed)
                    if case .template = parsed.content { templates.refreshIfStale(redis) }
                    let job = try PayloadRenderer.render(consume parsed, templates: templates.library,
                                                         truncateByDefault: apps[app].configuration.truncateBody)
                    if let sendAt = job.sendAt, sendAt * 1000 > nowMs {
                        units += 1
                        decided.append(.unsent(handle: handle, batch: batch, index: index, raw: job.raw, job: job, appName: apps[app].name, topic: topic,
                                                         outcome: .scheduled(atMs: sendAt * 1000), attempts: meta.attempts,
                                                         recoveries: meta.recoveries))
                        continue
                    }
                    func send(_ token: DeviceToken, fanout: Int) {
                        batches[nextLoop].append(SendRequest(handle: handle, batch: batch, index: index, job: job, token: token, app: app,
                                                             topic: topic, takenAtNs: now, attempts: meta.attempts, recoveries: meta.recoveries,
                                                             fanout: fanout))
                        nextLoop = (nextLoop + 1) % sendLoops.count
                    }
                    // A retried piece of a fan-out job carries its one token in its envelope.
                    if let retried = meta.token.flatMap(DeviceToken.init) {
                        units += 1
                        send(retried, fanout: 1)
                    } else {
                        units += job.tokenCount
                        send(job.token, fanout: job.tokenCount)
                        for token in job.otherTokens { send(token, fanout: job.tokenCount) }
                    }
                } catch {
                    units += 1
                    decided.append(.unsent(handle: handle, batch: batch, index: index, raw: opened ?? taken.bytes[range], job: nil, appName: nil, topic: nil,
                                           outcome: .deadLetter(error), attempts: meta.attempts, recoveries: meta.recoveries))
                }
            }
        }
        // A fan-out job records many sends: what one freed per job taken cannot keep up with goes now.
        if unfreed.count > 4 * configuration.batchSize { unfreed.freeAll() }
        gate.add(sent: units - decided.count, decided: decided.count)
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
        // A topic the push type derives from the bundle is the app's; one the job names must be
        // the bundle or start with it and a dot.
        guard let topic = job.topic else { return (index, job.pushType.topic(forBundle: bundle)) }
        guard topic == bundle || topic.hasPrefix(bundle + ".") else {
            throw JobRejection(.topicDisallowed, "topic \"\(topic)\" is not a topic of app \(apps[index].name) (bundle \(bundle))")
        }
        return (index, topic)
    }
}

/// The jobs one fetch took, in order: job i has handle `first + i`.
struct TakenJobs {
    var first: Int64 = 0
    /// The jobs end to end in one buffer, and each one's range: a batch's jobs cost one
    /// allocation, and share it until the last is done.
    var bytes: [UInt8] = []
    var ranges: [Range<Int>] = []

    var count: Int { ranges.count }
    var isEmpty: Bool { ranges.isEmpty }

    /// Two replies read flat: the fetch script's {first handle, count} (or the batch's first
    /// handle from the batches hash, nil if it is not there), then the batch's list.
    init(_ reply: RedisFlatReply) throws(RedisError) {
        guard reply.count > 0 else { throw .server("no reply to the fetch") }
        let list: Int
        if reply.isArray(0) {
            guard let first = reply.integer(1) else { throw .server("the fetch script answered no handle") }
            self.first = first
            list = 3
        } else {
            first = reply.bytes(0).flatMap { Int64(String(decoding: $0, as: UTF8.self)) } ?? 0
            list = 1
        }
        guard first > 0 else { return }
        guard list < reply.count, reply.isArray(list) else { throw .server("the batch's jobs came back as no list") }
        (bytes, ranges) = reply.sharedStrings((list + 1)..<reply.count)
    }
}

/// Recorded jobs waiting to be freed on the fetch thread, freed one at a time.
struct UnfreedJobs {
    private var batches: [[FinishedJob]] = []
    private(set) var count = 0

    mutating func add(_ recorded: [[FinishedJob]]) {
        for b in recorded { count += b.count }
        batches.append(contentsOf: recorded)
    }

    mutating func freeOne() {
        while let last = batches.last, last.isEmpty { batches.removeLast() }
        guard !batches.isEmpty else { return }
        batches[batches.count - 1].removeLast()
        count -= 1
    }

    mutating func freeAll() {
        batches.removeAll()
        count = 0
    }
}
