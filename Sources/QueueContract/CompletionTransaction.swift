import APNSCore
import Delivery
import RedisClient

/// Records a batch whose jobs are all still in flight with plain commands in one MULTI … EXEC,
/// instead of the complete script: a Lua call copies every record into Lua and back, which
/// cost Redis more than the XADDs themselves. Redis still decides ownership: the oldest batch
/// touched must still have its list (recovery takes every batch listed, and a later fetch has a
/// higher number), and the take-back key is WATCHed, so a recovery in between aborts the
/// transaction. That check rides on the previous transaction's write when it can (`next`).
/// Retries need Redis's clock, so a batch with a schedule outcome goes to the script.
public struct CompletionTransaction {
    public let keys: QueueKeys
    public let workerID: String
    public let caps: RecordCaps
    /// `XADD <stream> * record`, waiting for the record.
    public let result: RedisArgs.Prefix, deadLetter: RedisArgs.Prefix, invalidToken: RedisArgs.Prefix, invalidChannel: RedisArgs.Prefix

    public init(keys: QueueKeys, workerID: String, caps: RecordCaps) {
        self.keys = keys
        self.workerID = workerID
        self.caps = caps
        result = Self.xadd(keys.results)
        deadLetter = Self.xadd(keys.deadLetters)
        invalidToken = Self.xadd(keys.invalidTokens)
        invalidChannel = Self.xadd(keys.invalidChannels)
    }

    /// Whether a batch of outcomes of these kinds can be recorded this way.
    public static func canRecord(_ kinds: some Sequence<CompletionKind>) -> Bool { !kinds.contains(.schedule) }

    /// What `records` added besides results, for the trims.
    public struct Added {
        public var deadLetters = false, invalidTokens = false, invalidChannels = false
        public init() {}
    }

    /// Fills `t` (emptied first) with the batch's records, by `records` (which appends the
    /// XADDs with this type's prefixes, written straight into the transaction), the trims, the
    /// counters and the acks of `groups`. The oldest batch touched must have been checked
    /// (`check`) since the take-back key was WATCHed, and `t` is sent with the check of the
    /// next oldest after it (`NonBlockingRedisConnection.send(_:then:)`).
    public func fill(_ t: inout RedisTransaction, groups: AckGroups, counters: CounterPairs, records: (inout RedisTransaction) -> Added) {
        // Records first, acks last: Redis does not roll back, so a command failing halfway
        // (out of memory, say) leaves jobs in flight to be recorded again, never acked unrecorded.
        t.removeAll()
        let added = records(&t)
        var command = RedisArgs(capacity: 1024)
        trim(&t, &command, keys.results, caps.results)
        if added.deadLetters { trim(&t, &command, keys.deadLetters, caps.deadLetters) }
        if added.invalidTokens { trim(&t, &command, keys.invalidTokens, caps.invalidTokens) }
        if added.invalidChannels { trim(&t, &command, keys.invalidChannels, caps.invalidTokens) }
        counters.forEach { name, count in words(&t, &command, ["HINCRBY", keys.stats, name, String(count)]) }
        var finished: [String] = []
        for g in groups.all {
            if g.finishes {
                finished.append(g.batch.id)
                words(&t, &command, ["DEL", keys.batch(worker: workerID, id: g.batch.id), keys.batchDone(worker: workerID, id: g.batch.id)])
            } else if !g.acks.isEmpty || !g.pieces.isEmpty {
                command.removeAll()
                command.append("SADD")
                command.append(keys.batchDone(worker: workerID, id: g.batch.id))
                for i in g.acks { command.append(i) }
                for piece in g.pieces { command.append(piece) }
                t.append(command)
            }
        }
        if !finished.isEmpty { words(&t, &command, ["HDEL", keys.batches(worker: workerID)] + finished) }
    }

    /// WATCH the take-back key, then whether `batch`'s list is still there (its answer, an
    /// integer, is the second).
    public func check(_ batch: TakenBatch) -> [RedisArgs] {
        [RedisArgs(["WATCH", keys.takeback(worker: workerID)]), RedisArgs(["EXISTS", keys.batch(worker: workerID, id: batch.id)])]
    }

    /// The fence a new connection raises first: a transaction an old connection still carries
    /// WATCHed the take-back key before that connection was given up on, so touching the key
    /// now makes its EXEC a no-op. Two replies.
    public func fence() -> [RedisArgs] {
        let key = keys.takeback(worker: workerID)
        return [RedisArgs(["INCR", key]), RedisArgs(["PEXPIRE", key, "60000"])]
    }

    /// The check's answer: whether the batch's list is still there.
    public static func readCheck(_ reply: RedisFlatReply) -> CompletionSteps.Reply { .checked(found: reply.integer(1) == 1) }

