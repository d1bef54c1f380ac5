import APNSCore
import Configuration
import IOLoop
import QueueContract
import RedisClient

/// What every `apnsctl` command works with: one Redis connection, the queue's keys (and its
/// shards' key sets), the output mode.
public final class AdminContext {
    public let redis: BlockingRedisConnection
    /// The queue's own keys, and every key set the workers serve (the same one, unsharded).
    public let keys: QueueKeys
    public private(set) var keySets: [QueueKeys]
    /// Shards beyond the count given (`--shards`, the configuration) that the queue's record says
    /// workers served: a rollback's, which workers drain (`ShardRecord`).
    public private(set) var draining: Set<Int> = []
    public let json: Bool
    public let configuration: WorkerConfiguration?
    private let output: (String) -> Void
    /// On a cluster, where each key set's connection goes (its slot's master), and those made.
    private let cluster: RedisEndpoint?
    private var connections: [String: BlockingRedisConnection] = [:]

    public init(
        redis: BlockingRedisConnection, keys: QueueKeys, shards: Int = 1, json: Bool, configuration: WorkerConfiguration? = nil,
        cluster: RedisEndpoint? = nil, output: @escaping (String) -> Void = { print($0) }
    ) {
        self.cluster = cluster?.cluster == nil ? nil : cluster
        self.redis = redis
        self.keys = keys
        let namespace = String(keys.prefix.prefix { $0 != ":" })
        keySets = QueueKeys.served(queue: keys.queue, shards: shards, namespace: namespace)
        self.json = json
        self.configuration = configuration
        self.output = output
        // Unreadable (Redis down): the commands that need Redis say so themselves.
        if let recorded = try? call(keys, ["HGET", keys.shardsRecord, "max"]).integer, Int(recorded) > shards {
            draining = Set(ShardRecord.beyond(configured: shards, recorded: Int(recorded)))
            keySets = QueueKeys.served(queue: keys.queue, shards: Int(recorded), namespace: namespace)
        }
    }

    public func say(_ line: String) { output(line) }

    /// A warning, on standard error: it never mixes with `--json` output.
    public func warn(_ line: String) { FileStream.standardError.write(line + "\n") }

    /// Prints rows as an aligned table, or as a JSON array of objects with `--json`.
    public func table(_ columns: [String], _ rows: [[String]], jsonRows: [Any]? = nil) {
        Self.table(columns, rows, jsonRows: jsonRows, json: json, say: say)
    }

    /// `table` for a command with no Redis (channel management).
    public static func table(_ columns: [String], _ rows: [[String]], jsonRows: [Any]? = nil, json: Bool, say: (String) -> Void) {
        if json {
            let objects = jsonRows ?? rows.map { Dictionary(uniqueKeysWithValues: zip(columns, $0)) }
            say(AdminContext.encode(objects))
            return
        }
        var widths = columns.map(\.count)
        // Tokens and ids are never cut: an operator copies them.
        let whole = columns.map { ["token", "id", "job_id", "channel"].contains($0) }
        for row in rows {
            for (i, cell) in row.enumerated() where i < widths.count {
                widths[i] = whole[i] ? max(widths[i], cell.count) : min(60, max(widths[i], cell.count))
            }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in
                let cell = i < whole.count && !whole[i] && c.count > 60 ? String(c.prefix(57)) + "..." : c
                return i == cells.count - 1 ? cell : cell.padded(to: widths[i])
            }.joined(separator: "  ")
        }
        say(line(columns.map { $0.uppercased() }))
        for row in rows { say(line(row)) }
    }

    public static func encode(_ value: Any) -> String {
        JSONValue(any: value).text
    }

    /// The connection for a key set's commands: on a cluster, to the master of its slot.
    func connection(_ set: QueueKeys) throws -> BlockingRedisConnection {
        guard let cluster else { return redis }
        if let open = connections[set.label] { return open }
        let made = try BlockingRedisConnection(cluster.routed(toKey: set.jobs), timeoutMs: 10_000)
        connections[set.label] = made
        return made
    }

    /// Runs a command on a key set's keys (the queue's own by default); a server error becomes
    /// an AdminError.
    func call(_ args: [String]) throws -> RedisReply { try call(keys, args) }

    public func call(_ set: QueueKeys, _ args: [String]) throws -> RedisReply {
        let reply = try connection(set).command(args)
        if case .error(let m) = reply { throw AdminError.redis(m) }
        return reply
    }

    /// How many jobs a worker holds unfinished in one key set.
    func inFlight(worker: String, in keys: QueueKeys) throws -> Int64 { try InFlightJobs.count(connection(keys), keys, worker: worker) }

    /// The key set a record id names (`id@shard`, or the queue's own for a bare id).
    func keys(ofRecord id: String) throws -> QueueKeys {
        let shard = StreamRecord.split(id).shard
        guard let set = keySets.first(where: { $0.shard == shard }) else {
            throw AdminError.notFound("\(id) names shard \(shard ?? 0), and queue \(keys.queue) has \(keySets.count - 1) shards (--shards)")
        }
        return set
    }

    /// A stream's entries from every key set, oldest first: `stream` names it in a key set.
    public func records(_ stream: KeyPath<QueueKeys, String>, after: String? = nil, limit: Int) throws -> [StreamRecord] {
        let cursor = after.map(StreamRecord.split)
        var all: [StreamRecord] = []
        for set in keySets {
            let start = cursor.map { StreamRecord.bound(after: $0, shard: set.shard, newestFirst: false) } ?? "-"
            all += StreamRecord.parse(try call(set, ["XRANGE", set[keyPath: stream], start, "+", "COUNT", String(limit)]), shard: set.shard)
        }
        guard keySets.count > 1 else { return all }
        return Array(all.sorted { $0.order < $1.order }.prefix(limit))
    }
}

