import APNSCore
import FoundationEssentials
import QueueContract
import RedisClient

/// `apnsctl dead list|show|requeue|purge`.
public struct DeadLetterFilter {
    public var reason: String?
    public var app: String?
    public var olderThanMs: Int64?
    public var newerThanMs: Int64?
    public var ids: [String] = []
    public var all = false
    /// Only letters written at or before this time (UNIX ms): what a confirmation counted.
    public var untilMs: Int64?

    public init() {}

    public var isEmpty: Bool { reason == nil && app == nil && olderThanMs == nil && newerThanMs == nil && ids.isEmpty && !all }
    /// Filters or --all, not ids alone: these need `--yes`.
    public var isWide: Bool { all || reason != nil || app != nil || olderThanMs != nil || newerThanMs != nil }

    /// The filters in words, for what a command would do.
    public var summary: String {
        var parts: [String] = []
        if let reason { parts.append("reason \(reason)") }
        if let app { parts.append("app \(app)") }
        if let olderThanMs { parts.append("older than \(olderThanMs / 1000)s") }
        if let newerThanMs { parts.append("newer than \(newerThanMs / 1000)s") }
        if !ids.isEmpty { parts.append("ids \(ids.joined(separator: " "))") }
        return parts.isEmpty ? "all" : parts.joined(separator: ", ")
    }

    /// Whether `id` reads as a record id: a stream entry id (`1764650000000-0`, or its time
    /// alone), with `@<shard>` after it for a shard's.
    public static func isValidID(_ id: String) -> Bool {
        let digits: (Substring) -> Bool = { !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }
        let shard = id.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        guard shard.count == 1 || digits(shard[1]) else { return false }
        let parts = shard[0].split(separator: "-", omittingEmptySubsequences: false)
        return (1...2).contains(parts.count) && parts.allSatisfy(digits)
    }

    public func matches(_ r: StreamRecord, nowMs: Int64) -> Bool {
        if !ids.isEmpty, !ids.contains(r.id) { return false }
        if let reason, r.string("reason") != reason { return false }
        if let app, r.string("app") != app { return false }
        if let olderThanMs, nowMs - r.timeMs < olderThanMs { return false }
        if let newerThanMs, nowMs - r.timeMs > newerThanMs { return false }
        if let untilMs, r.timeMs > untilMs { return false }
        return true
    }
}

/// What a wide requeue or purge (filters or --all) may do: only what `--yes` confirms.
public enum Confirmation {
    case yes, dryRun, missing
}

public enum DeadLetterCommands {
    public static func select(_ ctx: AdminContext, _ filter: DeadLetterFilter, limit: Int = 1_000_000) throws -> [StreamRecord] {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if filter.ids.count == 1, !filter.all {
            let (entry, shard) = StreamRecord.split(filter.ids[0])
            let set = try ctx.keys(ofRecord: filter.ids[0])
            return StreamRecord.parse(try ctx.call(set, ["XRANGE", set.deadLetters, entry, entry]), shard: shard)
        }
        return try ctx.records(\.deadLetters, limit: limit).filter { filter.matches($0, nowMs: now) }
    }

    public static func list(_ ctx: AdminContext, _ filter: DeadLetterFilter, limit: Int) throws -> Int {
        let records = Array(try select(ctx, filter).suffix(limit))
        ctx.table(
            ["id", "age", "reason", "app", "job_id", "token", "detail"],
            records.map { r in
                [r.id, age(r.timeMs), r.string("reason"), r.string("app"), r.string("job_id"), r.string("token"), r.string("detail")]
            }, jsonRows: records.map(\.json))
        return records.count
    }

    public static func show(_ ctx: AdminContext, id: String) throws {
        var f = DeadLetterFilter()
        f.ids = [id]
        guard let r = try select(ctx, f).first else { throw AdminError.notFound("no dead letter \(id)") }
        if ctx.json {
            ctx.say(AdminContext.encode(r.json))
            return
        }
        ctx.say("id:      \(r.id) (\(age(r.timeMs)) ago)")
        for key in ["reason", "detail", "app", "job_id", "token", "topic", "worker", "handle"] where r.fields[key] != nil {
            ctx.say("\((key + ":").padded(to: 9))\(r.string(key))")
        }
        for a in r.fields["attempts"]?.array ?? [] {
            ctx.say("attempt: status \(a["status"]?.display ?? "?") \(a["reason"]?.display ?? "") at \(a["time_ms"]?.display ?? "?")")
        }
        ctx.say("job:     \(String(decoding: try originalJob(r), as: UTF8.self))")
    }

