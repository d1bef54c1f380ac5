import APNSAdmin
import APNSCore
import Configuration
import Dispatch
import FoundationEssentials
import QueueContract
import RedisClient
import Synchronization

/// What the pages and the JSON API show, read with apnsctl's own commands (APNSAdmin), so that
/// `/api/...` and `apnsctl --json` give the same data. Requests read over a small pool of Redis
/// connections, so that a slow one does not hold up the rest; one that failed is not reused.
public final class DashboardData: @unchecked Sendable {
    private let connect: () throws -> AdminContext
    private let idle = Mutex<[Pooled]>([])
    /// An idle connection: used by one request at a time, handed between threads by the pool.
    private final class Pooled: @unchecked Sendable {
        let ctx: AdminContext
        init(_ ctx: AdminContext) { self.ctx = ctx }
    }
    /// At most this many requests read at once; the rest wait for a connection.
    static let poolSize = 4
    private let slots = DispatchSemaphore(value: DashboardData.poolSize)
    /// Since when each key set's oldest job has been at its list's end.
    private let oldest = Mutex(OldestJobWatch())
    public let readOnly: Bool
    public let configuredApps: [String]

    /// Every queue of the configuration (`queues`), each read through `openQueue`: the overview
    /// lists them all (this dashboard's pages show one, `apnsctl web --queue NAME`).
    public var queues: [ServedQueue] = []
    public var openQueue: (@Sendable (ServedQueue) throws -> AdminContext)?

    public init(readOnly: Bool, configuredApps: [String], connect: @escaping () throws -> AdminContext) {
        self.connect = connect
        self.readOnly = readOnly
        self.configuredApps = configuredApps
    }

    /// Runs `body` with a connection of the pool (made if none is idle), handed back after.
    public func with<R>(_ body: (AdminContext) throws -> R) throws -> R {
        slots.wait()
        defer { slots.signal() }
        let ctx = try idle.withLock { $0.popLast() }?.ctx ?? connect()
        do {
            let result = try body(ctx)
            let back = Pooled(ctx)
            idle.withLock { $0.append(back) }
            return result
        } catch let error as RedisError {
            throw error
        } catch AdminError.redis(let m) {
            throw AdminError.redis(m)
        } catch {
            let back = Pooled(ctx)
            idle.withLock { $0.append(back) }
            throw error
        }
    }

    public struct Overview {
        public var stats: QueueCommands.Stats
        public var statsJSON: [String: Any]
        /// Per key set, how long the job at the consuming end has waited at least (ms).
        public var oldestAgeMs: [String: Int64]
        public var history: [CounterHistory.Snapshot]
        public var nowMs: Int64
        /// Each queue of the configuration, when it has several; this one is `queue`.
        public var queues: [QueueList.Row] = []
        public var queue = ""

        public var json: [String: Any] {
            var j = statsJSON
            j["oldest_job_age_ms"] = oldestAgeMs
            let minutes = { (n: Int) in
                CounterHistory.minutes(history, count: n, nowMs: nowMs).map {
                    ["start_ms": $0.startMs, "delivered": $0.delivered, "failed": $0.failed, "dead_lettered": $0.deadLettered] as [String: Any]
                }
            }
            j["per_minute_last_hour"] = minutes(60)
            j["per_minute_last_day"] = minutes(1440)
            if !queues.isEmpty { j["queues"] = queues.map(\.json) }
            return j
        }
    }

    public func overview() throws -> Overview {
        try with { ctx in
            let stats = try QueueCommands.stats(ctx)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var ages: [String: Int64] = [:]
            oldest.withLock { watch in
                for part in stats.keySets { ages[part.keys] = now - (watch.since(part.keys, tail: part.oldestJob, nowMs: now) ?? now) }
            }
            var sets: [[CounterHistory.Snapshot]] = []
            for set in ctx.keySets {
                let members = try ctx.call(set, ["ZRANGEBYSCORE", set.history, String(now - CounterHistory.keptMs), "+inf"]).array
                sets.append(members.compactMap { $0.text.flatMap(CounterHistory.Snapshot.init(member:)) })
            }
            var o = Overview(
                stats: stats, statsJSON: QueueCommands.statsJSON(ctx, stats), oldestAgeMs: ages, history: CounterHistory.merge(sets), nowMs: now)
            o.queue = ctx.keys.queue
            if queues.count > 1, let openQueue {
                o.queues = try QueueList.read(queues) { q in q.name == ctx.keys.queue ? ctx : try openQueue(q) }
            }
            return o
        }
    }

    /// A live or lapsed worker: its lease, what it holds, and what it says of itself.
    public struct WorkerRow {
        public var id: String
        public var leaseLeftMs: Int64
        public var inFlight: Int64
        public var batches: Int64
        public var info: JSONValue?

