import FoundationEssentials
import QueueContract
import RedisClient

/// One page of a record stream, newest first, over every key set: the rows, where the next
/// page starts, and how far the search went. Read with `XREVRANGE … COUNT`, so that a page
/// costs what it shows (and a filter what it searched), never the whole stream.
public struct RecordPage {
    public var rows: [StreamRecord] = []
    /// The id of the last record read: the next page's `before`. Nil when the oldest was read.
    public var next: String?
    /// Records read to find the rows.
    public var searched = 0
    /// How many records match, when the search reached the oldest (a filter), or the
    /// stream's length (no filter); nil when the search stopped first.
    public var matched: Int?

    public init() {}
}

extension AdminContext {
    /// Records of `stream` older than the record `before` (an id as `StreamRecord.id`), newest
    /// first: up to `limit` that `matches`, reading at most `budget`. Without a filter, a page
    /// reads `limit` records and `matched` is the streams' length. A record whose raw JSON
    /// lacks one of `needles` does not match, and is not parsed.
    public func newest(
        _ stream: KeyPath<QueueKeys, String>, before: String?, limit: Int, budget: Int = 5000, filtered: Bool = false,
        needles: [String] = [], matches: (StreamRecord) -> Bool = { _ in true }
    ) throws -> RecordPage {
        let needles = needles.map { Array($0.utf8) }
        let chunk = filtered ? 1000 : min(max(limit + 1, 16), 1000)
        var sources = keySets.map { set in
            RecordSource(set: set, end: before.map { StreamRecord.bound(after: StreamRecord.split($0), shard: set.shard, newestFirst: true) } ?? "+")
        }
        var page = RecordPage()
        var matched = 0
        var lastRead: String?
        var reachedEnd = false
        while page.searched < budget {
            for i in sources.indices where sources[i].isEmpty { try sources[i].refill(self, stream, count: chunk) }
            guard let newest = sources.indices.filter({ !sources[$0].isEmpty }).max(by: { sources[$0].head.order < sources[$1].head.order }) else {
                reachedEnd = true
                break
            }
            let raw = sources[newest].pop()
            page.searched += 1
            lastRead = raw.id
            guard needles.allSatisfy(raw.contains), let record = raw.parsed else { continue }
            if matches(record) {
                matched += 1
                if page.rows.count < limit { page.rows.append(record) }
            }
            // Without a filter the page ends with its rows; with one, the search goes on to count.
            if !filtered, page.rows.count == limit { break }
        }
        if !filtered {
            page.matched = Int(try keySets.reduce(Int64(0)) { $0 + (try call($1, ["XLEN", $1[keyPath: stream]]).integer ?? 0) })
            let more = sources.contains { !$0.isEmpty || !$0.exhausted }
            page.next = page.rows.count == limit && more ? page.rows.last?.id : nil
        } else {
            page.matched = reachedEnd ? matched : nil
            if page.rows.count == limit {
                // The next page starts after the last row shown.
                page.next = reachedEnd && matched == limit ? nil : page.rows.last?.id
            } else {
                // Fewer rows than asked: the search stopped at its budget, or at the oldest.
                page.next = reachedEnd ? nil : lastRead
            }
        }
        return page
    }
}

/// One key set's stream, read newest first in chunks.
private struct RecordSource {
    let set: QueueKeys
    /// Where the next chunk ends: "+", an entry (inclusive) or "(" and an entry.
    var end: String
    var buffer: [RawRecord] = []
    var position = 0
    var exhausted = false

    init(set: QueueKeys, end: String) {
        self.set = set
        self.end = end
    }

    var isEmpty: Bool { position == buffer.count }
    var head: RawRecord { buffer[position] }

    mutating func pop() -> RawRecord {
        position += 1
        return buffer[position - 1]
    }

    mutating func refill(_ ctx: AdminContext, _ stream: KeyPath<QueueKeys, String>, count: Int) throws {
        guard !exhausted else { return }
        let reply = try ctx.call(set, ["XREVRANGE", set[keyPath: stream], end, "-", "COUNT", String(count)])
        let entries = reply.array
        exhausted = entries.count < count
        if let last = entries.last?.array.first?.text { end = "(" + last }
        let shard = set.shard
        buffer = StreamRecord.entries(reply).map { RawRecord(entry: $0.entry, shard: shard, raw: $0.raw) }
        position = 0
    }
}

/// A record as read, parsed only when it may match.
struct RawRecord {
    let entry: String
    let shard: Int?
    let raw: [UInt8]
    /// Its place among every key set's records: by time, then sequence, then shard.
    let order: (Int64, Int64, Int)

    init(entry: String, shard: Int?, raw: [UInt8]) {
        self.entry = entry
        self.shard = shard
        self.raw = raw
        order = StreamRecord.order(entry: entry, shard: shard)
    }

    var id: String { StreamRecord.id(entry: entry, shard: shard) }

    func contains(_ needle: [UInt8]) -> Bool {
        guard let first = needle.first else { return true }
        var from = raw.startIndex
        while raw.endIndex - from >= needle.count, let at = raw[from...].firstIndex(of: first) {
            if raw.endIndex - at >= needle.count, raw[at..<at + needle.count].elementsEqual(needle) { return true }
            from = at + 1
        }
        return false
    }

    var parsed: StreamRecord? { StreamRecord(entry: entry, shard: shard, raw: raw) }
}

extension String {
    /// `"name":"self"` as a record's JSON holds it, or nil when escaping would change it.
    public func recordField(_ name: String) -> String? {
        contains(where: { $0 == "\"" || $0 == "\\" || $0.asciiValue.map { $0 < 0x20 } == true }) ? nil : "\"\(name)\":\"\(self)\""
    }
}