    /// EXEC's answer, and that of the check riding on it (`withCheck`): an error in EXEC's
    /// answer is thrown (with a check behind it, by the pipe, which only scanned it).
    public static func readExec(_ reply: RedisFlatReply, withCheck: Bool) throws(RedisError) -> CompletionSteps.Reply {
        guard !withCheck else { return .executed(ran: reply.skippedArray, nextFound: reply.integer(reply.count - 1) == 1) }
        if let message = reply.firstError { throw .server(message) }
        return .executed(ran: reply.isArray(0), nextFound: false)
    }

    /// Ends the WATCH when the script goes instead of the transaction.
    public static var unwatch: RedisArgs { RedisArgs(["UNWATCH"]) }

    /// WAIT until `replicas` have the writes, `timeoutMs` at most (`redis.wait_replicas`).
    public static func waitReplicas(_ replicas: Int, timeoutMs: Int) -> RedisArgs {
        RedisArgs(["WAIT", String(replicas), String(timeoutMs)])
    }

    private static func xadd(_ stream: String) -> RedisArgs.Prefix {
        RedisArgs(["XADD", stream, "*", "record"]).prefix
    }

    /// Streams are trimmed once per batch (approximately, as `MAXLEN ~` does), not per entry.
    private func trim(_ t: inout RedisTransaction, _ command: inout RedisArgs, _ stream: String, _ max: Int) {
        words(&t, &command, ["XTRIM", stream, "MAXLEN", "~", String(max)])
    }

    private func words(_ t: inout RedisTransaction, _ command: inout RedisArgs, _ words: [String]) {
        command.removeAll()
        for w in words { command.append(w) }
        t.append(command)
    }
}

/// The batches one completion touches, in the order first met, with what it marks done in each:
/// the index of each job it acks, and `index:token` for a fan-out piece that is not the job's
/// last. Marks let a completion written again after a lost reply skip what is recorded already.
public struct AckGroups {
    public struct Group {
        public let batch: TakenBatch
        /// The batch's identity, to compare with: reading the batch out of the group counted a
        /// reference on it per job.
        public let id: ObjectIdentifier
        public var acks: [Int] = []
        public var pieces: [String] = []
        /// This completion acks every job of the batch still unfinished: the batch's keys go.
        public var finishes: Bool { acks.count == batch.unfinished }

        public init(batch: TakenBatch) {
            self.batch = batch
            id = ObjectIdentifier(batch)
        }
    }

    @usableFromInline var groups: [Group] = []
    public var all: [Group] { groups }
    @usableFromInline var last = -1

    public init() {}

    /// Notes the outcome of job `index` of `batch`; `piece`: the token of a fan-out piece that is
    /// not the job's last (nil: the job is acked). Returns the job's group and the mark of a
    /// piece (an acked job's mark is its index, written as a number).
    /// Neighbours mostly share a batch.
    @inlinable
    public mutating func note(_ batch: TakenBatch, index: Int, piece: String?) -> (group: Int, piece: String?) {
        if last < 0 || groups[last].batch !== batch {
            last =
                groups.firstIndex { $0.batch === batch }
                ?? {
                    groups.append(Group(batch: batch)); return groups.count - 1
                }()
        }
        return note(index: index, piece: piece)
    }

    /// `note(_:index:piece:)` for a job that `isInLast` says is of the batch noted last, without
    /// reading its batch (`batch`): reading it counted a reference on it, which the I/O thread
    /// counts too.
    @inlinable
    public mutating func note(
        isInLast: (ObjectIdentifier) -> Bool, batch: () -> TakenBatch, index: Int,
        piece: String?
    ) -> (group: Int, piece: String?) {
        guard last >= 0, isInLast(groups[last].id) else { return note(batch(), index: index, piece: piece) }
        return note(index: index, piece: piece)
    }

    @inlinable
    mutating func note(index: Int, piece: String?) -> (group: Int, piece: String?) {
        guard let piece else {
            groups[last].acks.append(index)
            return (last, nil)
        }
        let mark = "\(index):\(piece)"
        groups[last].pieces.append(mark)
        return (last, mark)
    }

    /// The batch fetched first: if its list is still there, no recovery took any batch touched.
    public var oldest: TakenBatch? { all.min { $0.batch.number < $1.batch.number }?.batch }

    /// The batches this completion finishes.
    public var finishing: [TakenBatch] { all.filter(\.finishes).map(\.batch) }

    /// Once the completion is recorded: its acked jobs are finished.
    public func commit() { for g in groups { g.batch.unfinished -= g.acks.count } }
}
