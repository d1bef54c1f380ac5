import APNSCore
import Configuration
import FoundationEssentials
import Glibc
import IOLoop
import QueueContract
import RedisClient
import Telemetry

/// The housekeeping thread: renews this worker's lease, promotes due retries and scheduled
/// jobs, and takes back the jobs of workers whose lease ran out (`kill -9`). Every worker runs
/// one for each key set it serves, so no coordinator is needed: each step is one atomic script.
final class Housekeeper: @unchecked Sendable {
    let keys: QueueKeys
    /// The one for the queue's own keys also writes what is the queue's: paused apps, the
    /// worker's info, and the count of resends that may duplicate.
    var hasQueueDuties: Bool { keys.shard == nil }
    /// The first key set's writes the process's count of resends that may duplicate.
    private let writesMayDuplicate: Bool
    let workerID: String
    private let configuration: WorkerConfiguration
    let logger: Logger
    let redis: ReconnectingRedisConnection
    private let runner = ThreadRunner()
    private let metrics: Metrics
    private let intervalMs: Int
    /// The batch ids of this process start with it: a previous run's do not.
    private let ownBatches: String
    /// The previous run's leftovers are back (tried until Redis takes it: it may be down at start).
    private var previousRunRecovered = false
    private var warnedPreviousRun = false

    private let lease: LeaseGuard
    /// The ids of the batches this process's completers hold unfinished.
    private let held: @Sendable () -> Set<String>
    /// This process's batches that Redis listed while no completer held them, at the last check.
    private var strandedBefore: Set<String> = []
    private var lastStrandedCheckMs: UInt64 = 0

    init(
        keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, metrics: Metrics, logger: Logger, ownBatches: String,
        lease: LeaseGuard, held: @escaping @Sendable () -> Set<String>, masterWatch: MasterWatch? = nil, writesMayDuplicate: Bool = true
    ) {
        self.masterWatch = masterWatch
        self.writesMayDuplicate = writesMayDuplicate
        self.held = held
        self.lease = lease
        self.ownBatches = ownBatches
        self.metrics = metrics
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        self.logger = logger
        redis = ReconnectingRedisConnection(
            configuration.redis.routed(toKey: keys.jobs), timeoutMs: configuration.redisReplyTimeoutMs, logger: logger)
        // Three or more renewals per lease; due retries wait at most 100 ms for promotion.
        intervalMs = max(20, min(100, configuration.leaseMs / 3))
    }

    /// Takes back what a previous run under the same worker id left in flight: its batches, never
    /// this process's, so it may run late. Tried at start and on each tick until it succeeds.
    func recoverPreviousRun() {
        guard !previousRunRecovered else { return }
        do {
            try redis.with { r throws(RedisError) in try recover(r, worker: workerID, mode: .force, excluding: ownBatches) }
            previousRunRecovered = true
        } catch {
            if !warnedPreviousRun {
                logger.warning("cannot take back what this worker's previous run left yet; trying again", ["error": .string("\(error)")])
            }
            warnedPreviousRun = true
        }
    }

    func start() { runner.start(name: keys.shard.map { "apns-housekeeper-\($0)" } ?? "apns-housekeeper") { [self] in run() } }

    /// Moves the resends that may duplicate, counted in this process, to the stats hash; what
    /// Redis does not take is kept for the next call.
    func writeMayDuplicate(_ r: BlockingRedisConnection) throws(RedisError) {
        let n = metrics.takeMayDuplicate()
        guard n > 0 else { return }
        do throws(RedisError) {
            _ = try r.command(["HINCRBY", keys.stats, "may_duplicate", String(n)])
        } catch {
            metrics.returnMayDuplicate(n)
            throw error
        }
    }

    /// Tells `health` of its Redis connection's state, and publishes its paused apps from it.
    func reportRedis(to health: HealthState) {
        redis.label = keys.shard == nil ? redis.label : "housekeeper \(keys.label)"
        redis.health = health
        self.health = health
        health.redis(redis.label, error: "not connected yet")
    }

    var health: HealthState?
    /// The paused apps last written to the queue's paused hash, and why.
    var publishedPauses: [String: String] = [:]
    /// What this worker says of itself in the worker-info hash (nil: nothing), and when it last did.
    var describeWorker: (@Sendable () -> String)?
    var lastInfoMs: UInt64 = 0
    var lastSnapshotMs: UInt64 = 0
    var warnedPublishing = false

    func stop() { runner.stop() }

    /// Behind Sentinel: a switch of master, which each housekeeper follows on its key set.
    private let masterWatch: MasterWatch?

    /// After a switch of master, on the new one: takes back every batch this process held in
    /// this key set. Outcomes written since the switch went to the old master alone, and a
    /// batch's last ack written on the new one would delete the batch with their jobs unrecorded;
    /// taken back, the jobs without an outcome there go again (each counted as may_duplicate).
    private func followFailover() {
        guard let masterWatch, masterWatch.current != masterSeen else { return }
        let generation = masterWatch.current
        redis.reset()
        let holding = held()
        do {
            let (requeued, _) = try redis.with { r throws(RedisError) in try recover(r, worker: workerID, mode: .failover, only: holding) }
            masterSeen = generation
            lease.failoverTakenBack()
            logger.warning(
                "took back on the new master what this worker held: jobs without an outcome there go again",
                ["batches": .int(holding.count), "requeued": .int(Int(requeued))])
        } catch {
            // Tried again on the next turn; sends wait meanwhile.
        }
    }
    private var masterSeen = 0

