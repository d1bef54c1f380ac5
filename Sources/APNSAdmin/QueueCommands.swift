import APNSCore
import APNSTransport
import APNSWorker
import Configuration
import FoundationEssentials
import QueueContract
import RedisClient
import TLS

/// `apnsctl stats`, `enqueue`, `tokens invalid`, `check-config`.
public enum QueueCommands {
    public struct Stats {
        /// The queue's figures: its key sets' summed.
        public var depth: Int64 { keySets.reduce(0) { $0 + $1.depth } }
        public var inFlight: Int64 { keySets.reduce(0) { $0 + $1.inFlight } }
        public var scheduled: Int64 { keySets.reduce(0) { $0 + $1.scheduled } }
        public var suspects: Int64 { keySets.reduce(0) { $0 + $1.suspects } }
        public var retries: Int64 { keySets.reduce(0) { $0 + $1.retries } }
        public var deadLetters: Int64 { keySets.reduce(0) { $0 + $1.deadLetters } }
        public var resultsPerSecond: Double { keySets.reduce(0) { $0 + $1.resultsPerSecond } }
        public var counters: [String: Int64] = [:]
        /// The dead letters' tally by reason (`dead_lettered/<reason>`), most first.
        public var deadLetterReasons: [(reason: String, count: Int64)] {
            let prefix = CounterPairs.deadLetterTally("")
            return counters.compactMap { $0.key.hasPrefix(prefix) ? (String($0.key.dropFirst(prefix.count)), $0.value) : nil }
                .sorted { ($1.count, $0.reason) < ($0.count, $1.reason) }
        }
        public var workers: [(id: String, leaseLeftMs: Int64, inFlight: Int64)] = []
        /// Whether Redis holds any key of the queue: none is most often a misspelt name.
        public var exists = true
        /// Apps live workers have paused because APNs refused their credentials.
        public var paused: [(app: String, worker: String, reason: String)] = []
        /// Each key set's part (with shards): what a shard to drain still holds.
        public var keySets: [KeySetStats] = []

        public init() {}
    }

    /// One key set's figures (the queue's own keys, or one shard's).
    public struct KeySetStats {
        public var keys: String
        public var depth: Int64 = 0
        public var inFlight: Int64 = 0
        public var scheduled: Int64 = 0
        /// Jobs taken back twice or more, waiting to go one at a time per worker.
        public var suspects: Int64 = 0
        public var retries: Int64 = 0
        public var deadLetters: Int64 = 0
        public var resultsPerSecond: Double = 0
        /// The job at the consuming end of the list (the next taken), if any.
        public var oldestJob: [UInt8]?
        /// A shard beyond the count given that workers served before a rollback: they drain it.
        public var draining = false

        public var json: [String: Any] {
            [
                "keys": keys, "depth": depth, "in_flight": inFlight, "scheduled": scheduled, "suspects": suspects, "retries": retries,
                "dead_letters": deadLetters, "draining": draining,
                "results_per_second": resultsPerSecond,
            ]
        }
    }

