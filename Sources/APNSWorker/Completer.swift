import APNSCore
import APNSTransport
import Buffers
import Configuration
import Delivery
import FoundationEssentials
import IOLoop
import PointerTricks
import QueueContract
import RedisClient
import Synchronization
import Telemetry

/// Writes decided outcomes to Redis in batches, each job's ack in the same atomic step as its
/// records (QueueScripts.complete), then frees room in the gate. One per I/O thread, on its
/// event loop: outcomes are written by the thread that decided them, on a connection of its
/// own, without a hand-over to another thread.
final class Completer: EventLoopRedisOwner, DecidedSink, @unchecked Sendable {  // the owning loop's thread only, but `submit`
    let keys: QueueKeys
    let workerID: String
    let configuration: WorkerConfiguration
    private let gate: InFlightGate
    let metrics: Metrics
    let logger: Logger
    private let loop: EventLoop
    let redis: EventLoopRedisConnection
    /// Outcomes waiting for the next transaction.
    private var queue: [FinishedJob] = []
    /// Outcomes being written, a chunk at a time, and where the chunk being written starts and ends.
    private var current: [FinishedJob] = []
    private var chunkStart = 0, chunkEnd = 0
    private var writing: Writing?
    /// Written jobs, for the lane's fetcher to free as it takes new ones.
    let recorded = RecordedJobs()
    private static let chunk = 500
    let transaction: CompletionTransaction
    /// The completion transaction's RESP, reused from batch to batch.
    private var transactionBuffer = RedisTransaction(capacity: 1 << 18)
    /// Batches with unfinished jobs, for the check that rides on each transaction.
    let unfinished: UnfinishedBatches
    /// Where the chunk's writing stands, and what it sends next.
    private var steps: CompletionSteps
    /// When it last logged that its jobs were taken back (once per 10 s at most).
    private var lastTakenBackLogMs: UInt64 = 0
    /// Whether the last WAIT saw too few replicas (logged when it changes).
    var replicasShort = false
    /// A transaction is written once this many outcomes wait, or `linger` after the first: each
    /// transaction costs a round trip, whatever its size. Half of what the gate lets wait, so
    /// that lingering never holds the fetcher back.
    private let fullTransaction: Int
    private let lingerMs: Int
    /// Counts lingers, so that a linger's timer that fires after a full transaction started is ignored.
    private var lingerCount = 0
    private var lingering = false
    private var stopping = false
    private var stopped: (@Sendable () -> Void)?

    init(
        keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, gate: InFlightGate,
        metrics: Metrics, logger: Logger, loop: EventLoop, lane: Int = 0, linger: TimeInterval = 0.002
    ) {
        unfinished = UnfinishedBatches(lane: lane)
        lingerMs = max(1, Int((linger * 1000).rounded()))
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        self.gate = gate
        self.metrics = metrics
        self.logger = logger
        self.loop = loop
        redis = EventLoopRedisConnection(
            configuration.redis.routed(toKey: keys.jobs), loop: loop, logger: logger, replyTimeoutMs: configuration.redisReplyTimeoutMs)
        transaction = CompletionTransaction(keys: keys, workerID: workerID, caps: configuration.recordCaps)
        fullTransaction = max(1, configuration.recordingCapacity / 2)
        steps = CompletionSteps(waitsForReplicas: configuration.waitReplicas > 0)
        redis.owner = self
    }

    /// Loop thread: connects.
    func start() { redis.start() }

    /// Tells `health` of its Redis connection's state, as `name`.
    func reportRedis(to health: HealthState, as name: String) { redis.report(to: health, as: name) }

    /// Outcomes to write. From the loop's thread (its answers) directly; from any other, through
    /// the loop.
    func submit(_ batch: [FinishedJob]) {
        if loop.isCurrentThread { accept(batch) } else { loop.execute { [self] in accept(batch) } }
    }

    /// Writes what is queued without lingering, then closes the connection and calls `done`
    /// (loop thread). With Redis gone, what cannot be written stays in flight, to be recovered.
    func finish(then done: @escaping @Sendable () -> Void) {
        stopping = true
        stopped = done
        writeIfDue()
        stopIfIdle()
    }

    /// Each decided send is queued as it is decided: gathering a turn's in an array of their own
    /// and appending that to the queue counted a reference per job more.
    func add(_ decided: consuming FinishedJob) { queue.append(decided) }

