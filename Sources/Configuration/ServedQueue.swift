import APNSCore
import QueueContract

/// One queue a worker serves (`queues`, or the one-queue form `queue` and `shards`), and its
/// share of the worker when several queues have jobs waiting.
public struct ServedQueue: Sendable, Equatable {
    public enum Share: Sendable, Equatable {
        /// Served first while it has jobs: the weighted queues wait.
        case strict
        /// Served in proportion to the weights of the queues that have jobs.
        case weight(Int)
    }

    public var name: String
    public var shards = 1
    public var share = Share.weight(1)
    /// Shards served beyond `shards` while they still hold jobs (a rollback to fewer shards):
    /// the count to serve in all, read at start (`ShardRecord`); 0 for none.
    public var drainingShards = 0

    public init(name: String, shards: Int = 1, share: Share = .weight(1)) {
        self.name = name
        self.shards = shards
        self.share = share
    }

    /// Its key sets: the queue's own, and its shards' if it has any (`QueueKeys.served`).
    public var servedKeys: [QueueKeys] { QueueKeys.served(queue: name, shards: max(shards, drainingShards)) }

    /// "bulk (weight 3, 4 shards)", for logs.
    public var summary: String {
        let share = isStrict ? "strict" : "weight \(weight)"
        return "\(name) (\(share)\(shards > 1 ? ", \(shards) shards" : ""))"
    }

    public var isStrict: Bool { share == .strict }
    public var weight: Int {
        if case .weight(let w) = share { return w }
        return 0
    }

    /// `{"name": "otp", "strict": true}` or `{"name": "bulk", "weight": 3, "shards": 4}`.
    init(fields f: Fields) throws {
        try f.rejectUnknown(["name", "strict", "weight", "shards"])
        guard let name = try f.string("name") else { throw ConfigurationError("\(f.path): a queue needs a \"name\"") }
        self.init(name: name, shards: try f.int("shards") ?? 1)
        switch (try f.bool("strict") ?? false, try f.int("weight")) {
        case (true, nil): share = .strict
        case (true, _?):
            throw ConfigurationError("\(f.path): queue \(name) is strict or has a weight, not both (strict is served first, whatever the weights)")
        case (false, let weight): share = .weight(weight ?? 1)
        }
    }

    func validate() throws {
        guard !name.isEmpty, !name.contains("{"), !name.contains("}") else {
            throw ConfigurationError("queue name must be non-empty and must not contain braces, got \"\(name)\"")
        }
        guard (1...256).contains(shards) else { throw ConfigurationError("queue \(name): shards must be in 1...256, got \(shards)") }
        if case .weight(let w) = share, !(1...1000).contains(w) {
            throw ConfigurationError("queue \(name): weight must be in 1...1000, got \(w)")
        }
    }
}

extension WorkerConfiguration {
    /// The queues served: `queues` as given, or the one queue of `queue` and `shards`.
    public var servedQueues: [ServedQueue] {
        guard queues.isEmpty else { return queues }
        var one = ServedQueue(name: queue, shards: shards)
        one.drainingShards = drainingShards
        return [one]
    }

    /// The shards each of `servedQueues` serves in all, read at start (`Worker.shardsToDrain`).
    public mutating func setDrainingShards(_ counts: [Int]) {
        guard !queues.isEmpty else { return drainingShards = counts.first ?? 0 }
        for (i, n) in counts.enumerated() where queues.indices.contains(i) { queues[i].drainingShards = n }
    }

    /// Reads `queues`; with it, `queue` and `shards` name its first queue (for what takes one).
    mutating func applyQueues(file f: Fields) throws {
        guard let given = f.values["queues"], given != .null else { return }
        let list = try f.objects("queues")
        guard try f.string("queue") == nil, try f.int("shards") == nil else {
            throw ConfigurationError("\(f.path): give \"queues\" or \"queue\" (with \"shards\"), not both: queues lists each queue with its shards")
        }
        guard !list.isEmpty else { throw ConfigurationError("\(f.path).queues is empty: list one queue at least, or use \"queue\"") }
        queues = try list.map(ServedQueue.init(fields:))
        queue = queues[0].name
        shards = queues[0].shards
    }

    func validateQueues() throws {
        for q in servedQueues { try q.validate() }
        let names = servedQueues.map(\.name)
        guard Set(names).count == names.count else {
            throw ConfigurationError("queues: each queue is named once, got \(names.joined(separator: ", "))")
        }
    }
}
