import Configuration
import FoundationEssentials
import QueueContract

/// `apnsctl queues`: each queue a worker configuration serves, with its share and its figures
/// (one row per queue, summed over its shards, as `stats` reads one queue).
public enum QueueList {
    public struct Row {
        public let queue: ServedQueue
        public let stats: QueueCommands.Stats

        public var share: String { queue.isStrict ? "strict" : "weight \(queue.weight)" }

        public var json: [String: Any] {
            [
                "queue": queue.name, "strict": queue.isStrict, "weight": queue.weight, "shards": queue.shards,
                "waiting": stats.depth, "in_flight": stats.inFlight, "scheduled": stats.scheduled,
                "dead_letters": stats.deadLetters, "results_per_second": stats.resultsPerSecond,
            ]
        }
    }

    /// Reads each of `queues` through the context `open` makes for it.
    public static func read(_ queues: [ServedQueue], open: (ServedQueue) throws -> AdminContext) throws -> [Row] {
        try queues.map { q in Row(queue: q, stats: try QueueCommands.stats(try open(q))) }
    }

    public static func print(_ rows: [Row], json: Bool, say: @escaping (String) -> Void) {
        let columns = ["queue", "share", "shards", "waiting", "in_flight", "scheduled", "dead_letters", "results_per_s"]
        let table = rows.map { r in
            [
                r.queue.name, r.share, String(r.queue.shards), String(r.stats.depth), String(r.stats.inFlight), String(r.stats.scheduled),
                String(r.stats.deadLetters), oneDecimal(r.stats.resultsPerSecond),
            ]
        }
        let objects: [Any] = rows.map(\.json)
        AdminContext.table(columns, table, jsonRows: objects, json: json, say: say)
    }
}