    private func run() {
        var lastSweep: UInt64 = 0
        let ages = [configuration.resultsMaxAgeSeconds, configuration.deadLettersMaxAgeSeconds, configuration.invalidTokensMaxAgeSeconds]
        let sweepEveryMs = UInt64(min(10_000, (ages.compactMap { $0 }.min() ?? 20) * 500))
        while runner.isRunning {
            recoverPreviousRun()
            followFailover()
            tick()
            let now = MonotonicClock.nowMilliseconds()
            if now - lastSweep >= sweepEveryMs {
                trimByAge()
                lastSweep = now
            }
            usleep(UInt32(intervalMs) * 1000)
        }
    }

    /// Drops stream entries older than the age caps (entry ids start with their time in ms).
    private func trimByAge() {
        let caps = [
            (keys.results, configuration.resultsMaxAgeSeconds), (keys.deadLetters, configuration.deadLettersMaxAgeSeconds),
            (keys.invalidTokens, configuration.invalidTokensMaxAgeSeconds),
            (keys.invalidChannels, configuration.invalidTokensMaxAgeSeconds),
        ]
        let nowMs = WallClock.nowMilliseconds()
        for case let (key, seconds?) in caps {
            _ = try? redis.with { r throws(RedisError) in
                try r.command(["XTRIM", key, "MINID", String(nowMs - Int64(seconds) * 1000)])
            }
        }
    }

    private func tick() {
        _ = try? redis.with { r throws(RedisError) in
            let sentAt = MonotonicClock.nowMilliseconds()
            let expired = try r.run(QueueScripts.tick, QueueScripts.tickCall(keys, worker: workerID, leaseMs: configuration.leaseMs)).array
            lease.renewed(sentAtMs: sentAt, answeredAtMs: MonotonicClock.nowMilliseconds())
            if writesMayDuplicate { try writeMayDuplicate(r) }
            for worker in expired.compactMap(\.text) {
                try recover(r, worker: worker, mode: .lease)
                if hasQueueDuties { _ = try r.command(["HDEL", keys.workerInfo, worker]) }
            }
            if hasQueueDuties { try publishPauses(r) }
            try takeBackStranded(r)
        }
        publishForOperators()
    }

    /// A failover can lose completions the old master took after its replica was promoted: the
    /// new master then lists batches this process has finished, and their jobs would stay in
    /// flight for as long as the lease is renewed. A batch listed so in two checks 2 s apart
    /// (a fetch's reply, or a completion, is never that late) is taken back and sent again: its
    /// results went with the old master. The take-back's fence voids a completion still on its way.
    private func takeBackStranded(_ r: BlockingRedisConnection) throws(RedisError) {
        let now = MonotonicClock.nowMilliseconds()
        guard now - lastStrandedCheckMs >= 2000 else { return }
        lastStrandedCheckMs = now
        let listed = try r.command(["HGETALL", keys.batches(worker: workerID)]).array.compactMap(\.text)
        let holding = held()
        var stranded: Set<String> = []
        for i in stride(from: 0, to: listed.count - 1, by: 2) where listed[i].hasPrefix(ownBatches) && InFlightJobs.Field(listed[i]) != .fence {
            if !holding.contains(listed[i]) { stranded.insert(listed[i]) }
        }
        let confirmed = stranded.intersection(strandedBefore)
        strandedBefore = stranded.subtracting(confirmed)
        guard !confirmed.isEmpty else { return }
        let (requeued, poisoned) = try recover(r, worker: workerID, mode: .force, only: confirmed)
        logger.warning(
            "Redis lists batches this worker finished (a failover lost their completions): their jobs go again",
            ["batches": .int(confirmed.count), "requeued": .int(Int(requeued)), "poison_pills": .int(Int(poisoned))])
    }

    @discardableResult
    private func recover(
        _ r: BlockingRedisConnection, worker: String, mode: InFlightJobs.Recovery, excluding: String? = nil, only: Set<String>? = nil
    ) throws(RedisError) -> (requeued: Int64, poisoned: Int64) {
        var caps = configuration.recordCaps
        if configuration.results == .none { caps.results = 0 }  // a poison pill gets no result record either
        let (requeued, poisoned) = try InFlightJobs.recover(
            r, keys, worker: worker, maxRecoveries: configuration.maxRecoveries, caps: caps, mode: mode, excludingBatchesOf: excluding,
            only: only)
        if requeued + poisoned > 0 {
            metrics.record {
                $0.add("apns_recoveries_total", .init(), Double(requeued + poisoned))
                // The script counted them in the stats hash.
                $0.add("apns_resends_may_duplicate_total", .init(("cause", "taken_back")), Double(requeued))
            }
        }
        if requeued + poisoned > 0, only == nil {
            logger.warning(
                "took back the jobs of a worker that stopped renewing its lease",
                [
                    "dead_worker": .string(worker), "requeued": .int(Int(requeued)), "poison_pills": .int(Int(poisoned)),
                ])
        }
        return (requeued, poisoned)
    }
}
