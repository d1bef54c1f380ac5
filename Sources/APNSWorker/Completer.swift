import APNSCore
import Foundation
import HTTP2TLS
import RedisClient
import Synchronization

/// The completion thread: writes decided outcomes to Redis in batches, each job's ack in the
/// same atomic step as its records (QueueScripts.complete), then frees room in the gate.
final class Completer: @unchecked Sendable {
    private let keys: QueueKeys
    private let workerID: String
    private let configuration: WorkerConfiguration
    private let gate: InflightGate
    private let metrics: Metrics
    private let logger: Logger
    private let redis: RedisLink
    private let condition = NSCondition()
    private var queue: [FinishedJob] = []
    /// Recorded jobs waiting for a fetcher to take and free them (`takeRecorded`).
    private let recorded = Mutex<[[FinishedJob]]>([])
    private let runner = ThreadRunner()
    private static let chunk = 500
    private let transaction: CompletionTransaction
    /// The completion transaction's RESP, reused from batch to batch.
    private var transactionBuffer = RedisTransaction(capacity: 1 << 18)
    /// Batches with unfinished jobs, for the check that rides on each transaction.
    let unfinished = UnfinishedBatches()
    /// After a transaction: the connection whose WATCH is on, and the number of the batch found
    /// in Redis since. A later transaction touching no older batch needs no check of its own.
    private var checked: (connection: ObjectIdentifier, number: Int)?

    init(keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, gate: InflightGate,
         metrics: Metrics, logger: Logger, linger: TimeInterval = 0.002) {
        self.linger = linger
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        self.gate = gate
        self.metrics = metrics
        self.logger = logger
        redis = RedisLink(configuration.redis, timeoutMs: 5000, logger: logger)
        transaction = CompletionTransaction(keys: keys, workerID: workerID, configuration: configuration)
        fullTransaction = max(1, configuration.recordingCapacity / 2)
    }

    func start() { runner.start(name: "apns-complete") { [self] in run() } }

    /// Safe from any thread.
    func submit(_ batch: [FinishedJob]) {
        condition.lock()
        queue.adopt(batch)
        // While the completer lingers, only a full transaction wakes it.
        if !lingering || queue.count >= fullTransaction { condition.signal() }
        condition.unlock()
    }

    /// A transaction is written once this many outcomes wait, or `linger` after the first: each
    /// transaction costs a sleep, a wake-up and a round trip, whatever its size. Half of what
    /// the gate lets wait, so that lingering never holds the fetcher back.
    private let fullTransaction: Int
    private let linger: TimeInterval
    /// Guarded by `condition`.
    private var lingering = false

    /// Writes what is queued, then ends the thread.
    func stop() {
        runner.stop { condition.lock(); condition.broadcast(); condition.unlock() }
    }

    private func run() {
        while true {
            condition.lock()
            while queue.isEmpty && runner.isRunning { _ = condition.wait(until: Date(timeIntervalSinceNow: 0.5)) }
            if queue.isEmpty && !runner.isRunning { condition.unlock(); return }
            if queue.count < fullTransaction && runner.isRunning {
                lingering = true
                let deadline = Date(timeIntervalSinceNow: linger)
                while queue.count < fullTransaction && runner.isRunning && condition.wait(until: deadline) {}
                lingering = false
            }
            var batch = queue
            queue = []
            condition.unlock()
            let total = batch.count
            var start = 0
            while start < total {
                let end = min(start + Completer.chunk, total)
                write(batch[start..<end])
                if end == total { handOver(&batch) } // before the gate wakes the fetcher
                gate.recorded(end - start)
                start = end
            }
        }
    }

    /// Moves recorded jobs to `recorded`, leaving this thread no reference to them.
    private func handOver(_ batch: inout [FinishedJob]) {
        recorded.withLock { q in
            q.append([])
            swap(&q[q.count - 1], &batch)
        }
    }

    /// The jobs recorded since the last call, for the calling thread to drop. The fetchers (on
    /// the I/O threads) take them: they allocated the jobs, and freeing them there keeps malloc's
    /// per-thread cache filled and its arena's lock uncontended, where frees from this thread
    /// took that lock against the fetcher's mallocs (futex calls on both threads).
    func takeRecorded() -> [[FinishedJob]] {
        var taken: [[FinishedJob]] = []
        recorded.withLock { swap(&$0, &taken) }
        return taken
    }

