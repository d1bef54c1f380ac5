import APNSCore
import IOLoop
import QueueContract
import Telemetry

/// Where a sender's decided sends go, on its loop's thread.
public protocol DecidedSink: AnyObject {
    /// One send decided: its outcome goes to Redis.
    func add(_ decided: consuming FinishedJob)
    /// A loop turn ended in which `decided` sends were decided.
    func turnEnded(decided: Int)
}

/// The APNs transport of one I/O thread: the connection pools it owns on its event loop
/// (shared-nothing, DESIGN.md §1). Requests arrive in batches (`accept`); each loop turn
/// (`dispatch`) fills the connections' free streams; decided sends go to `sink` one by one, and
/// the end of each turn is told.
public final class APNSSender: @unchecked Sendable {  // its loop's thread only
    public struct Settings: Sendable {
        public var connectionsPerApp: Int
        public var streamsPerConnection: Int
        public var requestTimeoutMs: Int
        /// How long an app waits after TooManyProviderTokenUpdates.
        public var credentialPauseMs: Int
        /// PING a connection idle this long, and replace it if the PING goes unanswered this long.
        public var pingIntervalMs: Int
        public var pingTimeoutMs: Int
        /// The connect and the TLS handshake of one address, at most.
        public var connectTimeoutMs: Int
        /// What each answer, or the lack of one, does to a send.
        public var rejections: RejectionPolicy

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
    private let resolver: HostResolver
    private let apps: [AppRuntime]
    private let settings: Settings
    private let logger: Logger
    private let metrics: Metrics
    private let health: HealthState
    private let sink: DecidedSink
    private let name: String

    /// Connection pools: apps with the same endpoint and credential share one (`AppRuntime.poolKey`).
    private let pools: [AppRuntime]
    private let poolNames: [String]
    private let poolOf: [Int]

    // Loop-thread state, per pool.
    private var pending: [PendingQueue]
    private var slots: [[APNSConnection?]]
    private var backoffs: [[Backoff]]
    private var draining: [ObjectIdentifier: APNSConnection] = [:]
    /// Sends decided this turn, and the apps with a delivery among them: readiness is told once
    /// per turn, not per push.
    private var decidedThisTurn = 0
    private var deliveredApps: [Bool]
    private var stopping = false
    private var touched: [APNSConnection] = []
    private var freeResends: [String: Int] = [:]
    private var breakers: [CircuitBreaker]
    /// Pools whose connections but the first are still to open (`openRest`).
    private var restToOpen: [Bool]
    private var rng = SystemRandomNumberGenerator()
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
        self.loop = loop
        var keys: [String] = [], representatives: [AppRuntime] = [], names: [[String]] = [], poolOf: [Int] = []
        for app in apps {
            if let i = keys.firstIndex(of: app.poolKey) {
                names[i].append(app.name)
                poolOf.append(i)
            } else {
                keys.append(app.poolKey)
                representatives.append(app)
                names.append([app.name])
                poolOf.append(keys.count - 1)
            }
        }
        pools = representatives
        poolNames = names.map { $0.joined(separator: "+") }
        self.poolOf = poolOf
        pending = pools.map { _ in PendingQueue() }
        breakers = pools.map { _ in CircuitBreaker(pauseMs: settings.credentialPauseMs, probeTimeoutMs: settings.requestTimeoutMs + 5000) }
        slots = pools.map { _ in Array(repeating: nil, count: settings.connectionsPerApp) }
        backoffs = pools.map { _ in Array(repeating: Backoff(baseMs: 100, capMs: 30_000), count: settings.connectionsPerApp) }
        restToOpen = pools.map { _ in true }
    }

    /// Opens the connections: one per pool first, the rest once it has settled, to resume its
    /// TLS session. Loop thread.
    public func start() {
        for p in pools.indices {
            openConnection(pool: p, slot: 0)
            loop.schedule(afterMilliseconds: 1000) { [self] in openRest(pool: p) }  // the first one may hang
        }
        scheduleTimeoutScan()
    }

    /// Closes every connection and opens no more. Unsent requests stay with their jobs in
    /// Redis, in flight. Loop thread.
    public func close() {
        stopping = true
        for c in slots.flatMap({ $0 }) { c?.close() }
        for c in draining.values { c.close() }
    }

    // MARK: Loop thread

    /// Queues a batch for sending. Loop thread.
    public func accept(_ batch: [SendRequest?]) {
        // One pool (the usual case) takes the batch whole: no reference counted per request.
        if pools.count == 1 { pending[0].append(contentsOf: batch); return }
        for case let r? in batch { pending[poolOf[r.app]].append(r) }
    }