    /// Requeues each selected letter; `edit` may change a job first (nil: drop it from the run).
    public static func requeue(
        _ ctx: AdminContext, _ filter: DeadLetterFilter, confirmation: Confirmation = .yes, edit: (([UInt8]) throws -> [UInt8]?)? = nil
    ) throws -> Int {
        guard !filter.isEmpty else { throw AdminError.usage("say which dead letters: an id, filters, or --all") }
        let records = try select(ctx, filter)
        guard !records.isEmpty else { throw AdminError.notFound("no dead letter matches (\(filter.summary))") }
        guard try confirmed(ctx, filter, records, verb: "requeue", confirmation) else { return 0 }
        var done = 0
        for r in records {
            var job = try originalJob(r)
            if let edit {
                guard let edited = try edit(job) else { continue }
                job = edited
            }
            let set = try ctx.keys(ofRecord: r.id)
            let call = QueueScripts.requeueDeadLetterCall(set, entry: r.entry, job: job)
            if try ctx.connection(set).run(QueueScripts.requeueDeadLetter, call).integer == 1 { done += 1 }
        }
        ctx.say(
            ctx.json
                ? AdminContext.encode(["requeued": done])
                : "requeued \(done) job(s) onto \(ctx.keySets.count > 1 ? "their shards' queues" : ctx.keys.jobs)")
        return done
    }

    public static func purge(_ ctx: AdminContext, _ filter: DeadLetterFilter, confirmation: Confirmation = .yes) throws -> Int {
        guard !filter.isEmpty else { throw AdminError.usage("say which dead letters: an id, filters, or --all") }
        let records = try select(ctx, filter)
        guard !records.isEmpty else { throw AdminError.notFound("no dead letter matches (\(filter.summary))") }
        guard try confirmed(ctx, filter, records, verb: "purge", confirmation) else { return 0 }
        var removed = 0
        if filter.all && filter.reason == nil && filter.app == nil && filter.olderThanMs == nil && filter.newerThanMs == nil && filter.untilMs == nil
        {
            for set in ctx.keySets {
                removed += Int(try ctx.call(set, ["XLEN", set.deadLetters]).integer ?? 0)
                _ = try ctx.call(set, ["DEL", set.deadLetters])
            }
        } else {
            for set in ctx.keySets {
                let ids = records.filter { $0.shard == set.shard }.map(\.entry)
                for chunk in stride(from: 0, to: ids.count, by: 500) {
                    removed += Int(try ctx.call(set, ["XDEL", set.deadLetters] + ids[chunk..<min(chunk + 500, ids.count)]).integer ?? 0)
                }
            }
        }
        ctx.say(ctx.json ? AdminContext.encode(["purged": removed]) : "purged \(removed) dead letter(s)")
        return removed
    }

    /// Ids alone go ahead; filters and --all go ahead with `--yes`, only list what they match with
    /// `--dry-run`, and are refused (exit 2) with neither, saying what they would do.
    private static func confirmed(
        _ ctx: AdminContext, _ filter: DeadLetterFilter, _ records: [StreamRecord], verb: String, _ confirmation: Confirmation
    ) throws -> Bool {
        guard filter.isWide else { return true }
        switch confirmation {
        case .yes:
            return true
        case .missing:
            throw AdminError.usage(
                "this would \(verb) \(records.count) dead letter(s) (\(filter.summary)); add --yes to do it, or --dry-run to list them")
        case .dryRun:
            if ctx.json {
                ctx.say(AdminContext.encode(["dry_run": true, "would_\(verb)": records.count, "ids": records.map(\.id)]))
            } else {
                ctx.say("would \(verb) \(records.count) dead letter(s) (\(filter.summary)); nothing was changed")
                ctx.table(
                    ["id", "age", "reason", "app", "job_id"],
                    records.map { [$0.id, age($0.timeMs), $0.string("reason"), $0.string("app"), $0.string("job_id")] })
            }
            return false
        }
    }

    /// The producer's job as it was: the record's `job` value byte for byte, or `job_text`.
    public static func originalJob(_ r: StreamRecord) throws -> [UInt8] {
        if let text = r.fields["job_text"]?.string { return Array(text.utf8) }
        var found: Range<Int>?
        r.raw.withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            try? s.forEachMember { (key, s) throws(JSONSyntaxError) in
                let (_, range) = try s.skipValue()
                if key == "job" { found = range }
            }
        }
        guard let found else { throw AdminError.invalid("dead letter \(r.id) keeps no job") }
        return Array(r.raw[found])
    }

    public static func age(_ ms: Int64) -> String {
        let s = max(0, (Int64(Date().timeIntervalSince1970 * 1000) - ms) / 1000)
        if s < 120 { return "\(s)s" }
        if s < 7200 { return "\(s / 60)m" }
        if s < 172_800 { return "\(s / 3600)h" }
        return "\(s / 86400)d"
    }
}
