import APNSCore
import APNSTransport
import Configuration
import Delivery
import Dispatch
import FoundationEssentials
import IOLoop
import QueueContract
import RedisClient
import Synchronization
import Telemetry

/// Takes jobs from Redis in atomic batches for one I/O thread, on that thread's event loop:
/// parses and checks them, hands sendable ones to the thread's connections and bad ones straight
/// to the completer. The loop waits on Redis as it waits on APNs (a `EventLoopRedisConnection` in its epoll
/// set), so a batch crosses no thread on its way out (a thread of its own cost context switches:
/// docs/performance.md).
final class Fetcher: EventLoopRedisOwner, @unchecked Sendable {  // the owning loop's thread only, but `stop`
    let keys: QueueKeys
    let workerID: String
    let configuration: WorkerConfiguration
    /// Which app (and key) each job goes with: every app runtime this worker has had
    /// (`AppRegistry`), and which of them take jobs.
    var router: AppRouter
    let completer: Completer
    let gate: InFlightGate
    let logger: Logger
    let templates: TemplateSource
    private let batchIDs: BatchIDs
    let lease: LeaseGuard
    /// A confirmation of the lease is under way (`leaseHolds`).
    var confirming = false
    /// Jobs of batches a failover left on the demoted master alone, for the I/O thread to count
    /// those sent (`takeFailoverJobs`).
    var failoverJobs = 0
    /// The jobs of each fetch of the last seconds, with its time: what a failover may have sent twice.
    var recentFetches = RecentFetches()
    /// The process serves several key sets, whose lanes share the gate; of several queues,
    /// by their shares (`QueueShares`), as lane `shareLane`.
    private lazy var sharesTheGate = configuration.servedKeys.count > 1
    var shares: QueueShares?
    var shareLane = 0
    private var turnRecheckScheduled = false

    func takeFailoverJobs() -> Int {
        defer { failoverJobs = 0 }
        return failoverJobs
    }
    /// Where sendable jobs go: the owning loop's queue of sends (loop thread).
    let deliver: ([SendRequest?]) -> Void
    private let loop: EventLoop
    let redis: EventLoopRedisConnection
    /// Replies awaited, oldest first.
    private var expected: [Expected] = []
    /// Batches whose fetch reply was lost: the script may have run. Looked up once Redis answers.
    private var lost: [String] = []
    /// Claims whose answers a lost connection took: sent again first.
    private var lostClaims: [Claiming] = []
    /// This fetcher's fence in the batches hash, and its connection's epoch: a lookup of a lost
    /// batch raises the fence to the epoch, so that a fetch an old connection still carries
    /// takes nothing.
    private let fenceField: String
    private var epoch = 0
    /// Suspects waiting, as the last fetch saw; the suspect this fetcher holds (alone in its
    /// batch), whose place in the process (`BatchIDs`) it keeps until that batch is finished.
    private var suspectsWaiting = 0
    private var suspect: TakenBatch?
    private var holdsSuspectPlace = false
    private var stopping = false
    private var stopped: (@Sendable () -> Void)?
    /// Wakes the loop when room frees on another thread; on the loop's own thread (answers)
    /// `fetchIfRoom` runs next anyway.
    private lazy var wakeLoop: @Sendable () -> Void = { [loop] in if !loop.isCurrentThread { loop.wake() } }
    /// Jobs the completer wrote, still to free: one as each job is taken (`RecordedJobs`).
    var unfreed: RecordedJobs.Unfreed

    enum Expected {
        case fetch(batch: String, size: Int, sentAtMs: UInt64, suspect: Bool)
        case lost(batch: String)
        /// BLMOVE: the queue was empty.
        case blockingWait
        case templates
        /// Which of these batches are still there (`QueueScripts.confirmLease`).
        case confirm(sentAtMs: UInt64, batches: [TakenBatch])
        /// The idempotency claims of a fetch's keyed jobs.
        case claims(Claiming)
    }

    init(
        keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, apps: [AppConfiguration], completer: Completer,
        gate: InFlightGate, batchIDs: BatchIDs, lease: LeaseGuard, templates: TemplateSource, loop: EventLoop, logger: Logger,
        deliver: @escaping ([SendRequest?]) -> Void
    ) {
        self.lease = lease
        self.loop = loop
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        router = AppRouter(apps: apps)
        self.completer = completer
        unfreed = RecordedJobs.Unfreed(from: completer.recorded)
        self.gate = gate
        self.batchIDs = batchIDs
        fenceField = batchIDs.fenceField()
        self.logger = logger
        self.deliver = deliver
        self.templates = templates
        // Its wait for jobs (BLMOVE) holds a reply up to a second.
        redis = EventLoopRedisConnection(
            configuration.redis.routed(toKey: keys.jobs), loop: loop, logger: logger, replyTimeoutMs: configuration.redisReplyTimeoutMs + 1000)
        redis.owner = self
    }