    /// Fills every connection's free streams, flushes each touched connection once, and tells
    /// the sink of the turn's decided sends. Once per loop turn.
    public func dispatch() {
        guard !stopping else { return }
        let now = MonotonicClock.nowMilliseconds()
        for a in pools.indices where !pending[a].isEmpty {
            var allowance = breakers[a].allowance(nowMs: now)
            guard allowance > 0 else { continue }
            let auth = pools[a].jwt?.current
            for case let c? in slots[a] where c.available > 0 && allowance > 0 {
                allowance -= c.send(from: &pending[a], limit: min(c.available, allowance), authorization: auth)
                touched.append(c)
                if pending[a].isEmpty { break }
            }
        }
        for c in touched { c.flush() }
        touched.removeAll(keepingCapacity: true)
        if decidedThisTurn > 0 {
            for app in deliveredApps.indices where deliveredApps[app] {
                health.succeeded(app: apps[app].name)
                deliveredApps[app] = false
            }
            let n = decidedThisTurn
            decidedThisTurn = 0
            sink.turnEnded(decided: n)
        }
    }

    private func openConnection(pool p: Int, slot s: Int) {
        guard !stopping else { return }
        let c = APNSConnection(app: pools[p], poolIndex: p, owner: self, streams: settings.streamsPerConnection)
        slots[p][s] = c
        c.connect(loop: loop, resolver: resolver, timeoutMs: settings.connectTimeoutMs)
    }

    /// `c` could not connect (its endpoint's name did not resolve, or no address took a connect).
    func connectFailed(_ c: APNSConnection, error: Error) {
        guard let s = slot(of: c) else { return }
        let p = c.poolIndex
        logger.warning("cannot connect to APNs", ["apps": .string(poolNames[p]), "error": .string("\(error)")])
        slots[p][s] = nil
        openRest(pool: p)
        retryConnection(pool: p, slot: s)
    }

    /// Opens the pool's other connections, once: after its first has read the server's SETTINGS
    /// (its TLS session ticket came before them), so that they resume that session, which
    /// spares each a certificate chain to verify; or after the first failed, or took a second.
    private func openRest(pool p: Int) {
        guard restToOpen[p] else { return }
        restToOpen[p] = false
        for s in slots[p].indices.dropFirst() where slots[p][s] == nil { openConnection(pool: p, slot: s) }
    }

    private func retryConnection(pool p: Int, slot s: Int) {
        let delay = backoffs[p][s].nextDelayMs()
        loop.schedule(afterMilliseconds: delay) { [self] in
            if slots[p][s] == nil { openConnection(pool: p, slot: s) }
        }
    }

    private func slot(of c: APNSConnection) -> Int? {
        slots[c.poolIndex].firstIndex { $0 === c }
    }

    private func scheduleTimeoutScan() {
        loop.schedule(afterMilliseconds: min(1000, settings.pingTimeoutMs / 2)) { [self] in
            let now = MonotonicClock.nowMilliseconds()
            let timeout = UInt64(settings.requestTimeoutMs)
            for c in slots.flatMap({ $0 }) {
                c?.expireRequests(olderThan: timeout, now: now)
                c?.checkLiveness(now: now, pingAfterMs: UInt64(settings.pingIntervalMs), timeoutMs: UInt64(settings.pingTimeoutMs))
            }
            for c in draining.values { c.expireRequests(olderThan: timeout, now: now) }
            publishGauges()
            if !stopping { scheduleTimeoutScan() }
        }
    }

    /// Connections and stream limits per app, for /metrics and /readyz.
    private func publishGauges() {
        var ready: [String: Int] = [:]
        metrics.record { m in
            for p in pools.indices {
                let live = slots[p].compactMap { $0 }
                let readyCount = live.filter { $0.isReady && !$0.isClosed }.count
                for (a, app) in apps.enumerated() where poolOf[a] == p { ready[app.name] = readyCount }
                m.set("apns_connections", .init(("pool", poolNames[p]), ("loop", name)), Double(readyCount))
                m.set("apns_stream_limit", .init(("pool", poolNames[p]), ("loop", name)), Double(live.reduce(0) { $0 + $1.liveStreamLimit }))
            }
        }
        health.update(loop: name, readyConnections: ready)
    }

    // MARK: Called by connections

    func pingTimedOut(_ c: APNSConnection) {
        logger.warning("APNs connection did not answer a PING; replacing it", ["apps": .string(poolNames[c.poolIndex])])
    }

    /// Gauges and readiness follow connections at once, not at the next timer scan.
    func connectionBecameReady(_ c: APNSConnection) {
        if let s = slot(of: c) { backoffs[c.poolIndex][s].reset() }
        publishGauges()
    }

    /// The server's first SETTINGS arrived on `c`.
    func connectionSettled(_ c: APNSConnection) { openRest(pool: c.poolIndex) }

