import APNSAdmin
import APNSCore
import Configuration
import FoundationEssentials
import QueueContract
import RedisClient
import Synchronization

/// What the pages and the JSON API show, read with apnsctl's own commands (APNSAdmin), so that
/// `/api/...` and `apnsctl --json` give the same data. One request reads at a time: they share
/// one Redis connection, made again after an error.
public final class DashboardData: @unchecked Sendable {
    private let connect: () throws -> AdminContext
    private let lock = Mutex(())
    private var context: AdminContext?
    /// Since when each key set's oldest job has been at its list's end.
    private var oldest = OldestJobWatch()
    public let readOnly: Bool
    public let configuredApps: [String]

    public init(readOnly: Bool, configuredApps: [String], connect: @escaping () throws -> AdminContext) {
        self.connect = connect
        self.readOnly = readOnly
        self.configuredApps = configuredApps
    }

    /// Runs `body` with the shared context, one request at a time.
    public func with<R>(_ body: (AdminContext) throws -> R) throws -> R {
        try lock.withLock { _ in
            do {
                let ctx = try context ?? connect()
                context = ctx
                return try body(ctx)
            } catch let error as RedisError {
                context = nil
                throw error
            } catch AdminError.redis(let m) {
                context = nil
                throw AdminError.redis(m)
            }
        }
    }

    public struct Overview {
        public var stats: QueueCommands.Stats
        public var statsJSON: [String: Any]
        /// Per key set, how long the job at the consuming end has waited at least (ms).
        public var oldestAgeMs: [String: Int64]
        public var history: [CounterHistory.Snapshot]
        public var nowMs: Int64

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
            return j
        }
    }

    public func overview() throws -> Overview {
        try with { ctx in
            let stats = try QueueCommands.stats(ctx)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            var ages: [String: Int64] = [:]
            for part in stats.keySets { ages[part.keys] = now - (oldest.since(part.keys, tail: part.oldestJob, nowMs: now) ?? now) }
            var sets: [[CounterHistory.Snapshot]] = []
            for set in ctx.keySets {
                let members = try ctx.call(set, ["ZRANGEBYSCORE", set.history, String(now - CounterHistory.keptMs), "+inf"]).array
                sets.append(members.compactMap { $0.text.flatMap(CounterHistory.Snapshot.init(member:)) })
            }
            return Overview(
                stats: stats, statsJSON: QueueCommands.statsJSON(ctx, stats), oldestAgeMs: ages, history: CounterHistory.merge(sets), nowMs: now)
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
                    rows[name] = row
                }
            }
            return rows.values.sorted { $0.app < $1.app }
        }
    }

    /// The newest `limit` letters `filter` matches, newest first, how many match, and the
    /// reasons and apps of all letters (the filter's choices).
    public func deadLetters(_ filter: DeadLetterFilter, limit: Int = 500) throws -> (rows: [StreamRecord], matched: Int, choices: Choices) {
        try with { ctx in
            let everything = filter.ids.count == 1 ? [] : try ctx.records(\.deadLetters, limit: 1_000_000)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let matched = filter.ids.count == 1 ? try DeadLetterCommands.select(ctx, filter) : everything.filter { filter.matches($0, nowMs: now) }
            return (Array(matched.suffix(limit).reversed()), matched.count, Choices(everything))
        }
    }

    /// One dead letter by its id, or nil (no such letter, or not an id).
    public func deadLetter(id: String) throws -> StreamRecord? {
        guard DeadLetterFilter.isValidID(id) else { return nil }
        var f = DeadLetterFilter()
        f.ids = [id]
        return try deadLetters(f).rows.first
    }

    /// A stream feed (invalid tokens or channels), newest first, with app and reason filters,
    /// and the apps and reasons of the whole feed.
    public func feed(
        _ stream: KeyPath<QueueKeys, String>, app: String?, reason: String?, limit: Int = 10_000
    ) throws -> (
        rows: [StreamRecord], choices: Choices
    ) {
        try with { ctx in
            let all = try ctx.records(stream, limit: 1_000_000)
            let rows = all.filter { r in (app == nil || r.string("app") == app) && (reason == nil || r.string("reason") == reason) }
            return (rows.suffix(limit).reversed(), Choices(all))
        }
    }

    /// What a filter's drop-downs offer: the reasons and apps the records name.
    public struct Choices {
        public let reasons: [String]
        public let apps: [String]

        init(_ records: [StreamRecord]) {
            reasons = Set(records.map { $0.string("reason") }).sorted()
            apps = Set(records.map { $0.string("app") }).sorted()
        }
    }
}
