import APNSCore
import Delivery
import IOLoop
import Telemetry

/// Where a sender's decided sends go, on its loop's thread.
public protocol DecidedSink: AnyObject {
    /// One send decided: its outcome goes to Redis.
    func add(_ decided: consuming FinishedJob)
    /// A loop turn ended in which `decided` sends were decided.
    func turnEnded(decided: Int)
    /// `n` sends were dropped unsent: another worker took their jobs back.
    func dropped(_ n: Int)
}

/// The APNs transport of one I/O thread: the connection pools it owns on its event loop
/// (shared-nothing, DESIGN.md §1). Requests arrive in batches (`accept`); each loop turn
/// (`dispatch`) fills the connections' free streams; decided sends go to `sink` one by one, and
/// the end of each turn is told. What the connections report is handled in APNSSender+Events.
public final class APNSSender: @unchecked Sendable {  // its loop's thread only
    public struct Settings: Sendable {
        public var connectionsPerApp: Int
        public var streamsPerConnection: Int
        public var requestTimeoutMs: Int
        /// How long an app waits after APNs refuses its credentials, before one probe.
        public var credentialPauseMs: Int
        /// PING a connection idle this long, and replace it if the PING goes unanswered this long.
        public var pingIntervalMs: Int
        public var pingTimeoutMs: Int
        /// The connect and the TLS handshake of one address, at most.
        public var connectTimeoutMs: Int
        /// What each answer, or the lack of one, does to a send.
        public var rejections: RejectionPolicy
        /// A pool with work that has had no answer this long is in trouble: it sends one probe
        /// at a time, and what it holds beyond `heldWhilePaused` waits in the schedule.
        public var troubleAfterMs = 10_000
        public var transportPauseMs = 1000
        public var maxTransportPauseMs = 15_000
        public var maxCredentialPauseMs = 600_000
        /// The reconnect delay of a pool whose connections end before delivering anything.
        public var reconnectBaseMs = 250
        public var reconnectCapMs = 10_000
        /// Sends a paused pool keeps; the rest go back to Redis, so they hold up no other pool.
        public var heldWhilePaused = 100
        /// Seconds between the summary lines of a pool's connection trouble.
        public var troubleLogIntervalMs = 10_000
        /// Each refusal on a line of its own ("each"), or a summary per interval ("summary").
        public var logRejections = "each"
        /// Tokens whole in logs (the default), or cut to their first 8 and last 4 digits.
        public var logWholeTokens = true
        /// Requests a second on one connection at most; nil for no cap (Apple documents none).
        public var ratePerConnection: Int?
        /// A notification that waits to go again this long after a worker first took it is
        /// dead-lettered as Expired (`max_age_s`); nil: only its own `expiration` ends it.
        public var maxAgeMs: Int?

        public init(
            connectionsPerApp: Int, streamsPerConnection: Int, requestTimeoutMs: Int, credentialPauseMs: Int = 60_000,
            pingIntervalMs: Int = 60_000, pingTimeoutMs: Int = 10_000, connectTimeoutMs: Int = 10_000,
            rejections: RejectionPolicy = RejectionPolicy()
        ) {
            self.connectionsPerApp = connectionsPerApp
            self.streamsPerConnection = streamsPerConnection
            self.requestTimeoutMs = requestTimeoutMs
            self.credentialPauseMs = credentialPauseMs
            self.pingIntervalMs = pingIntervalMs
            self.pingTimeoutMs = pingTimeoutMs
            self.connectTimeoutMs = connectTimeoutMs
            self.rejections = rejections
        }
    }

    public let loop: EventLoop
    let resolver: HostResolver
    /// Every app runtime this sender has had: a reload appends, and a request's index stays valid.
    var apps: [AppRuntime]
    /// The runtimes new jobs may take; a retired one only finishes what it holds.
    var activeApps: [Bool]
    let settings: Settings
    let logger: Logger
    let metrics: Metrics
    let health: HealthState
    let sink: DecidedSink
    let name: String

