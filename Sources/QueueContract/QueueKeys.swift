/// Every Redis key of one queue. Nothing else in the code writes key strings.
///
/// All keys of one shard share its hash tag (`{queue}`, or `{queue.i}` for shard i), so each
/// multi-key script is legal on Redis Cluster. The templates and the paused apps are the queue's,
/// under `{queue}` whatever its shards. The README's "Redis keys" table documents each one. The
/// keys are built once, as hot paths read them for every batch.
public struct QueueKeys: Sendable, Equatable {
    public let queue: String
    /// The shard these keys belong to; nil for the queue's own keys (`{queue}`).
    public let shard: Int?
    public let prefix: String

    public init(queue: String, shard: Int? = nil, namespace: String = "apns") {
        self.queue = queue
        self.shard = shard
        let prefix = shard.map { "\(namespace):{\(queue).\($0)}" } ?? "\(namespace):{\(queue)}"
        self.prefix = prefix
        let queuePrefix = "\(namespace):{\(queue)}"
        jobs = prefix + ":jobs"
        suspects = prefix + ":suspects"
        handleCounter = prefix + ":seq"
        workers = prefix + ":workers"
        results = prefix + ":results"
        invalidTokens = prefix + ":invalid-tokens"
        invalidChannels = prefix + ":invalid-channels"
        deadLetters = prefix + ":dead"
        scheduled = prefix + ":scheduled"
        templates = queuePrefix + ":templates"
        stats = prefix + ":stats"
        paused = queuePrefix + ":paused"
        history = prefix + ":history"
        workerInfo = queuePrefix + ":worker-info"
        shardsRecord = queuePrefix + ":shards"
    }

    /// The key sets a worker serves for a queue of `shards` shards: the queue's own, and with two
    /// or more shards each shard's too. The queue's own stay served, so that moving a queue from
    /// one shard to N strands nothing.
    public static func served(queue: String, shards: Int, namespace: String = "apns") -> [QueueKeys] {
        let own = QueueKeys(queue: queue, namespace: namespace)
        guard shards > 1 else { return [own] }
        return [own] + (0..<shards).map { QueueKeys(queue: queue, shard: $0, namespace: namespace) }
    }

    /// How these keys are named in logs and tables: the queue, and its shard if any.
    public var label: String { shard.map { "\(queue).\($0)" } ?? queue }

    /// LIST. Producers LPUSH job JSON; workers take from the right end (FIFO).
    public let jobs: String
    /// HASH `max` → the most shards a worker has served the queue with (under `{queue}`): a
    /// worker set to fewer still serves the others while they hold jobs (`ShardRecord`).
    public let shardsRecord: String
    /// LIST. Jobs taken back from dead workers twice or more (suspects of killing them): the
    /// take-back scripts LPUSH them, and each worker takes one at a time, alone in its batch.
    public let suspects: String
    /// HASH batch id → first handle. The worker's fetched batches with jobs not yet finished;
    /// also one fence per fetcher, field → its connection's epoch (`InFlightJobs.Field`).
    public func batches(worker: String) -> String { "\(prefix):batches:\(worker)" }
    /// LIST. One fetch's jobs, in the order taken (job i has handle first + i).
    public func batch(worker: String, id: String) -> String { "\(prefix):batch:\(worker):\(id)" }
    /// SET of indexes (from 0) of a batch's jobs already finished while others of it are not.
    public func batchDone(worker: String, id: String) -> String { "\(prefix):done:\(worker):\(id)" }
    /// STRING, short-lived. Changed whenever a worker's in-flight jobs are taken back (recovery,
    /// hand-back); that worker's completion transaction WATCHes it.
    public func takeback(worker: String) -> String { "\(prefix):takeback:\(worker)" }
    /// STRING, expiring after the idempotency window: the claim of the first job that had this
    /// `idempotency_key` (the handle it was taken under). Keys are per shard.
    public func idempotency(key: String) -> String { "\(prefix):idem:\(key)" }
    /// LIST. A worker's blocking wait moves one job here (BLMOVE); its next fetch takes it.
    public func staging(worker: String) -> String { "\(prefix):staging:\(worker)" }
    /// STRING counter that hands out unique in-flight handles.
    public let handleCounter: String
    /// ZSET worker id → lease expiry (ms). A worker renews its lease while it lives.
    public let workers: String
    /// STREAM of result records (ok or failed), oldest first, capped.
    public let results: String
    /// STREAM of device tokens APNs called invalid, for the app's backend.
    public let invalidTokens: String
    /// STREAM of broadcast channels APNs no longer knows (ChannelNotRegistered), for the backend.
    public let invalidChannels: String
    /// STREAM of dead letters: the original job, its attempts and the final reason.
    public let deadLetters: String
    /// ZSET envelope → due time (UNIX ms): retries and scheduled sends. Any worker promotes due ones.
    public let scheduled: String
    /// HASH template key (`name` or `name.locale`) → template JSON. Workers reload it every second.
    public let templates: String
    /// HASH of counters (taken, delivered, failed, dead, …).
    public let stats: String
    /// HASH `app/worker` → JSON (app, worker, reason, time_ms): apps a worker has paused because
    /// APNs refused their credentials. Written by that worker's housekeeper, removed when it stops.
    public let paused: String
    /// ZSET 10-second slot (UNIX ms) → `slot:delivered:failed:dead_lettered:retried`, the stats
    /// counters then; the housekeepers add one per slot and keep a day (the dashboard's charts).
    public let history: String
    /// HASH worker id → JSON (host, pid, version, apps and their connections, stream limits,
    /// pauses, last success, JWT age), rewritten by each live worker every 5 s.
    public let workerInfo: String
}
