import APNSCore
import RedisClient

/// Records a batch whose jobs are all still in flight with plain commands in one MULTI … EXEC,
/// instead of the complete script: a Lua call copies every record into Lua and back, which
/// cost Redis more than the XADDs themselves. Redis still decides ownership: the batch's lowest
/// handle must be in the in-flight hash (recovery empties the whole hash, and handles only
/// grow), and the take-back key is WATCHed, so a recovery in between aborts the transaction.
/// Retries need Redis's clock, so a batch with a schedule outcome goes to the script.
struct CompletionTransaction {
    /// One outcome: its kind, and where its two records sit in the script's arguments.
    struct Entry {
        let kind: OutcomeRecords.Kind
        let record: Int
        var extra: Int { record + 1 }
    }

    let keys: QueueKeys
    let workerID: String
    let configuration: WorkerConfiguration
    private(set) var entries: [Entry] = []
    private(set) var eligible = true

    init(keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, capacity: Int) {
        self.keys = keys
        self.workerID = workerID
        self.configuration = configuration
        entries.reserveCapacity(capacity)
    }

    mutating func add(_ kind: OutcomeRecords.Kind, recordAt record: Int) {
        if kind == .schedule { eligible = false }
        entries.append(Entry(kind: kind, record: record))
    }

    enum Result { case recorded, aborted, notAllInFlight }

    /// `records`: the complete script's arguments; `acked`: handles whose last outcome this is.
    /// `buffer`: kept by the caller across batches, so that its capacity is reused.
    func run(_ r: RedisConnection, lowest: Int64, acked: [Int64], records: RedisArgs, counters: CounterPairs,
             buffer t: inout RedisTransaction) throws(RedisError) -> Result {
        let inflight = keys.inflight(worker: workerID)
        let check = try r.pipeline([[Array("WATCH".utf8), Array(keys.takeback(worker: workerID).utf8)],
                                    [Array("HEXISTS".utf8), Array(inflight.utf8), Array(String(lowest).utf8)]])
        guard check.count == 2, check[1].integer == 1 else {
            _ = try r.command(["UNWATCH"])
            return .notAllInFlight
        }
        // Records first, acks last: Redis does not roll back, so a command failing halfway
        // (out of memory, say) leaves jobs in flight to be recorded again, never acked unrecorded.
        t.removeAll()
        var command = RedisArgs(capacity: 1024)
        let result = Self.xadd(keys.results), dead = Self.xadd(keys.deadLetters), invalid = Self.xadd(keys.invalidTokens)
        var anyDead = false, anyInvalid = false
        for e in entries {
            t.append(prefix: result, last: records.argument(e.record))
            switch e.kind {
            case .deadLetter: t.append(prefix: dead, last: records.argument(e.extra)); anyDead = true
            case .invalidToken: t.append(prefix: invalid, last: records.argument(e.extra)); anyInvalid = true
            case .result, .schedule: break
            }
        }
        trim(&t, &command, keys.results, configuration.resultsMax)
        if anyDead { trim(&t, &command, keys.deadLetters, configuration.deadLettersMax) }
        if anyInvalid { trim(&t, &command, keys.invalidTokens, configuration.invalidTokensMax) }
        counters.forEach { name, count in
            command.removeAll()
            command.append("HINCRBY")
            command.append(keys.stats)
            command.append(name)
            command.append(count)
            t.append(command)
        }
        if !acked.isEmpty {
            command.removeAll()
            command.append("HDEL")
            command.append(inflight)
            for h in acked { command.append(Int(h)) }
            t.append(command)
        }
        return try r.exec(&t) ? .recorded : .aborted
    }

    /// `XADD <stream> * record`, waiting for the record.
    private static func xadd(_ stream: String) -> RedisArgs.Prefix {
        var command = RedisArgs(capacity: 64)
        for word in ["XADD", stream, "*", "record"] { command.append(word) }
        return command.prefix
    }

    /// Streams are trimmed once per batch (approximately, as `MAXLEN ~` does), not per entry.
    private func trim(_ t: inout RedisTransaction, _ command: inout RedisArgs, _ stream: String, _ max: Int) {
        command.removeAll()
        command.append("XTRIM")
        command.append(stream)
        command.append("MAXLEN")
        command.append("~")
        command.append(max)
        t.append(command)
    }
}