    /// `byServer`: APNs sent GOAWAY; otherwise the connection retired itself (`APNSConnection.retire`).
    func connectionDraining(_ c: APNSConnection, reason: String, byServer: Bool) {
        if byServer {
            metrics.record { $0.add("apns_goaways_total", .init(("pool", poolNames[c.poolIndex]))) }
            logger.info("APNs sent GOAWAY; replacing the connection", ["apps": .string(poolNames[c.poolIndex]), "reason": .string(reason)])
        } else {
            logger.info("replacing a connection", ["apps": .string(poolNames[c.poolIndex]), "reason": .string(reason)])
        }
        guard let s = slot(of: c) else { return }
        draining[ObjectIdentifier(c)] = c
        slots[c.poolIndex][s] = nil
        openConnection(pool: c.poolIndex, slot: s)
    }

    func connectionClosed(_ c: APNSConnection, error: Error?, unanswered: [SendRequest]) {
        openRest(pool: c.poolIndex)
        for r in unanswered.reversed() { resend(r) }
        if draining.removeValue(forKey: ObjectIdentifier(c)) != nil { return }
        guard let s = slot(of: c) else { return }
        slots[c.poolIndex][s] = nil
        publishGauges()
        if !stopping {
            metrics.record { $0.add("apns_reconnects_total", .init(("pool", poolNames[c.poolIndex]))) }
            if let error { logger.warning("APNs connection closed", ["apps": .string(poolNames[c.poolIndex]), "error": .string("\(error)")]) }
            retryConnection(pool: c.poolIndex, slot: s)
        }
    }

    /// Sends again a request that APNs never processed, as the rejection policy allows.
    func resend(_ r: SendRequest) {
        let key = Self.resendKey(r)
        let n = (freeResends[key] ?? 0) + 1
        if case .finish(let verdict) = decide(.unanswered(freeResends: n), for: r) {
            freeResends[key] = nil
            finished(r, outcome: .rejected(RejectionPolicy.connectionFailures, verdict))
            return
        }
        freeResends[key] = n
        pending[poolOf[r.app]].pushFront(r)
    }

    private func decide(_ answer: RejectionPolicy.Answer, for r: SendRequest) -> RejectionPolicy.Action {
        settings.rejections.decide(answer, attempts: r.attempts.count, jobMaxAttempts: r.job.maxAttempts, using: &rng)
    }

    /// A send's entry in `freeResends`: its job's handle and its token (a fan-out job has many).
    private static func resendKey(_ r: SendRequest) -> String { "\(r.handle)/\(r.token.hex)" }

    /// `r` is consumed: its reference goes on with the outcome.
    func finished(_ r: consuming SendRequest, outcome: Outcome) {
        let app = r.app
        breakers[poolOf[app]].succeeded()
        if case .delivered = outcome { deliveredApps[app] = true }
        if !freeResends.isEmpty { freeResends[Self.resendKey(r)] = nil }
        sink.add(r.decide(outcome, appName: apps[app].name))
        decidedThisTurn += 1
    }

    func rejected(_ r: SendRequest, rejection: APNSRejection, on c: APNSConnection, jwtGeneration: Int) {
        logger.log(
            rejection.status >= 500 ? .warning : .info, "APNs rejected a notification",
            [
                "app": .string(apps[r.app].name), "token": .string(r.token.hex), "status": .int(rejection.status),
                "reason": .string(rejection.reason.rawValue), "apns_id": .string(rejection.apnsID ?? ""),
                "apns_timestamp": .int(Int(rejection.timestamp ?? 0)),
            ])
        switch decide(.rejected(rejection), for: r) {
        case .refreshTokenAndResend:
            // The connection is wedged after this error: new JWT, new connection, same job.
            if (try? apps[r.app].jwt?.refreshAfterExpiry(of: jwtGeneration)) == true {
                metrics.record { $0.add("apns_jwt_mints_total", .init(("app", apps[r.app].name))) }
            }
            c.http?.shutdown(error: nil)
            resend(withoutLastAttempt(r))
        case .reconnectAndResend:
            c.http?.shutdown(error: nil)
            resend(withoutLastAttempt(r))
        case .resend:
            resend(withoutLastAttempt(r))
        case .pauseCredential(let closeConnection):
            // The credential, not the job, is at fault: the app waits (with probes) and the
            // job costs no attempt. TooManyProviderTokenUpdates also retires the connection.
            let pause = breakers[poolOf[r.app]].failed(nowMs: MonotonicClock.nowMilliseconds())
            metrics.record { $0.add("apns_credential_pauses_total", .init(("app", apps[r.app].name), ("reason", rejection.reason.rawValue))) }
            logger.error(
                "APNs refused the app's credentials; pausing the app and probing",
                [
                    "app": .string(apps[r.app].name), "reason": .string(rejection.reason.rawValue), "pause_ms": .int(pause),
                ])
            if closeConnection { c.http?.shutdown(error: nil) }
            pending[poolOf[r.app]].pushFront(withoutLastAttempt(r))
        case .finish(let verdict):
            finished(r, outcome: .rejected(rejection, verdict))
        }
    }
}

/// Forgets the request's last answer: a try that was not the job's fault.
private func withoutLastAttempt(_ r: SendRequest) -> SendRequest {
    if !r.attempts.isEmpty { r.attempts.removeLast() }
    return r
}