    /// Jobs answered (or decided) and not yet in Redis: this lane's part of the recording stage.
    var recordingJobs: Int { writing == nil ? queue.count : queue.count + current.count - chunkStart }

    func turnEnded(decided: Int) {
        gate.answered(decided)
        writeIfDue()
    }

    func dropped(_ n: Int) { gate.dropped(n) }

    private func accept(_ batch: [FinishedJob]) {
        queue.adopt(batch)
        writeIfDue()
    }

    /// Starts a transaction if enough waits, or lingers for more. Loop thread.
    func writeIfDue() {
        guard writing == nil, !queue.isEmpty else { return }
        if queue.count >= fullTransaction || stopping { return startWriting() }
        guard !lingering else { return }
        lingering = true
        let count = lingerCount
        loop.schedule(afterMilliseconds: lingerMs) { [weak self] in
            guard let self, lingerCount == count, writing == nil else { return }
            startWriting()
        }
    }

    private func startWriting() {
        lingering = false
        lingerCount += 1
        swap(&current, &queue)
        queue.reserveCapacity(fullTransaction)
        chunkEnd = 0
        nextChunk()
    }

    private func nextChunk() {
        chunkStart = chunkEnd
        chunkEnd = min(chunkStart + Completer.chunk, current.count)
        let w = prepare(current[chunkStart..<chunkEnd])
        writing = w
        steps.begin(oldest: w.groups.oldest!, recordable: w.recordable)
        attempt()
    }

    private func stopIfIdle() {
        guard stopping, writing == nil, queue.isEmpty, let done = stopped else { return }
        stopped = nil
        redis.close()
        done()
    }

    // MARK: Writing a chunk

    /// A chunk being written: its decisions, and the script's arguments once made.
    private final class Writing {
        let groups: AckGroups
        let marked: Marks
        let decided: Decided
        let recordable: Bool
        var scriptArgs: RedisArgs?

        init(groups: AckGroups, marked: Marks, decided: Decided, recordable: Bool) {
            self.groups = groups
            self.marked = marked
            self.decided = decided
            self.recordable = recordable
        }
    }

    private func prepare(_ batch: ArraySlice<FinishedJob>) -> Writing {
        var groups = AckGroups()
        // Each job's group, and the marks of fan-out pieces by position: an array of (group,
        // mark) pairs was destroyed element by element through generic tuple witnesses.
        var marked = Marks(capacity: batch.count)
        var decided = Decided(capacity: batch.count, fields: SharedFieldsCache(worker: workerID, timeMs: WallClock.nowMilliseconds()))
        forEachInPlace(batch) { i, f in
            let (group, piece) = groups.note(isInLast: f.isIn, batch: { f.batch }, index: f.index, piece: isLastPiece(f) ? nil : f.token?.hex ?? "")
            marked.groups.append(group)
            if let piece { marked.pieces[i] = piece }
            let decision = OutcomeRecords.decide(f, worker: workerID)
            // The app read once: each read copies its string, an atomic retain and release.
            // Records name the app a job gave even when no app is configured by that name.
            let app = f.appName
            decided.shared.append(decided.fields.fields(app: app ?? f.names?.app, topic: f.recordTopic))
            decided.pairs.append(decided.counters.count(stat: decision.stat, app: app ?? "-", reason: decision.deadLetterReason))
            decided.decisions.append(decision)  // its last use: moved, not copied
        }
        let recordable = CompletionTransaction.canRecord(decided.decisions.lazy.map(\.kind))
        return Writing(groups: groups, marked: marked, decided: decided, recordable: recordable)
    }

    /// Sends the chunk's next request: the check, the transaction, or the script.
    private func attempt() { perform(steps.send(ready: redis.isReady, next: nextToCheck)) }

    /// The batch whose check rides on the chunk's transaction.
    private func nextToCheck() -> TakenBatch? { writing.flatMap { unfinished.oldest(besides: $0.groups.finishing) } }

