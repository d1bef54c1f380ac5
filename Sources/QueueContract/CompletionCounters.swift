import APNSCore
import RedisClient

/// What the complete script does with one outcome (QueueScripts.complete): r (result), d (result,
/// dead letter), i (result, invalid token), c (result, invalid channel), s (schedule).
public enum CompletionKind: String, Sendable {
    case result = "r", deadLetter = "d", invalidToken = "i", invalidChannel = "c", schedule = "s"
}

/// The counter an outcome goes to (README "Stats"): its raw value is the counter's name.
public enum QueueStat: String, Sendable {
    case delivered, scheduled, retried, deferred, invalidToken = "invalid_token", invalidChannel = "invalid_channel"
    case deadLettered = "dead_lettered"
    /// Not sent: its `idempotency_key` was taken within the window.
    case duplicate
}

/// The batch's counters for the complete script, as pairs (stat, stat:app) numbered from 1,
/// a dead letter's with its reason's tally (`dead_lettered/<reason>`) besides.
/// Neighbouring outcomes mostly share a pair, so the last one is checked first.
public struct CounterPairs {
    @usableFromInline var pairs: [(stat: QueueStat, app: String, reason: String?, count: Int)] = []
    @usableFromInline var last = -1

    public init() {}

    /// The stats field that tallies the dead letters of `reason` (README "Stats").
    public static func deadLetterTally(_ reason: String) -> String { QueueStat.deadLettered.rawValue + "/" + reason }

    /// Counts one outcome; returns its pair's number.
    @inlinable
    public mutating func count(stat: QueueStat, app: String, reason: String? = nil) -> Int {
        if last < 0 || pairs[last].stat != stat || pairs[last].app != app || pairs[last].reason != reason {
            last =
                pairs.firstIndex { $0.stat == stat && $0.app == app && $0.reason == reason }
                ?? {
                    pairs.append((stat, app, reason, 0)); return pairs.count - 1
                }()
        }
        pairs[last].count += 1
        return last + 1
    }

    /// Each counter's name and count: stat, then stat:app, then a dead letter's reason tally.
    public func forEach(_ body: (String, Int) -> Void) {
        for p in pairs { for name in Self.names(p) where !name.isEmpty { body(name, p.count) } }
    }

    /// Appends the (counter name, count) entries, three per pair (the complete script counts
    /// a job under those of its pair), "" for a pair with no reason.
    public func append(to args: inout RedisArgs) {
        for p in pairs {
            for name in Self.names(p) {
                args.append(name)
                args.append(p.count)
            }
        }
    }

    /// A pair's three counter names: stat, stat:app, and its reason's tally or "".
    private static func names(_ p: (stat: QueueStat, app: String, reason: String?, count: Int)) -> [String] {
        [p.stat.rawValue, p.stat.rawValue + ":" + p.app, p.reason.map(deadLetterTally) ?? ""]
    }
}

/// A batch's shared record fields (`OutcomeRecord.SharedFields`), one per app and topic, kept
/// for the batch's records to borrow. Neighbouring outcomes mostly share them, so the last one
/// is checked first.
public struct SharedFieldsCache {
    @usableFromInline let worker: String
    @usableFromInline let timeMs: Int64
    @usableFromInline var all: [OutcomeRecord.SharedFields] = []
    @usableFromInline var last = -1

    public init(worker: String, timeMs: Int64) {
        self.worker = worker
        self.timeMs = timeMs
    }

    /// The JSON of the fields for `app` and `topic`, valid while this cache lives.
    @inlinable
    public mutating func fields(app: String?, topic: String?) -> UnsafeBufferPointer<UInt8> {
        if last < 0 || all[last].app != app || all[last].topic != topic {
            last =
                all.firstIndex { $0.app == app && $0.topic == topic }
                ?? {
                    all.append(OutcomeRecord.SharedFields(app: app, topic: topic, worker: worker, timeMs: timeMs)); return all.count - 1
                }()
        }
        return all[last].jsonBytes
    }
}