    /// Connection pools: apps with the same endpoint and credential share one (`AppRuntime.poolKey`).
    var pools: [ConnectionPool] = []
    /// What waits for each pool's connections: apart from the pools, as a connection sends
    /// from it (inout) and may call back into them (`connectionDraining`).
    var pending: [PendingQueue] = []
    /// Each app's pool.
    var poolOf: [Int] = []
    var draining: [ObjectIdentifier: APNSConnection] = [:]
    var rejectionLog: RejectionLog
    /// Sends decided this turn, and the apps with a delivery among them: readiness is told once
    /// per turn, not per push.
    var decidedThisTurn = 0
    var deliveredApps: [Bool]
    var stopping = false
    private var touched: [APNSConnection] = []
    private var rateWakeScheduled = false
    var rng = SystemRandomNumberGenerator()

    /// `name`: the I/O thread's, for metrics labels.
    public init(
        name: String, apps: [AppRuntime], settings: Settings, logger: Logger, metrics: Metrics = Metrics(), health: HealthState = HealthState(),
        loop: EventLoop, sink: DecidedSink, resolver: HostResolver = HostResolver()
    ) {
        self.name = name
        self.resolver = resolver
        self.metrics = metrics
        self.health = health
        self.apps = apps
        self.settings = settings
        self.logger = logger
        self.sink = sink
        deliveredApps = Array(repeating: false, count: apps.count)
        activeApps = Array(repeating: true, count: apps.count)
        self.loop = loop
        rejectionLog = RejectionLog(mode: RejectionLog.Mode(rawValue: settings.logRejections) ?? .each, wholeTokens: settings.logWholeTokens)
        addPools(for: apps.indices)
    }

    /// Opens the connections: one per pool first, the rest once it has settled, to resume its
    /// TLS session. Loop thread.
    public func start() {
        for p in pools.indices {
            openConnection(pool: p, slot: 0)
            loop.schedule(afterMilliseconds: 1000) { [self] in openRest(pool: p) }  // the first one may hang
        }
        scheduleScan()
    }

    /// Closes every connection and opens no more. Unsent requests stay with their jobs in
    /// Redis, in flight. Loop thread.
    public func close() {
        stopping = true
        // Sent and unanswered: the jobs go back to the queue, and APNs may have them already.
        let live = pools.flatMap(\.slots).compactMap { $0 } + draining.values
        metrics.mayDuplicate(live.reduce(0) { $0 + $1.openRequests }, cause: "handed_back")
        for c in live { c.close() }
    }

    // MARK: Loop thread

    /// The lanes (key sets) whose lease may have lapsed: their sends wait aside (`parked`), and
    /// the other lanes' go on (`hold(lanes:)`). Loop thread.
    public private(set) var heldLanes: Set<Int> = []
    var parked: [SendRequest] = []

    /// Drops the queued and parked sends whose batch another worker took back. Returns how many.
    @discardableResult
    public func dropTakenBack() -> Int {
        var n = 0
        for p in pools.indices { n += pending[p].remove { $0.ticket.batch.takenBack } }
        let before = parked.count
        parked.removeAll { $0.ticket.batch.takenBack }
        n += before - parked.count
        if n > 0 { sink.dropped(n) }
        return n
    }

    /// Sends nothing more of `lanes` (their sends wait aside) until they are no longer held;
    /// a lane released has its sends queued again, ahead of new ones. Loop thread.
    public func hold(lanes: Set<Int>) {
        guard lanes != heldLanes else { return }
        heldLanes = lanes
        if !lanes.isEmpty {
            for p in pending.indices { _ = pending[p].remove(where: { lanes.contains($0.ticket.batch.lane) }, taking: { parked.append($0) }) }
        }
        var still: [SendRequest] = []
        for r in parked.reversed() {
            if lanes.contains(r.ticket.batch.lane) { still.append(r) } else { pending[poolOf[r.app]].pushFront(r) }
        }
        parked = still.reversed()
    }

    /// Queues a batch for sending. Loop thread.
    public func accept(_ batch: [SendRequest?]) {
        // One pool (the usual case) takes the batch whole: no reference counted per request.
        if pools.count == 1 {
            pending[0].append(contentsOf: batch)
        } else {
            for case let r? in batch { pending[poolOf[r.app]].append(r) }
        }
        guard !heldLanes.isEmpty else { return }
        for p in pending.indices { _ = pending[p].remove(where: { heldLanes.contains($0.ticket.batch.lane) }, taking: { parked.append($0) }) }
    }