    /// Does what the steps ask (`CompletionSteps`).
    private func perform(_ action: CompletionSteps.Action) {
        guard let w = writing else { return }
        switch action {
        case .none: return
        case .check(let oldest): redis.send(transaction.check(oldest))
        case .transaction(let next): sendTransaction(w, next: next)
        case .script(let loading): sendScript(w, loading: loading)
        case .unwatchThenScript:
            let now = MonotonicClock.nowMilliseconds()
            if now >= lastTakenBackLogMs + 10_000 {
                lastTakenBackLogMs = now
                logger.warning(
                    "jobs of this worker were taken back by another (its lease ran out): their outcomes here are dropped; the taker sends them",
                    ["worker": .string(workerID), "lease_ms": .int(configuration.leaseMs)])
            }
            redis.send([CompletionTransaction.unwatch], skipping: 1)
            sendScript(w, loading: false)
        case .waitReplicas:
            redis.send([CompletionTransaction.waitReplicas(configuration.waitReplicas, timeoutMs: configuration.waitTimeoutMs)])
        case .recorded(let replicas):
            if let replicas { replicated(replicas) }
            chunkRecorded()
        }
    }

    private func sendTransaction(_ w: Writing, next: TakenBatch?) {
        let batch = current[chunkStart..<chunkEnd], decided = w.decided
        transaction.fill(&transactionBuffer, groups: w.groups, counters: decided.counters) { t in appendRecords(batch, decided, to: &t) }
        redis.send { (p) throws(RedisError) in try p.send(&transactionBuffer, then: next.map(transaction.check) ?? []) }
    }

    private func sendScript(_ w: Writing, loading: Bool) {
        if w.scriptArgs == nil { w.scriptArgs = scriptArguments(current[chunkStart..<chunkEnd], groups: w.groups, marked: w.marked, w.decided) }
        // A restarted Redis: the script is loaded ahead of the call, in the same write.
        redis.send((loading ? [QueueScripts.complete.load] : []) + [w.scriptArgs!], skipping: loading ? 1 : 0)
    }

    func redisConnected() {
        steps.connected()
        redis.send(transaction.fence(), skipping: 2)
        attempt()
    }

    func redisFailed(_ error: RedisError) {
        steps.failed(connectionLost: error.isConnectionLost)
        guard writing != nil else { return stopIfIdle() }
        // During shutdown with Redis gone, give up: the jobs stay in flight and are recovered.
        if stopping, error.isConnectionLost {
            writing = nil
            steps.abandon()
            queue.removeAll()
            current.removeAll()
            return stopIfIdle()
        }
    }

    func redisReplied(_ reply: RedisFlatReply) throws(RedisError) {
        guard writing != nil else { return }
        let awaited = steps.replyArrived()
        let read: CompletionSteps.Reply
        switch awaited {
        case .nothing: return
        case .checking: read = CompletionTransaction.readCheck(reply)
        case .transaction(let next): read = try CompletionTransaction.readExec(reply, withCheck: next != nil)
        case .script: read = .scripted(error: reply.error)
        case .replicating: read = .waited(replicas: reply.integer(0) ?? 0)
        }
        perform(try steps.replied(read, to: awaited, ready: redis.isReady, next: nextToCheck))
    }

    private func chunkRecorded() {
        guard let w = writing else { return }
        w.groups.commit()
        count(current[chunkStart..<chunkEnd], w.decided.decisions)
        writing = nil
        let n = chunkEnd - chunkStart
        if chunkEnd == current.count {
            recorded.handOver(&current)  // before the gate wakes a fetcher
            chunkEnd = 0
        }
        gate.recorded(n)
        if chunkEnd > 0 { return nextChunk() }
        writeIfDue()
        stopIfIdle()
    }

    /// Each job's ack group (`AckGroups`), and the mark of each fan-out piece that is not its
    /// job's last, by position in the batch.
    struct Marks {
        var groups: [Int] = []
        var pieces: [Int: String] = [:]
        init(capacity: Int) { groups.reserveCapacity(capacity) }
    }

    /// A batch's decisions and counts.
    struct Decided {
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

    /// Calls `body` with each job's position and the job, lent (`FinishedJob.Lent`), so that
    /// the calls the body makes with it count no reference.
    func forEachInPlace(_ batch: ArraySlice<FinishedJob>, _ body: (Int, FinishedJob.Lent) -> Void) {
        batch.withUnsafeBufferPointer { jobs in
            for i in jobs.indices { body(i, jobs[i].lent) }
        }
    }

    /// Fan-out pieces of one handle still to come; the job is acked with its last piece.
    private var remainingPieces: [Int64: Int] = [:]

    private func isLastPiece(_ f: FinishedJob.Lent) -> Bool {
        guard f.fanout > 1 else { return true }
        let left = (remainingPieces[f.handle] ?? f.fanout) - 1
        remainingPieces[f.handle] = left == 0 ? nil : left
        return left == 0
    }
}
