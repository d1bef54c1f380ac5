import APNSCore
import RedisClient

/// A worker's jobs in flight, as Redis holds them: a list per fetched batch, named in the
/// worker's batches hash, with a done set per batch for its finished jobs. Take-back scripts
/// must name every key they touch (Redis Cluster), so the batches are listed first.
public enum InFlightJobs {
    /// What a field of a worker's batches hash names, by the letter after its process prefix
    /// (`<base36 start time>-`): `<prefix><n>` a batch, `<prefix>s<n>` a suspect's batch (a
    /// suspect is fetched alone, and a take-back blames what it held), `<prefix>f<n>` fetcher n's
    /// fence, whose value is the epoch of its connection (`QueueScripts.lookUpLost`).
    public enum Field: Equatable {
        case batch, suspectBatch, fence

        public init(_ field: String) {
            switch field.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false).last?.first {
            case UInt8(ascii: "s"): self = .suspectBatch
            case UInt8(ascii: "f"): self = .fence
            default: self = .batch
            }
        }
    }

    /// The ids of the worker's batches.
    public static func batchIDs(_ r: BlockingRedisConnection, _ keys: QueueKeys, worker: String) throws(RedisError) -> [String] {
        try r.command(["HKEYS", keys.batches(worker: worker)]).array.compactMap(\.text)
    }

    /// How many of the worker's jobs are unfinished.
    public static func count(_ r: BlockingRedisConnection, _ keys: QueueKeys, worker: String) throws(RedisError) -> Int64 {
        let ids = try batchIDs(r, keys, worker: worker)
        var commands: [[[UInt8]]] = []
        for id in ids {
            commands.append(["LLEN", keys.batch(worker: worker, id: id)].map { Array($0.utf8) })
            commands.append(["SMEMBERS", keys.batchDone(worker: worker, id: id)].map { Array($0.utf8) })
        }
        let replies = try r.pipeline(commands)
        var total: Int64 = 0
        for i in stride(from: 0, to: replies.count - 1, by: 2) {
            // Marks of fan-out pieces (index:token) finish no job.
            total += (replies[i].integer ?? 0) - Int64(replies[i + 1].array.filter { $0.text.flatMap { Int($0) } != nil }.count)
        }
        return total
    }

    /// Hands the worker's unfinished jobs back to the queue (shutdown). Returns how many.
    public static func handBack(_ r: BlockingRedisConnection, _ keys: QueueKeys, worker: String) throws(RedisError) -> Int64 {
        let ids = try batchIDs(r, keys, worker: worker)
        return try r.run(
            QueueScripts.handBack, keys: [keys.jobs, keys.workers, keys.takeback(worker: worker), keys.suspects] + scriptKeys(keys, worker, ids),
            args: ([worker] + ids).map { Array($0.utf8) }
        ).integer ?? 0
    }

    /// Which workers a recovery may take back (the recover script checks it atomically).
    public enum Recovery: String {
        /// A worker whose lease ran out.
        case lease
        /// Any: this worker's own previous run.
        case force
        /// This worker's own batches on a new master after a failover: no job is blamed (its
        /// recovery count stays), as no worker died.
        case failover
    }

    /// Takes back a worker's jobs if `mode` allows, but not the batches whose ids start with
    /// `excludingBatchesOf` (the caller's own, live). Returns (requeued, poison pills).
    public static func recover(
        _ r: BlockingRedisConnection, _ keys: QueueKeys, worker: String, maxRecoveries: Int, caps: RecordCaps,
        mode: Recovery, excludingBatchesOf prefix: String? = nil, only: Set<String>? = nil
    ) throws(RedisError) -> (requeued: Int64, poisoned: Int64) {
        let ids = try batchIDs(r, keys, worker: worker).filter { id in
            (prefix.map { !id.hasPrefix($0) } ?? true) && (only?.contains(id) ?? true)
        }
        let reply = try r.run(
            QueueScripts.recover,
            keys: [keys.jobs, keys.workers, keys.deadLetters, keys.results, keys.stats, keys.takeback(worker: worker), keys.suspects]
                + scriptKeys(keys, worker, ids),
            args: ([
                worker, String(maxRecoveries), String(caps.deadLetters),
                String(caps.results), mode.rawValue,
            ] + ids).map { Array($0.utf8) }
        ).array
        return (reply.first?.integer ?? 0, reply.count > 1 ? reply[1].integer ?? 0 : 0)
    }

    /// The take-back scripts' keys from `take_back`'s first: staging, batches, then each
    /// batch's list and done set.
    private static func scriptKeys(_ keys: QueueKeys, _ worker: String, _ ids: [String]) -> [String] {
        var all = [keys.staging(worker: worker), keys.batches(worker: worker)]
        for id in ids {
            all.append(keys.batch(worker: worker, id: id))
            all.append(keys.batchDone(worker: worker, id: id))
        }
        return all
    }
}