    /// Fills every connection's free streams, flushes each touched connection once, and tells
    /// the sink of the turn's decided sends. Once per loop turn.
    public func dispatch() {
        guard !stopping else { return }
        for a in pools.indices where !pending[a].isEmpty {
            var allowance = Int.max
            if pools[a].breaker.isOpen {
                // A paused pool's probe waits for a connection that can take it.
                guard pools[a].slots.contains(where: { ($0?.available ?? 0) > 0 }) else { continue }
                allowance = pools[a].breaker.allowance(nowMs: loop.iterationNs / 1_000_000)
                guard allowance > 0 else { continue }
            }
            let capped = pools[a].rate != nil || settings.ratePerConnection != nil
            if pools[a].rate != nil { allowance = min(allowance, rateAllowance(pool: a)) }
            let credential = pools[a].runtime.credential, auth = credential?.bearer
            // An FCM app without an access token yet sends nothing; its jobs wait (`watch`).
            if credential != nil && auth == nil { continue }
            for case let c? in pools[a].slots where c.available > 0 && allowance > 0 {
                let limit = capped ? min(c.available, allowance, c.rateAllowance(nowMs: loop.iterationNs / 1_000_000)) : min(c.available, allowance)
                guard limit > 0 else { wakeForRate(afterMs: c.msUntilRate); continue }
                let sent = c.send(from: &pending[a], limit: limit, authorization: auth)
                allowance -= sent
                if capped { pools[a].rate?.take(sent) }
                touched.append(c)
                if pending[a].isEmpty { break }
            }
        }
        for c in touched { c.flush() }
        touched.removeAll(keepingCapacity: true)
        if decidedThisTurn > 0 {
            let now = loop.iterationNs / 1_000_000
            for app in deliveredApps.indices where deliveredApps[app] {
                health.succeeded(app: apps[app].name)
                pools[poolOf[app]].lastProgressMs = now
                deliveredApps[app] = false
            }
            let n = decidedThisTurn
            decidedThisTurn = 0
            sink.turnEnded(decided: n)
        }
    }

    /// What a pool's rate cap lets go now; with none left, the loop wakes when one more may.
    private func rateAllowance(pool p: Int) -> Int {
        let n = pools[p].rate!.available(nowMs: loop.iterationNs / 1_000_000)
        if n == 0 { wakeForRate(afterMs: pools[p].rate!.msUntilNext) }
        return n
    }

    /// Jobs held back by a rate cap go when tokens come back, even if nothing else wakes the loop.
    private func wakeForRate(afterMs ms: Int) {
        guard !rateWakeScheduled else { return }
        rateWakeScheduled = true
        loop.schedule(afterMilliseconds: max(1, ms)) { [self] in rateWakeScheduled = false }
    }

    func openConnection(pool p: Int, slot s: Int) {
        guard !stopping, !pools[p].closed else { return }
        let c = APNSConnection(
            app: pools[p].runtime, poolIndex: p, owner: self, streams: settings.streamsPerConnection,
            rate: settings.ratePerConnection.map { TokenBucket(perSecond: $0, nowMs: MonotonicClock.nowMilliseconds()) })
        pools[p].slots[s] = c
        pools[p].trouble.connectionsOpened += 1
        c.connect(loop: loop, resolver: resolver, timeoutMs: settings.connectTimeoutMs)
    }

    /// Opens the pool's other connections, once: after its first has read the server's SETTINGS
    /// (its TLS session ticket came before them), so that they resume that session, which
    /// spares each a certificate chain to verify; or after the first failed, or took a second.
    func openRest(pool p: Int) {
        guard pools[p].restToOpen else { return }
        pools[p].restToOpen = false
        for s in pools[p].slots.indices.dropFirst() where pools[p].slots[s] == nil { openConnection(pool: p, slot: s) }
    }

    /// Fills slot `s` again: at once after a connection that delivered, else after the pool's
    /// growing delay, so that a server that takes connections and drops them sees about one a
    /// second, not hundreds.
    func replaceConnection(pool p: Int, slot s: Int, delivered: Bool) {
        if delivered {
            openConnection(pool: p, slot: s)
            return
        }
        let delay = pools[p].reconnect.nextDelayMs(using: &rng)
        loop.schedule(afterMilliseconds: delay) { [self] in
            if pools[p].slots[s] == nil { openConnection(pool: p, slot: s) }
        }
    }

    func slot(of c: APNSConnection) -> Int? {
        pools[c.poolIndex].slots.firstIndex { $0 === c }
    }