    /// The queue's figures, summed over its key sets (its shards, and its own keys).
    public static func stats(_ ctx: AdminContext) throws -> Stats {
        var s = Stats()
        let k = ctx.keys
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var exists = false
        var workers: [String: (leaseLeftMs: Int64, inFlight: Int64)] = [:]
        for k in ctx.keySets {
            var part = KeySetStats(keys: k.label)
            part.draining = k.shard.map { ctx.draining.contains($0) } ?? false
            defer { s.keySets.append(part) }
            part.depth = try ctx.call(k, ["LLEN", k.jobs]).integer ?? 0
            if case .string(let tail) = try ctx.call(k, ["LINDEX", k.jobs, "-1"]) { part.oldestJob = tail }
            part.scheduled = try ctx.call(k, ["ZCARD", k.scheduled]).integer ?? 0
            part.suspects = try ctx.call(k, ["LLEN", k.suspects]).integer ?? 0
            // Retries are envelopes that carry attempts; count them in the first 10,000 waiting.
            part.retries = Int64(
                try ctx.call(k, ["ZRANGE", k.scheduled, "0", "9999"]).array.filter {
                    $0.text?.contains(#""attempts":["#) == true
                }.count)
            part.deadLetters = try ctx.call(k, ["XLEN", k.deadLetters]).integer ?? 0
            part.resultsPerSecond = try resultsPerSecond(ctx, k, nowMs: now)
            try addCounters(ctx, k, to: &s.counters)
            let named = [k.jobs, k.stats, k.workers, k.results, k.deadLetters, k.scheduled, k.invalidTokens, k.templates]
            exists = try exists || ctx.call(k, ["EXISTS"] + named).integer ?? 0 > 0
            let listed = try ctx.call(k, ["ZRANGE", k.workers, "0", "-1", "WITHSCORES"]).array.compactMap(\.text)
            for i in stride(from: 0, to: listed.count - 1, by: 2) {
                let held = try ctx.inFlight(worker: listed[i], in: k)
                part.inFlight += held
                let left = (Int64(Double(listed[i + 1]) ?? 0)) - now
                // A worker's lease is as good as its worst shard's.
                let before = workers[listed[i]]
                workers[listed[i]] = (min(before?.leaseLeftMs ?? left, left), (before?.inFlight ?? 0) + held)
            }
        }
        s.exists = exists
        s.workers = workers.sorted { $0.key < $1.key }.map { ($0.key, $0.value.leaseLeftMs, $0.value.inFlight) }
        let pauses = try ctx.call(["HVALS", k.paused]).array.compactMap(\.text)
        let live = Set(s.workers.filter { $0.leaseLeftMs > 0 }.map(\.id))
        for text in pauses {
            guard let o = try? JSONValue.parse(text.utf8), let app = o["app"]?.string, let worker = o["worker"]?.string, live.contains(worker)
            else { continue }
            s.paused.append((app, worker, o["reason"]?.string ?? ""))
        }
        return s
    }

    /// The apps the counters name (`delivered:app`, ...).
    public static func apps(_ s: Stats) -> [String] {
        Set(s.counters.keys.compactMap { $0.split(separator: ":", maxSplits: 1).count == 2 ? String($0.split(separator: ":")[1]) : nil }).sorted()
    }

    /// `apnsctl stats --json`, and the dashboard's /api/overview with it.
    /// Each app's counters (`delivered:app` → app → delivered).
    public static func countersByApp(_ s: Stats) -> [String: [String: Int64]] {
        var perApp: [String: [String: Int64]] = [:]
        for app in apps(s) {
            for (key, v) in s.counters where key.hasSuffix(":" + app) { perApp[app, default: [:]][String(key.dropLast(app.count + 1))] = v }
        }
        return perApp
    }

    /// Adds the key set's counters (its stats hash) to `counters`.
    static func addCounters(_ ctx: AdminContext, _ k: QueueKeys, to counters: inout [String: Int64]) throws {
        let pairs = try ctx.call(k, ["HGETALL", k.stats]).array.compactMap(\.text)
        for i in stride(from: 0, to: pairs.count - 1, by: 2) { counters[pairs[i], default: 0] += Int64(pairs[i + 1]) ?? 0 }
    }

    /// The queue's counters alone, summed over its key sets (no other figure read).
    public static func counters(_ ctx: AdminContext) throws -> Stats {
        var s = Stats()
        for k in ctx.keySets { try addCounters(ctx, k, to: &s.counters) }
        return s
    }

    /// Results in the last 10 s, per second. At most 1,000 are read: past that, the rate is
    /// what the newest 1,000 took (a million results cost what a thousand do).
    static func resultsPerSecond(_ ctx: AdminContext, _ k: QueueKeys, nowMs: Int64) throws -> Double {
        let recent = try ctx.call(k, ["XREVRANGE", k.results, "+", String(nowMs - 10_000), "COUNT", "1000"]).array
        let times = recent.compactMap { $0.array.first?.text.flatMap { Int64($0.prefix { $0 != "-" }) } }
        guard times.count == 1000, let newest = times.first, let oldest = times.last else { return Double(recent.count) / 10 }
        return 1000 * 1000 / Double(max(1, newest - oldest))
    }

    public static func statsJSON(_ ctx: AdminContext, _ s: Stats) -> [String: Any] {
        let perApp = countersByApp(s)
        return [
            "queue": ctx.keys.queue, "shards": max(1, ctx.keySets.count - 1), "depth": s.depth, "in_flight": s.inFlight,
            "scheduled": s.scheduled, "suspects": s.suspects, "retries": s.retries,
            "dead_letters": s.deadLetters, "results_per_second": s.resultsPerSecond, "queue_exists": s.exists,
            "paused": s.paused.map { ["app": $0.app, "worker": $0.worker, "reason": $0.reason] },
            "key_sets": s.keySets.map(\.json),
            "counters": s.counters.filter { !$0.key.contains(":") && !$0.key.contains("/") }, "apps": perApp,
            "dead_lettered_by_reason": Dictionary(uniqueKeysWithValues: s.deadLetterReasons.map { ($0.reason, $0.count) }),
            "workers": s.workers.map {
                ["id": $0.id, "lease_left_ms": $0.leaseLeftMs, "in_flight": $0.inFlight, "alive": $0.leaseLeftMs > 0]
            },
        ]
    }

    public static func printStats(_ ctx: AdminContext, _ s: Stats) {
        if !s.exists {
            ctx.warn("warning: queue \"\(ctx.keys.queue)\" has no keys in Redis at all: is its name right? (--queue, or the configuration's queue)")
        }
        let apps = apps(s)
        if ctx.json {
            ctx.say(AdminContext.encode(statsJSON(ctx, s)))
            return
        }
        ctx.say(
            "queue \(ctx.keys.queue)\(ctx.keySets.count > 1 ? " (\(ctx.keySets.count - 1) shards)" : ""): \(s.depth) waiting, \(s.inFlight) in flight, \(s.scheduled) scheduled (\(s.retries) retries), \(s.deadLetters) dead letters, \(oneDecimal(s.resultsPerSecond)) results/s"
                + (s.suspects > 0 ? "; \(s.suspects) suspects (jobs taken back from dead workers twice) go one at a time per worker" : "")
        )
        for p in s.paused { ctx.say("PAUSED: app \(p.app) on worker \(p.worker): \(p.reason)") }
        if s.keySets.count > 1 {
            ctx.table(
                ["keys", "waiting", "in flight", "scheduled", "state"],
                s.keySets.map { ["{\($0.keys)}", String($0.depth), String($0.inFlight), String($0.scheduled), $0.draining ? "draining" : "serving"] })
        }
        let names = ["delivered", "invalid_token", "dead_lettered", "retried", "scheduled", "recovered", "poison_pills", "may_duplicate"]
        ctx.table(
            ["app"] + names,
            [["all"] + names.map { String(s.counters[$0] ?? 0) }] + apps.map { app in [app] + names.map { String(s.counters["\($0):\(app)"] ?? 0) } })
        ctx.table(
            ["worker", "alive", "last heartbeat", "in flight"],
            s.workers.map { w in
                [
                    w.id, w.leaseLeftMs > 0 ? "yes" : "NO",
                    w.leaseLeftMs > 0 ? "lease left \(w.leaseLeftMs / 1000)s" : "lease ran out \(-w.leaseLeftMs / 1000)s ago", String(w.inFlight),
                ]
            })
    }

    /// Checks each job with the worker's own parser, then LPUSHes in pipelined chunks.
    /// `knownApps`: the configuration's apps, when there is one; a job naming another is refused.
    public static func enqueue(
        _ ctx: AdminContext, jobs: [[UInt8]], knownApps: [String]? = nil, progress: ((Int, Int) -> Void)? = nil
    ) throws -> Int {
        var keys: [String?] = []
        for (i, job) in jobs.enumerated() {
            let parsed: Job
            do { parsed = try Job.parse(job) } catch {
                throw AdminError.invalid("job \(i + 1) is invalid, nothing was enqueued: \(error)")
            }
            if let knownApps, let app = parsed.app, !knownApps.contains(app) {
                throw AdminError.invalid(
                    "job \(i + 1) names app \"\(app)\", which the configuration does not have (it has \(knownApps.joined(separator: ", "))); nothing was enqueued"
                )
            }
            keys.append(parsed.idempotencyKey)
        }
        // A sharded queue's jobs go to its shards at random, as the contract tells producers to;
        // a keyed job to its key's shard (`IdempotencyClaim.shard`). Never to a draining shard.
        let shards = ctx.keySets.filter { $0.shard.map { !ctx.draining.contains($0) } ?? false }
        func home(_ i: Int) -> QueueKeys {
            guard !shards.isEmpty else { return ctx.keys }
            guard let key = keys[i] else { return shards.randomElement()! }
            let n = IdempotencyClaim.shard(ofKey: key, shards: shards.count)
            return shards.first { $0.shard == n } ?? shards[n]
        }
        var sent = 0
        while sent < jobs.count {
            let range = sent..<min(sent + 1000, jobs.count)
            var byQueue: [String: [[UInt8]]] = [:]
            for i in range { byQueue[home(i).jobs, default: []].append(jobs[i]) }
            for (queue, jobs) in byQueue {
                let set = ctx.keySets.first { $0.jobs == queue } ?? ctx.keys
                var args = RedisArgs(capacity: jobs.reduce(64) { $0 + $1.count })
                args.append("LPUSH")
                args.append(queue)
                for j in jobs { args.append(bytes: j) }
                if case .error(let m) = try ctx.connection(set).command(args) { throw AdminError.redis(m) }
            }
            sent += range.count
            progress?(sent, jobs.count)
        }
        return sent
    }

    /// The feed from the entry after `after` (from the start if nil), so that a script paging
    /// with the last id it saw gets no row twice.
    public static func invalidTokens(_ ctx: AdminContext, app: String?, after: String?, limit: Int) throws -> Int {
        let records = try ctx.records(\.invalidTokens, after: after, limit: limit).filter { app == nil || $0.string("app") == app }
        ctx.table(
            ["id", "token", "app", "topic", "reason", "apns_timestamp"],
            records.map {
                [$0.id, $0.string("token"), $0.string("app"), $0.string("topic"), $0.string("reason"), $0.string("apns_timestamp")]
            }, jsonRows: records.map(\.json))
        return records.count
    }

    /// The invalid-channel feed, paged as `invalidTokens` is.
    public static func invalidChannels(_ ctx: AdminContext, app: String?, after: String?, limit: Int) throws -> Int {
        let records = try ctx.records(\.invalidChannels, after: after, limit: limit).filter { app == nil || $0.string("app") == app }
        ctx.table(
            ["id", "channel", "app", "reason", "job_id"],
            records.map { [$0.id, $0.string("channel"), $0.string("app"), $0.string("reason"), $0.string("job_id")] },
            jsonRows: records.map(\.json))
        return records.count
    }

    /// Validates the configuration and credentials. Returns (errors, warnings).
    /// `online`: an FCM app also gets an access token from its token endpoint.
    public static func checkConfig(_ config: WorkerConfiguration, online: Bool = false, say: (String) -> Void) -> (Int, Int) {
        var errors = 0, warnings = 0
        func fail(_ m: String) { errors += 1; say("error: \(m)") }
        func warn(_ m: String) { warnings += 1; say("warning: \(m)") }
        func ok(_ m: String) { say("ok: \(m)") }
        let now = Int64(Date().timeIntervalSince1970)
        for listed in config.apps {
            let report = listed.keyReport
            for line in report.lines { ok(line) }
            for w in report.warnings { warn(w) }
            for other in listed.keys.dropFirst() {
                do { _ = try JWTProvider(teamID: other.teamID, keyID: other.keyID, p8File: other.keyFile) } catch {
                    fail("app \(listed.name): key \(other.keyID): \(error)")
                }
            }
        }
        for app in config.apps.map({ $0.keys.isEmpty ? $0 : $0.withFirstKey }) {
            for w in app.credentialWarnings { warn(w) }
            if case .serviceAccount(let file, let project) = app.auth {
                checkFCM(app.name, file: file, project: project, caFile: app.endpoint.caFile, online: online, ok: ok, fail: fail)
                continue
            }
            if app.bundleID.isEmpty || app.bundleID.contains(" ") { fail("app \(app.name): bundle_id \"\(app.bundleID)\" is not a bundle id") }
            switch app.auth {
            case .token(let team, let kid, let file):
                if team.count != 10 { warn("app \(app.name): team_id \(team) is not 10 characters") }
                if kid.count != 10 { warn("app \(app.name): key_id \(kid) is not 10 characters") }
                do {
                    _ = try JWTProvider(teamID: team, keyID: kid, p8File: file)
                    ok("app \(app.name): the .p8 key parses and signs a provider token")
                } catch {
                    fail("app \(app.name): \(error)")
                }
            case .serviceAccount: continue
            case .certificate(let file, _), .pkcs12(let file, _):
                let info: CertificateInfo
                do {
                    if case .pkcs12(_, let password) = app.auth {
                        info = try CertificateInfo.read(pkcs12File: file, password: password)
                    } else {
                        info = try CertificateInfo.read(pemFile: file)
                    }
                    _ = try AppRuntime(APNSApp(app), jwt: nil)
                } catch {
                    // AppRuntime's errors name the app already.
                    let text = "\(error)"
                    fail(text.hasPrefix("app \(app.name):") ? text : "app \(app.name): \(text)")
                    continue
                }
                let days = (info.notAfter - now) / 86_400
                if info.notAfter <= now {
                    fail("app \(app.name): the certificate expired \(-days) days ago")
                } else if days < 30 {
                    warn("app \(app.name): the certificate expires in \(days) days")
                } else {
                    ok("app \(app.name): the certificate is valid for \(days) more days")
                }
                if let uid = info.subjectUID, uid != app.bundleID { warn("app \(app.name): the certificate is for \(uid), not \(app.bundleID)") }
            }
        }
        if let dir = config.templatesDirectory {
            var lib = TemplateLibrary()
            let names = (try? FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".json") }) ?? []
            if names.isEmpty { warn("templates_dir \(dir) holds no .json templates") }
            for name in names {
                do {
                    let data = try Data(contentsOf: URL(fileURLWithPath: dir).appendingPathComponent(name))
                    try lib.set(String(name.dropLast(5)), source: [UInt8](data))
                } catch {
                    fail("template \(name): \(error)")
                }
            }
        }
        do {
            let keys = config.servedKeys[0]
            let r = try BlockingRedisConnection(config.redis.routed(toKey: keys.jobs), timeoutMs: 2000)
            _ = try r.command(["PING"])
            ok("redis \(config.redis) answers")
            // What the worker checks at start, and CONFIG GET when this user may.
            let findings = try RedisPreflight.check(r, keys, admin: true)
            for f in findings { f.severity == .fatal ? fail(f.message) : warn(f.message) }
            if !findings.contains(where: { $0.severity == .fatal }) {
                ok("redis: the user may run every command and key the queue uses, and maxmemory-policy keeps queued jobs")
            }
        } catch {
            fail("\(error)" + (error.mistake.map { ": \($0)" } ?? ""))
        }
        return (errors, warnings)
    }
}