    /// Retries until Redis takes the batch: an outcome is never dropped.
    private func write(_ batch: ArraySlice<FinishedJob>) {
        var groups = AckGroups()
        // Each job's group, and the marks of fan-out pieces by position: an array of (group,
        // mark) pairs was destroyed element by element through generic tuple witnesses.
        var marked = Marks(capacity: batch.count)
        var decided = Decided(capacity: batch.count, fields: SharedFieldsCache(worker: workerID, timeMs: WallClock.nowMilliseconds()))
        forEachInPlace(batch) { i, f in
            let (group, piece) = groups.note(f, index: f.index, piece: isLastPiece(f) ? nil : f.token?.hex ?? "")
            marked.groups.append(group)
            if let piece { marked.pieces[i] = piece }
            let decision = records.decide(f, worker: workerID)
            decided.shared.append(decided.fields.fields(app: f.appName, topic: f.topic))
            decided.pairs.append(decided.counters.count(stat: decision.stat, app: f.appName ?? "-"))
            decided.decisions.append(decision) // its last use: moved, not copied
        }
        let recordable = CompletionTransaction.canRecord(decided.decisions.lazy.map(\.kind))
        var scriptArgs: RedisArgs? // built only if the batch goes to the script
        // After an I/O error the last write may have run with its reply lost: only the script,
        // which skips what is marked done, may write the batch again.
        var uncertain = false
        while true {
            do {
                let recorded = try redis.with { r throws(RedisError) -> Bool in
                    if recordable && !uncertain {
                        let next = unfinished.oldest(besides: groups.finishing)
                        let isChecked = checked.map { $0.connection == ObjectIdentifier(r) && groups.oldest!.number >= $0.number } ?? false
                        let (result, nextChecked) = try transaction.run(r, groups: groups, counters: decided.counters, checked: isChecked,
                                                                        next: next, buffer: &transactionBuffer) { t in
                            appendRecords(batch, decided, to: &t)
                        }
                        checked = nextChecked ? (ObjectIdentifier(r), next!.number) : nil
                        switch result {
                        case .recorded: return true
                        case .aborted: return false // jobs were taken back meanwhile: decide again
                        case .notAllInFlight: break
                        }
                    }
                    if scriptArgs == nil { scriptArgs = scriptArguments(batch, groups: groups, marked: marked, decided) }
                    _ = try r.run(QueueScripts.complete, scriptArgs!)
                    return true
                }
                guard recorded else { continue }
                groups.commit()
                count(batch, decided.decisions)
                return
            } catch {
                checked = nil // the WATCH may be gone with the connection
                if case .io = error { uncertain = true }
                // During shutdown with Redis gone, give up: the jobs stay in flight and are recovered.
                if !runner.isRunning, case .io = error { return }
            }
        }
    }

    /// Each job's ack group (`AckGroups`), and the mark of each fan-out piece that is not its
    /// job's last, by position in the batch.
    private struct Marks {
        var groups: [Int] = []
        var pieces: [Int: String] = [:]
        init(capacity: Int) { groups.reserveCapacity(capacity) }
    }

    /// A batch's decisions and counts.
    private struct Decided {
        var decisions: [OutcomeRecords.Decision] = []
        /// Each outcome's app, topic, worker and time, as its records write them (kept by
        /// `fields`, which the batch holds).
        var shared: [UnsafeBufferPointer<UInt8>] = []
        var fields: SharedFieldsCache
        /// Each outcome's counter pair (CounterPairs), for the script.
        var pairs: [Int] = []
        var counters = CounterPairs()

        init(capacity: Int, fields: SharedFieldsCache) {
            self.fields = fields
            decisions.reserveCapacity(capacity)
            shared.reserveCapacity(capacity)
            pairs.reserveCapacity(capacity)
        }
    }

    /// The records as XADDs, written straight into the transaction.
    private func appendRecords(_ batch: ArraySlice<FinishedJob>, _ d: Decided, to t: inout RedisTransaction) -> CompletionTransaction.Added {
        var added = CompletionTransaction.Added()
        // Decisions through a pointer: each is borrowed in place, where an array element read in a
        // closure was copied.
        d.decisions.withUnsafeBufferPointer { decisions in
            forEachInPlace(batch) { i, f in
                t.append(prefix: transaction.result) { OutcomeRecords.writeFirst(decisions[i], of: f, shared: d.shared[i], into: &$0) }
                switch decisions[i].kind {
                case .deadLetter:
                    t.append(prefix: transaction.deadLetter) { OutcomeRecords.writeSecond(decisions[i], of: f, shared: d.shared[i], into: &$0) }
                    added.deadLetters = true
                case .invalidToken:
                    t.append(prefix: transaction.invalidToken) {
                        OutcomeRecords.writeSecond(decisions[i], of: f, shared: d.shared[i], into: &$0)
                    }
                    added.invalidTokens = true
                case .result, .schedule: break
                }
            }
        }
        return added
    }

    /// Calls `body` with each job's position and the job, borrowed where it is: a `for` loop
    /// copies each one, counting a reference on its request (one fewer call to swift_retain per
    /// job in callgrind; the bodies still count others, perf uprobes show).
    private func forEachInPlace(_ batch: ArraySlice<FinishedJob>, _ body: (Int, borrowing FinishedJob) -> Void) {
        batch.withUnsafeBufferPointer { jobs in
            for i in jobs.indices { body(i, jobs[i]) }
        }
    }