        public var alive: Bool { leaseLeftMs > 0 }
        /// When it last renewed its lease: the lease's end less the lease's length.
        public var lastHeartbeatAgoMs: Int64? {
            guard let leaseMs = info?["lease_ms"]?.integer else { return nil }
            return max(0, leaseMs - leaseLeftMs)
        }

        public var json: [String: Any] {
            var j: [String: Any] = ["id": id, "lease_left_ms": leaseLeftMs, "in_flight": inFlight, "batches": batches, "alive": alive]
            if let info { j["info"] = info }
            if let ago = lastHeartbeatAgoMs { j["last_heartbeat_ms_ago"] = ago }
            return j
        }
    }

    public func workers() throws -> [WorkerRow] {
        try with { ctx in try workerRows(ctx, try QueueCommands.stats(ctx)) }
    }

    /// The stats' workers, each with its batches and the info it wrote.
    private func workerRows(_ ctx: AdminContext, _ stats: QueueCommands.Stats) throws -> [WorkerRow] {
        let infos = try ctx.call(ctx.keys, ["HGETALL", ctx.keys.workerInfo]).array.compactMap(\.text)
        var info: [String: JSONValue] = [:]
        for i in stride(from: 0, to: infos.count - 1, by: 2) { info[infos[i]] = try? JSONValue.parse(infos[i + 1].utf8) }
        return try stats.workers.map { w in
            var batches: Int64 = 0
            for set in ctx.keySets {
                let listed = try ctx.call(set, ["HGETALL", set.batches(worker: w.id)]).array.compactMap(\.text)
                batches += Int64(stride(from: 0, to: listed.count, by: 2).filter { InFlightJobs.Field(listed[$0]) != .fence }.count)
            }
            return WorkerRow(id: w.id, leaseLeftMs: w.leaseLeftMs, inFlight: w.inFlight, batches: batches, info: info[w.id])
        }
    }

    /// One app as the live workers see it, with its counters.
    public struct AppRow {
        public var app: String
        public var workers = 0
        public var connections = 0
        public var streamLimit = 0
        public var paused: [String] = []
        public var lastSuccessMs: Int64?
        public var jwtAgeSeconds: Int64?
        /// "apns" or "fcm", as the workers say; nil until one serves the app.
        public var provider: String?
        /// An FCM app's access token: seconds until it expires.
        public var tokenLeftSeconds: Int64?
        public var counters: [String: Int64] = [:]
        /// How many workers call it ready (their /readyz rule: a ready connection, or a success in the last minute).
        public var readyWorkers = 0

        public enum State: String { case ready, paused, connecting, unserved = "no worker" }
        public var state: State {
            if !paused.isEmpty { return .paused }
            if workers == 0 { return .unserved }
            return readyWorkers > 0 ? .ready : .connecting
        }

        public var json: [String: Any] {
            var j: [String: Any] = [
                "app": app, "state": state.rawValue, "workers": workers, "connections": connections, "stream_limit": streamLimit,
                "paused": paused, "counters": counters,
            ]
            if let lastSuccessMs { j["last_success_ms"] = lastSuccessMs }
            if let jwtAgeSeconds { j["jwt_age_s"] = jwtAgeSeconds }
            if let provider { j["provider"] = provider }
            if let tokenLeftSeconds { j["token_left_s"] = tokenLeftSeconds }
            return j
        }
    }

    public func apps() throws -> [AppRow] {
        try with { ctx in
            let stats = try QueueCommands.stats(ctx)
            let perApp = QueueCommands.countersByApp(stats)
            var rows: [String: AppRow] = [:]
            // `-` counts jobs that name no configured app: no app of its own.
            for name in configuredApps + QueueCommands.apps(stats) where name != "-" { rows[name] = AppRow(app: name, counters: perApp[name] ?? [:]) }
            for worker in try workerRows(ctx, stats) where worker.alive {
                for a in worker.info?["apps"]?.array ?? [] {
                    guard let name = a["app"]?.string else { continue }
                    var row = rows[name] ?? AppRow(app: name)
                    row.workers += 1
                    if a["ready"] == .bool(true) { row.readyWorkers += 1 }
                    row.connections += Int(a["connections"]?.integer ?? 0)
                    row.streamLimit += Int(a["stream_limit"]?.integer ?? 0)
                    if let why = a["paused"]?.string { row.paused.append("\(worker.id): \(why)") }
                    if let ms = a["last_success_ms"]?.integer { row.lastSuccessMs = max(row.lastSuccessMs ?? 0, ms) }
                    if let age = a["jwt_age_s"]?.integer { row.jwtAgeSeconds = max(row.jwtAgeSeconds ?? 0, age) }
                    row.provider = a["provider"]?.string ?? row.provider
                    if let left = a["token_left_s"]?.integer { row.tokenLeftSeconds = min(row.tokenLeftSeconds ?? left, left) }
                    rows[name] = row
                }
            }
            return rows.values.sorted { $0.app < $1.app }
        }
    }

