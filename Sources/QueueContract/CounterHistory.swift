import RedisClient

/// The stats counters every 10 s, kept a day in `apns:{Q}:history`, so that every dashboard
/// draws the same charts. Any worker's housekeeper may add a slot's snapshot: the script takes
/// Redis's clock and adds nothing to a slot that has one.
public enum CounterHistory {
    public static let slotMs: Int64 = 10_000
    public static let keptMs: Int64 = 86_400_000 + 120_000

    /// KEYS: history, stats. Returns 1 when it added the slot's snapshot, 0 when one was there.
    /// It calls only commands the workers' documented ACL user already has.
    public static let snapshot = RedisScript(
        """
        local now = redis.call('TIME')
        local slot = math.floor(tonumber(now[1]) / 10) * 10000
        if #redis.call('ZRANGEBYSCORE', KEYS[1], slot, slot, 'LIMIT', 0, 1) > 0 then return 0 end
        local function n(name) return tonumber(redis.call('HGET', KEYS[2], name)) or 0 end
        local member = slot .. ':' .. n('delivered') .. ':' .. (n('invalid_token') + n('invalid_channel')) .. ':' .. n('dead_lettered') .. ':' .. n('retried')
        redis.call('ZADD', KEYS[1], slot, member)
        local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (slot - \(keptMs)), 'LIMIT', 0, 100)
        if #old > 0 then redis.call('ZREM', KEYS[1], unpack(old)) end
        return 1
        """)

    /// One snapshot: the counters' totals at `slotMs`. Failed counts the jobs that ended with
    /// an invalid token or channel; dead-lettered ones are apart.
    public struct Snapshot: Equatable, Sendable {
        public var slotMs: Int64
        public var delivered: Int64
        public var failed: Int64
        public var deadLettered: Int64
        public var retried: Int64

        public init(slotMs: Int64, delivered: Int64, failed: Int64, deadLettered: Int64, retried: Int64) {
            (self.slotMs, self.delivered, self.failed, self.deadLettered, self.retried) = (slotMs, delivered, failed, deadLettered, retried)
        }

        /// `slot:delivered:failed:dead_lettered:retried`, or nil for anything else.
        public init?(member: String) {
            let n = member.split(separator: ":").map { Int64($0) }
            guard n.count == 5, let slot = n[0], let d = n[1], let f = n[2], let x = n[3], let r = n[4] else { return nil }
            self.init(slotMs: slot, delivered: d, failed: f, deadLettered: x, retried: r)
        }

        static func + (a: Snapshot, b: Snapshot) -> Snapshot {
            Snapshot(
                slotMs: a.slotMs, delivered: a.delivered + b.delivered, failed: a.failed + b.failed,
                deadLettered: a.deadLettered + b.deadLettered, retried: a.retried + b.retried)
        }
    }

    /// Jobs finished in one minute.
    public struct Minute: Equatable, Sendable {
        public var startMs: Int64
        public var delivered: Int64 = 0
        public var failed: Int64 = 0
        public var deadLettered: Int64 = 0
    }

    /// Key sets' snapshots summed by slot (each key set snapshots its own counters).
    public static func merge(_ sets: [[Snapshot]]) -> [Snapshot] {
        var bySlot: [Int64: Snapshot] = [:]
        for set in sets {
            for s in set { bySlot[s.slotMs] = bySlot[s.slotMs].map { $0 + s } ?? s }
        }
        return bySlot.values.sorted { $0.slotMs < $1.slotMs }
    }

    /// The `count` minutes up to the one holding `nowMs`, each with what finished in it: the
    /// minute's last snapshot less the one before the minute (its own first when none is older).
    /// A counter that went down (the stats hash was deleted) counts from zero.
    public static func minutes(_ snapshots: [Snapshot], count: Int, nowMs: Int64) -> [Minute] {
        let lastStart = nowMs / 60_000 * 60_000
        let firstStart = lastStart - Int64(count - 1) * 60_000
        var out = (0..<count).map { Minute(startMs: firstStart + Int64($0) * 60_000) }
        var before: Snapshot?
        for s in snapshots {
            defer { before = s }
            let index = Int((s.slotMs - firstStart).floorDivided(by: 60_000))
            guard index >= 0, index < count, let base = before else { continue }
            out[index].delivered += rise(base.delivered, s.delivered)
            out[index].failed += rise(base.failed, s.failed)
            out[index].deadLettered += rise(base.deadLettered, s.deadLettered)
        }
        return out
    }

    private static func rise(_ from: Int64, _ to: Int64) -> Int64 { to >= from ? to - from : to }
}

extension Int64 {
    fileprivate func floorDivided(by d: Int64) -> Int64 { self >= 0 ? self / d : (self - d + 1) / d }
}
