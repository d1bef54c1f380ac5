import APNSCore
import APNSTransport
import Buffers
import Configuration
import Delivery
import FoundationEssentials
import IOLoop
import PointerTricks
import QueueContract
import RedisClient
import Synchronization
import Telemetry

/// A chunk's records, as the transaction's XADDs or as the complete script's arguments.
extension Completer {
    /// The records as XADDs, written straight into the transaction.
    func appendRecords(_ batch: ArraySlice<FinishedJob>, _ d: Decided, to t: inout RedisTransaction) -> CompletionTransaction.Added {
        var added = CompletionTransaction.Added()
        // Decisions through a pointer: each is borrowed in place, where an array element read in a
        // closure was copied.
        d.decisions.withUnsafeBufferPointer { decisions in
            forEachInPlace(batch) { i, f in
                if recordsResult(decisions[i]) {
                    t.append(prefix: transaction.result) { OutcomeRecords.writeFirst(decisions[i], of: f, shared: d.shared[i], into: &$0) }
                }
                switch decisions[i].kind {
                case .deadLetter:
                    t.append(prefix: transaction.deadLetter) { OutcomeRecords.writeSecond(decisions[i], of: f, shared: d.shared[i], into: &$0) }
                    added.deadLetters = true
                case .invalidToken:
                    t.append(prefix: transaction.invalidToken) {
                        OutcomeRecords.writeSecond(decisions[i], of: f, shared: d.shared[i], into: &$0)
                    }
                    added.invalidTokens = true
                case .invalidChannel:
                    t.append(prefix: transaction.invalidChannel) {
                        OutcomeRecords.writeSecond(decisions[i], of: f, shared: d.shared[i], into: &$0)
                    }
                    added.invalidChannels = true
                case .result, .schedule: break
                }
            }
        }
        return added
    }

    /// Whether the `results` setting wants this outcome's result record (a schedule has none).
    func recordsResult(_ d: OutcomeRecords.Decision) -> Bool {
        switch d.kind {
        case .result: configuration.results.records(delivered: true)
        case .deadLetter, .invalidToken, .invalidChannel: configuration.results.records(delivered: false)
        case .schedule: true
        }
    }

    /// The complete script's arguments for the batch (QueueScripts.complete).
    func scriptArguments(_ batch: ArraySlice<FinishedJob>, groups: AckGroups, marked: Marks, _ d: Decided) -> RedisArgs {
        var scriptKeys = [
            keys.results, keys.deadLetters, keys.invalidTokens, keys.stats, keys.scheduled, keys.batches(worker: workerID), keys.invalidChannels,
        ]
        for g in groups.all {
            scriptKeys.append(keys.batch(worker: workerID, id: g.batch.id))
            scriptKeys.append(keys.batchDone(worker: workerID, id: g.batch.id))
        }
        var args = RedisArgs(script: QueueScripts.complete, keys: scriptKeys, capacity: 512 + batch.count * 400)
        args.append(configuration.resultsMax)
        args.append(configuration.deadLettersMax)
        args.append(configuration.invalidTokensMax)
        args.append(batch.count)
        for g in groups.all {
            args.append(g.batch.id)
            args.append(g.finishes ? "1" : "0")
        }
        var record = ByteBuffer(capacity: 1024)
        for (i, f) in batch.enumerated() {
            args.append(marked.groups[i] + 1)
            if let piece = marked.pieces[i] { args.append(piece) } else { args.append(f.index) }
            args.append(d.pairs[i])
            OutcomeRecords.append(
                d.decisions[i], of: f.lent, shared: d.shared[i], withResult: recordsResult(d.decisions[i]), to: &args, using: &record)
        }
        d.counters.append(to: &args)
        return args
    }
}