    private func scheduleScan() {
        loop.schedule(afterMilliseconds: min(1000, settings.pingTimeoutMs / 2)) { [self] in
            let now = MonotonicClock.nowMilliseconds()
            let timeout = UInt64(settings.requestTimeoutMs)
            for c in pools.flatMap(\.slots) {
                c?.expireRequests(olderThan: timeout, now: now)
                c?.checkLiveness(now: now, pingAfterMs: UInt64(settings.pingIntervalMs), timeoutMs: UInt64(settings.pingTimeoutMs))
            }
            for c in draining.values { c.expireRequests(olderThan: timeout, now: now) }
            rejectionLog.flush(nowMs: now, everyMs: UInt64(settings.troubleLogIntervalMs), logger: logger)
            for p in pools.indices { watch(pool: p, now: now) }
            for p in pools.indices where pools[p].retired { closeIfDrained(pool: p) }
            publishGauges()
            if !stopping { scheduleScan() }
        }
    }

    /// Finds a pool that has had work and no answer for `troubleAfterMs`, pauses it, sends
    /// back to Redis what a paused pool holds beyond its bound, and logs its trouble in summary.
    private func watch(pool p: Int, now: UInt64) {
        if var summary = pools[p].trouble.summary(nowMs: now, everyMs: UInt64(settings.troubleLogIntervalMs)) {
            summary["apps"] = .string(pools[p].name)
            logger.warning("APNs connection trouble goes on", summary)
        }
        let inFlight =
            pools[p].slots.reduce(0) { $0 + ($1?.openRequests ?? 0) } + draining.values.reduce(0) { $0 + ($1.poolIndex == p ? $1.openRequests : 0) }
        // Sends held for a lease (parked) are not APNs's silence.
        let busy = !pending[p].isEmpty || pools[p].waitingResends > 0 || inFlight > 0
        defer { pools[p].busyAtLastScan = busy }
        guard busy else { return }
        if !pools[p].busyAtLastScan { pools[p].lastProgressMs = max(pools[p].lastProgressMs, now) }
        if !pools[p].breaker.isOpen, now >= pools[p].lastProgressMs + UInt64(settings.troubleAfterMs),
            let pause = pools[p].breaker.failed(.transport, nowMs: now, sentAtMs: now)
        {
            metrics.record { $0.add("apns_transport_pauses_total", .init(("pool", pools[p].name))) }
            logger.warning(
                "APNs has answered none of the pool's requests for a while; sending one probe at a time",
                ["apps": .string(pools[p].name), "silent_ms": .int(Int(now - pools[p].lastProgressMs)), "pause_ms": .int(pause)])
        }
        if pools[p].breaker.isOpen { deferExcess(pool: p, now: now) }
    }

    /// Connections and stream limits per app, for /metrics and /readyz.
    func publishGauges() {
        var ready: [String: Int] = [:]
        var limits: [String: Int] = [:]
        metrics.record { m in
            for p in pools.indices {
                let live = pools[p].slots.compactMap { $0 }
                let readyCount = live.filter { $0.isReady && !$0.isClosed }.count
                let limit = live.reduce(0) { $0 + $1.liveStreamLimit }
                for (a, app) in apps.enumerated() where poolOf[a] == p && activeApps[a] {
                    ready[app.name] = readyCount
                    limits[app.name] = limit
                }
                m.set("apns_connections", .init(("pool", pools[p].name), ("loop", name)), Double(readyCount))
                m.set("apns_stream_limit", .init(("pool", pools[p].name), ("loop", name)), Double(limit))
            }
        }
        // An app paused on its credentials is not ready, and says why.
        var paused: [String: String] = [:]
        for (a, app) in apps.enumerated() where activeApps[a] && pools[poolOf[a]].breaker.isOpen && pools[poolOf[a]].breaker.cause == .credential {
            paused[app.name] = "\(app.isFCM ? "FCM" : "APNs") refused its credentials (\(pools[poolOf[a]].pauseReason)); sending one probe at a time"
        }
        metrics.record { m in
            for (a, app) in apps.enumerated() where activeApps[a] {
                m.set("apns_app_paused", .init(("app", app.name), ("loop", name)), paused[app.name] == nil ? 0 : 1)
                // Joined on `app`, it says which provider every other series of the app is about.
                m.set("apns_app_info", .init(("app", app.name), ("provider", app.isFCM ? "fcm" : "apns")), 1)
            }
        }
        health.update(loop: name, readyConnections: ready, streamLimits: limits, paused: paused)
    }
}