    /// The complete script's arguments for the batch (QueueScripts.complete).
    private func scriptArguments(_ batch: ArraySlice<FinishedJob>, groups: AckGroups, marked: Marks, _ d: Decided) -> RedisArgs {
        var scriptKeys = [keys.results, keys.deadLetters, keys.invalidTokens, keys.stats, keys.scheduled, keys.batches(worker: workerID)]
        for g in groups.all {
            scriptKeys.append(keys.batch(worker: workerID, id: g.batch.id))
            scriptKeys.append(keys.batchDone(worker: workerID, id: g.batch.id))
        }
        var args = RedisArgs(script: QueueScripts.complete, keys: scriptKeys, capacity: 512 + batch.count * 400)
        args.append(configuration.resultsMax)
        args.append(configuration.deadLettersMax)
        args.append(configuration.invalidTokensMax)
        args.append(batch.count)
        for g in groups.all {
            args.append(g.batch.id)
            args.append(g.finishes ? "1" : "0")
        }
        for (i, f) in batch.enumerated() {
            args.append(marked.groups[i] + 1)
            if let piece = marked.pieces[i] { args.append(piece) } else { args.append(f.index) }
            args.append(d.pairs[i])
            OutcomeRecords.append(d.decisions[i], of: f, shared: d.shared[i], to: &args)
        }
        d.counters.append(to: &args)
        return args
    }

    private struct SeriesKey: Hashable {
        let app: String, pushType: PushType?, status: Int, reason: String, stat: OutcomeRecords.Stat
    }

    /// Counts the batch locally, then records it under one lock: labels are built per series,
    /// not per notification. Neighbours mostly share a series and an app, so runs are counted
    /// before anything is hashed.
    private func count(_ batch: ArraySlice<FinishedJob>, _ decisions: [OutcomeRecords.Decision]) {
        let now = MonotonicClock.nowNanoseconds()
        var series: [SeriesKey: Int] = [:]
        var run: (key: SeriesKey, count: Int)?
        var latencies: [AppLatencies] = []
        var current = -1
        forEachInPlace(batch) { i, f in
            let stat = decisions[i].stat
            let app = f.appName ?? "-"
            var status = 200, reason = ""
            if !f.isDelivered {
                switch f.outcome {
                case .delivered: break
                case .rejected(let r): status = r.status; reason = r.reason.rawValue
                case .deadLetter(let why): status = 0; reason = why.reason
                case .scheduled: return
                }
            }
            let key = SeriesKey(app: app, pushType: f.job?.pushType, status: status, reason: reason, stat: stat)
            if let r = run, r.key == key {
                run!.count += 1
            } else {
                if let r = run { series[r.key, default: 0] += r.count }
                run = (key, 1)
            }
            guard f.takenAtNs > 0 else { return }
            if current < 0 || latencies[current].app != app {
                current = latencies.firstIndex { $0.app == app } ?? { latencies.append(AppLatencies(app: app)); return latencies.count - 1 }()
            }
            if f.sentAtNs >= f.takenAtNs { latencies[current].waits.observe(Double(f.sentAtNs - f.takenAtNs) / 1e9) }
            if f.sentAtNs > 0, f.answeredAtNs >= f.sentAtNs { latencies[current].trips.observe(Double(f.answeredAtNs - f.sentAtNs) / 1e9) }
            if now >= f.takenAtNs { latencies[current].totals.observe(Double(now - f.takenAtNs) / 1e9) }
        }
        if let r = run { series[r.key, default: 0] += r.count }
        metrics.record { m in
            for (k, n) in series {
                let v = Double(n)
                m.add("apns_notifications_total", .init(("app", k.app), ("push_type", k.pushType?.rawValue ?? "-"), ("status", String(k.status)),
                                                        ("reason", k.reason)), v)
                switch k.stat {
                case .retried: m.add("apns_retries_total", .init(("app", k.app)), v)
                case .deadLettered: m.add("apns_dead_letters_total", .init(("app", k.app), ("reason", k.reason)), v)
                case .invalidToken: m.add("apns_invalid_tokens_total", .init(("app", k.app), ("reason", k.reason)), v)
                case .delivered, .scheduled: break
                }
            }
            for l in latencies {
                let labels = Metrics.Labels(("app", l.app))
                m.add("apns_queue_wait_seconds", labels, l.waits)
                m.add("apns_round_trip_seconds", labels, l.trips)
                m.add("apns_end_to_end_seconds", labels, l.totals)
            }
        }
    }

    /// One app's latencies from one batch, bucketed outside the metrics lock.
    private struct AppLatencies {
        let app: String
        var waits = Metrics.Histogram(), trips = Metrics.Histogram(), totals = Metrics.Histogram()
    }

    /// Fan-out pieces of one handle still to come; the job is acked with its last piece.
    private var remainingPieces: [Int64: Int] = [:]

    private func isLastPiece(_ f: FinishedJob) -> Bool {
        guard f.fanout > 1 else { return true }
        let left = (remainingPieces[f.handle] ?? f.fanout) - 1
        remainingPieces[f.handle] = left == 0 ? nil : left
        return left == 0
    }

    private lazy var records = OutcomeRecords(policy: configuration.retryPolicy)
}