    /// Loop thread: connects and starts fetching.
    func start() { redis.start() }

    /// Tells `health` of its Redis connection's state, as `name`.
    func reportRedis(to health: HealthState, as name: String) { redis.report(to: health, as: name) }

    /// Stops taking jobs; returns once the batch being fetched, if any, is routed. Any thread
    /// but the loop's.
    func stop() {
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            stopping = true
            stopped = { done.signal() }
            stopIfIdle()
        }
        _ = done.wait(timeout: .now() + .seconds(10))
    }

    private func stopIfIdle() {
        guard stopping, !expected.contains(where: { if case .fetch = $0 { true } else if case .lost = $0 { true } else { false } }) else { return }
        if holdsSuspectPlace { endSuspect() }
        redis.close()
        expected.removeAll()
        stopped?()
        stopped = nil
    }

    // MARK: Redis

    func redisConnected() {
        epoch += 1
        fetchIfRoom()
    }

    /// A fetch whose reply is lost to an I/O error may have run: its batch is looked up once
    /// Redis answers.
    func redisFailed(_ error: RedisError) {
        for e in expected {
            switch e {
            case .fetch(let batch, _, _, let isSuspect):
                if error.isConnectionLost { lost.append(batch) } else if isSuspect { endSuspect() }
            case .lost(let batch): lost.append(batch)
            case .claims(let c): lostClaims.append(c)
            case .blockingWait, .templates, .confirm: break
            }
        }
        expected.removeAll()
        confirming = false
        stopIfIdle()
    }

    func redisReplied(_ reply: RedisFlatReply) throws(RedisError) {
        try handle(expected.removeFirst(), reply)
        stopIfIdle()
        fetchIfRoom()
    }

    /// Loop thread, after each turn's sends and answers: asks for the next batch if nothing is
    /// awaited and the gate has room for it, or the lost batches' lookups first.
    func fetchIfRoom() {
        guard redis.isReady, expected.isEmpty, !stopping else { return }
        if !lostClaims.isEmpty {
            let again = lostClaims
            lostClaims.removeAll()
            for c in again { sendClaims(c) }
            return
        }
        if !lost.isEmpty {
            while redis.isReady, let batch = lost.first {
                lost.removeFirst()
                send([lookUpArgs(batch), listArgs(batch)], expecting: .lost(batch: batch))
            }
            return
        }
        if keys.shard != nil, !templates.hasReadRedis {
            // A shard's jobs wait for the queue's templates, which another lane reads.
            loop.schedule(afterMilliseconds: 10) {}
            return
        }
        unfreed.collect()
        if let s = suspect, s.unfinished == 0 || s.takenBack { endSuspect() }
        // Whole batches while the room holds two; else a quarter of the room at least, so that
        // a nearly full gate does not fetch a job at a time.
        let batch = configuration.batchSize, capacity = gate.sendingCapacity
        let minimum = capacity >= 2 * batch ? batch : max(1, capacity / 4)
        var wanted = batch, least = minimum
        if sharesTheGate {
            // One key set never holds the whole gate: one that waits (its slot half-moved, its
            // node gone) keeps what it took, and the others still fetch from the last eighth of
            // each stage. Counted by stage, so that a lane alone keeps the connections full.
            let reserve = max(1, capacity / 8), recording = completer.recordingJobs
            guard recording <= gate.recordingCapacity - gate.recordingCapacity / 8 else { return unfreed.freeAll() }
            let room = capacity - reserve, held = completer.unfinished.heldJobs - recording
            // Whole batches; a lane that holds nothing takes what room there is (another may hold the rest).
            if held == 0 { least = min(minimum, reserve) }
            var jobs = room - held
            if let shares {
                let turn = shares.turn(
                    lane: shareLane, held: held, room: room, minimum: least, nowMs: loop.iterationNs / 1_000_000, wake: wakeLoop)
                (jobs, least) = (turn.jobs, turn.least)
            }
            guard jobs >= least else {
                // Its own answers free its room; another queue's turn wakes it when it may be
                // its own, and it asks again in case a queue's backlog ends unseen.
                if shares != nil, !turnRecheckScheduled {
                    turnRecheckScheduled = true
                    loop.schedule(afterMilliseconds: 20) { [weak self] in self?.turnRecheckScheduled = false }
                }
                return unfreed.freeAll()
            }
            wanted = min(batch, jobs)
        }
        fetch(size: wanted, atLeast: least)
    }

    private func fetch(size wanted: Int, atLeast minimum: Int) {
        guard let size = gate.room(upTo: wanted, atLeast: minimum, waiter: ObjectIdentifier(self), orWake: wakeLoop) else {
            unfreed.freeAll()
            return
        }
        // Templates changed in Redis are read at most once a second, in the same write, where
        // they live: with the queue's own keys.
        if keys.shard == nil, let read = templates.readIfStale(nowMs: MonotonicClock.nowMilliseconds()) {
            send([read], expecting: .templates)
        }
        // A suspect goes alone, one per process at a time, beside the normal batches.
        let takeSuspect = suspectsWaiting > 0 && !holdsSuspectPlace && batchIDs.takeSuspectPlace()
        if takeSuspect { holdsSuspectPlace = true }
        let id = batchIDs.next(suspect: takeSuspect)
        shares?.asked(lane: shareLane, jobs: size)
        send(
            [fetchArgs(id, size: size, suspect: takeSuspect), listArgs(id)],
            expecting: .fetch(batch: id, size: size, sentAtMs: MonotonicClock.nowMilliseconds(), suspect: takeSuspect))
    }

    /// The suspect is finished (or was never taken): another may go.
    private func endSuspect() {
        suspect = nil
        guard holdsSuspectPlace else { return }
        holdsSuspectPlace = false
        batchIDs.releaseSuspectPlace()
    }

    /// Noted as awaited first: a send that fails reports it lost with the rest.
    func send(_ commands: [RedisArgs], skipping: Int = 0, expecting: Expected) {
        expected.append(expecting)
        redis.send(commands, skipping: skipping)
    }

    private func handle(_ request: Expected, _ reply: RedisFlatReply) throws(RedisError) {
        switch request {
        case .templates:
            templates.apply(reply)
        case .blockingWait:
            break
        case .confirm(let sentAtMs, let batches):
            try confirmed(reply, sentAtMs: sentAtMs, batches: batches)
        case .claims(let c):
            try claimed(reply, c)
        case .fetch(let batch, let size, let sentAtMs, let isSuspect):
            let again: Expected = .fetch(batch: batch, size: size, sentAtMs: MonotonicClock.nowMilliseconds(), suspect: isSuspect)
            if try loadedAndSentAgain(reply, QueueScripts.fetch, [fetchArgs(batch, size: size, suspect: isSuspect), listArgs(batch)], again) {
                return
            }
            // The script renewed the lease.
            lease.renewed(sentAtMs: sentAtMs, answeredAtMs: MonotonicClock.nowMilliseconds())
            let taken = try TakenJobs(reply)
            suspectsWaiting = taken.suspectsWaiting
            shares?.fetched(lane: shareLane, asked: size, taken: taken.count, nowMs: loop.iterationNs / 1_000_000)
            if taken.isEmpty {
                if isSuspect { return endSuspect() }  // another worker took it; the next fetch follows
                unfreed.freeAll()
                // A suspect this process may take goes at once (the next fetch).
                if suspectsWaiting > 0, !batchIDs.holdsSuspect { return }
                // Nothing queued: Redis holds the request up to 1 s for the next job, moved
                // atomically to our staging list (taken by the next fetch); a tenth of that while
                // suspects wait for the place another holds.
                let wait = suspectsWaiting > 0 ? "0.1" : "1"
                send([QueueScripts.blockingWaitCall(keys, worker: workerID, timeout: wait)], expecting: .blockingWait)
                return
            }
            let opened = completer.unfinished.open(id: batch, jobs: taken.count)
            if isSuspect { suspect = opened }
            recentFetches.add(jobs: taken.count, atMs: sentAtMs)
            route(taken, batch: opened)
        case .lost(let batch):
            if try loadedAndSentAgain(reply, QueueScripts.lookUpLost, [lookUpArgs(batch), listArgs(batch)], .lost(batch: batch)) { return }
            let taken = try TakenJobs(reply)
            let isSuspect = InFlightJobs.Field(batch) == .suspectBatch
            guard !taken.isEmpty else { return isSuspect ? endSuspect() : () }
            logger.warning("found jobs taken by a fetch whose reply was lost; sending them", ["count": .int(taken.count)])
            let opened = completer.unfinished.open(id: batch, jobs: taken.count)
            if isSuspect { suspect = opened }
            route(taken, batch: opened)
        }
    }

    private func fetchArgs(_ id: String, size: Int, suspect: Bool) -> RedisArgs {
        QueueScripts.fetchCall(
            keys, worker: workerID, batch: id, max: size, leaseMs: configuration.leaseMs, fence: fenceField, epoch: epoch, suspect: suspect)
    }

    /// A restarted Redis has lost the scripts: on NOSCRIPT, `script` is loaded and `commands`
    /// sent again, in one write, and the answer is true. Another error is thrown.
    func loadedAndSentAgain(_ reply: RedisFlatReply, _ script: RedisScript, _ commands: [RedisArgs], _ again: Expected) throws(RedisError) -> Bool {
        guard let message = reply.error else { return false }
        send(try script.reloading(after: message, commands), skipping: 1, expecting: again)
        return true
    }

    private func lookUpArgs(_ id: String) -> RedisArgs {
        QueueScripts.lookUpLostCall(keys, worker: workerID, batch: id, fence: fenceField, epoch: epoch)
    }

    private func listArgs(_ id: String) -> RedisArgs { QueueScripts.batchListCall(keys, worker: workerID, batch: id) }
}