/// Failures with the exit code they mean.
public enum AdminError: Error, CustomStringConvertible {
    case usage(String)
    case notFound(String)
    case invalid(String)
    case redis(String)
    /// APNs could not be reached (connection, TLS, no answer).
    case unreachable(String)

    public var description: String {
        switch self {
        case .usage(let m), .notFound(let m), .invalid(let m), .unreachable(let m): return m
        case .redis(let m): return "redis: \(m)"
        }
    }

    /// 2: bad usage; 1: nothing matched, the input is invalid or APNs refused it; 3: Redis
    /// failed; 4: APNs out of reach.
    public var exitCode: Int32 {
        switch self {
        case .usage: return 2
        case .notFound, .invalid: return 1
        case .redis: return 3
        case .unreachable: return 4
        }
    }
}

/// A stream entry: its id and its parsed record, with the record's raw bytes. The id is the
/// stream's (`<ms>-<seq>`), with `@<shard>` after it for a shard's stream.
public struct StreamRecord {
    public let id: String
    /// The stream's own id, and the shard whose stream it is in (nil: the queue's own).
    public let entry: String
    public let shard: Int?
    public let raw: [UInt8]
    public let fields: [String: JSONValue]

    public var timeMs: Int64 { order.0 }

    /// Its place among every key set's records: by time, then sequence, then shard.
    var order: (Int64, Int64, Int) { Self.order(entry: entry, shard: shard) }

    static func order(entry: String, shard: Int?) -> (Int64, Int64, Int) {
        let parts = entry.split(separator: "-")
        return (Int64(parts.first ?? "") ?? 0, Int64(parts.dropFirst().first ?? "") ?? 0, shard ?? -1)
    }

    /// `1764650000000-0@3` → ("1764650000000-0", 3); a bare id is the queue's own.
    static func split(_ id: String) -> (entry: String, shard: Int?) {
        let parts = id.split(separator: "@", maxSplits: 1)
        return (String(parts.first ?? ""), parts.count == 2 ? Int(parts[1]) : nil)
    }

    /// The id of `entry` in `shard`'s stream.
    static func id(entry: String, shard: Int?) -> String { shard.map { "\(entry)@\($0)" } ?? entry }

    /// Where `shard`'s stream is read from to go on after the record `cursor`, in (entry, shard)
    /// order: a shard on the far side of the cursor's still has its record of the same entry.
    static func bound(after cursor: (entry: String, shard: Int?), shard: Int?, newestFirst: Bool) -> String {
        let (mine, theirs) = (shard ?? -1, cursor.shard ?? -1)
        return (newestFirst ? mine < theirs : mine > theirs) ? cursor.entry : "(" + cursor.entry
    }

    /// Each entry of an XRANGE or XREVRANGE reply: its id and its `record` field's bytes.
    static func entries(_ reply: RedisReply) -> [(entry: String, raw: [UInt8])] {
        reply.array.compactMap { entry in
            let parts = entry.array
            guard parts.count == 2, let id = parts[0].text, parts[1].array.count >= 2, case .string(let raw) = parts[1].array[1] else { return nil }
            return (id, raw)
        }
    }

    static func parse(_ reply: RedisReply, shard: Int? = nil) -> [StreamRecord] {
        entries(reply).compactMap { StreamRecord(entry: $0.entry, shard: shard, raw: $0.raw) }
    }

    public func string(_ key: String) -> String { fields[key]?.display ?? "" }

    /// The record as `--json` and the dashboard's API give it.
    public var json: [String: Any] { ["id": id, "record": fields] }
}

extension StreamRecord {
    /// The record of a stream entry, or nil when its field is not a JSON object.
    init?(entry: String, shard: Int?, raw: [UInt8]) {
        guard case .object(let object)? = try? JSONValue.parse(raw) else { return nil }
        self.init(id: Self.id(entry: entry, shard: shard), entry: entry, shard: shard, raw: raw, fields: object)
    }
}

extension String {
    /// The text with spaces after it to `width` characters; a longer text stays whole.
    func padded(to width: Int) -> String { count >= width ? self : self + String(repeating: " ", count: width - count) }
}

/// "90s", "15m", "2h", "7d" → milliseconds.
public func parseDuration(_ text: String) throws -> Int64 {
    let units: [Character: Int64] = ["s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000]
    guard let unit = text.last, let factor = units[unit], let n = Int64(text.dropLast()) else {
        throw AdminError.usage("durations look like 90s, 15m, 2h or 7d, not \(text)")
    }
    return n * factor
}

/// `x` with one decimal, as the tables show rates.
public func oneDecimal(_ x: Double) -> String {
    let tenths = Int((x * 10).rounded())
    return (tenths < 0 ? "-" : "") + "\(abs(tenths) / 10).\(abs(tenths) % 10)"
}