    /// A page of the letters `filter` matches, newest first, after `before`, with the
    /// queue's tally of dead letters by reason and what the filter's drop-downs offer.
    public struct DeadLetterPage {
        public var page: RecordPage
        public var byReason: [(reason: String, count: Int64)]
        public var choices: Choices
    }

    public func deadLetters(_ filter: DeadLetterFilter, before: String? = nil, limit: Int = 100) throws -> DeadLetterPage {
        try with { ctx in
            let counters = try QueueCommands.counters(ctx)
            var page = RecordPage()
            if filter.ids.count == 1 {
                page.rows = try DeadLetterCommands.select(ctx, filter)
                page.matched = page.rows.count
            } else {
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                let needles = [filter.reason?.recordField("reason"), filter.app?.recordField("app")].compactMap { $0 }
                page = try ctx.newest(\.deadLetters, before: before, limit: limit, filtered: !filter.all, needles: needles) {
                    filter.matches($0, nowMs: now)
                }
            }
            let byReason = counters.deadLetterReasons
            let choices = Choices(
                reasons: byReason.map(\.reason) + page.rows.map { $0.string("reason") } + [filter.reason].compactMap { $0 },
                apps: apps(counters) + page.rows.map { $0.string("app") } + [filter.app].compactMap { $0 })
            return DeadLetterPage(page: page, byReason: byReason, choices: choices)
        }
    }

    /// How many letters `filter` matches, for a purge's or requeue's confirmation: the streams'
    /// lengths less what came after `untilMs` for all of them; a filter reads every letter.
    public func countDeadLetters(_ filter: DeadLetterFilter) throws -> Int {
        try with { ctx in
            guard filter.all, filter.ids.isEmpty else { return try DeadLetterCommands.select(ctx, filter, limit: Int.max).count }
            var count: Int64 = 0
            for set in ctx.keySets {
                count += try ctx.call(set, ["XLEN", set.deadLetters]).integer ?? 0
                if let until = filter.untilMs {
                    count -= Int64(try ctx.call(set, ["XRANGE", set.deadLetters, String(until + 1), "+", "COUNT", "1000000"]).array.count)
                }
            }
            return Int(count)
        }
    }

    /// One dead letter by its id, or nil (no such letter, or not an id).
    public func deadLetter(id: String) throws -> StreamRecord? {
        guard DeadLetterFilter.isValidID(id) else { return nil }
        var f = DeadLetterFilter()
        f.ids = [id]
        return try with { ctx in try DeadLetterCommands.select(ctx, f).first }
    }

    /// A page of a stream feed (invalid tokens or channels), newest first, with app and
    /// reason filters, and what the filter's drop-downs offer.
    public func feed(
        _ stream: KeyPath<QueueKeys, String>, app: String?, reason: String?, before: String? = nil, limit: Int = 100
    ) throws -> (
        page: RecordPage, choices: Choices
    ) {
        let filter = Self.feedFilter(app: app, reason: reason)
        return try with { ctx in
            let page = try ctx.newest(
                stream, before: before, limit: limit, filtered: app != nil || reason != nil, needles: filter.needles, matches: filter.matches)
            let choices = Choices(
                reasons: page.rows.map { $0.string("reason") } + [reason].compactMap { $0 },
                apps: apps(try QueueCommands.counters(ctx)) + page.rows.map { $0.string("app") } + [app].compactMap { $0 })
            return (page, choices)
        }
    }

    /// Every record of a feed the filters match, oldest first, read 10,000 at a time and handed
    /// to `body` chunk by chunk (the CSV export).
    public func feedAll(_ stream: KeyPath<QueueKeys, String>, app: String?, reason: String?, _ body: ([StreamRecord]) -> Void) throws {
        let matches = Self.feedFilter(app: app, reason: reason).matches
        try with { ctx in
            var after: String?
            while true {
                let chunk = try ctx.records(stream, after: after, limit: 10_000)
                guard let last = chunk.last else { return }
                body(chunk.filter(matches))
                after = last.id
            }
        }
    }

    /// A feed's filters: the fields a record's raw JSON must hold, and the check of its parsed fields.
    private static func feedFilter(app: String?, reason: String?) -> (needles: [String], matches: (StreamRecord) -> Bool) {
        (
            [reason?.recordField("reason"), app?.recordField("app")].compactMap { $0 },
            { r in (app == nil || r.string("app") == app) && (reason == nil || r.string("reason") == reason) }
        )
    }

    private func apps(_ counters: QueueCommands.Stats) -> [String] { configuredApps + QueueCommands.apps(counters).filter { $0 != "-" } }

    /// What a filter's drop-downs offer: the reasons and apps known, each once, sorted.
    public struct Choices {
        public let reasons: [String]
        public let apps: [String]

        init(reasons: [String], apps: [String]) {
            self.reasons = Set(reasons.filter { !$0.isEmpty }).sorted()
            self.apps = Set(apps.filter { !$0.isEmpty }).sorted()
        }
    }
}
