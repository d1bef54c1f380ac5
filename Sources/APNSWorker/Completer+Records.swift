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
        case .result: configuration.results.records(delivered: d.stat == .delivered)
        case .deadLetter, .invalidToken, .invalidChannel: configuration.results.records(delivered: false)
        case .schedule: true
        }
    }

    /// The complete script's arguments for the batch (`QueueScripts.CompleteCall`).
    func scriptArguments(_ batch: ArraySlice<FinishedJob>, groups: AckGroups, marked: Marks, _ d: Decided) -> RedisArgs {
        var call = QueueScripts.CompleteCall(keys, worker: workerID, caps: configuration.recordCaps, jobs: batch.count, groups: groups)
        var record = ByteBuffer(capacity: 1024)
        for (i, f) in batch.enumerated() {
            call.appendJob(group: marked.groups[i], piece: marked.pieces[i], index: f.index, counterPair: d.pairs[i]) { args in
                OutcomeRecords.append(
                    d.decisions[i], of: f.lent, shared: d.shared[i], withResult: recordsResult(d.decisions[i]), to: &args, using: &record)
            }
        }
        return call.finish(counters: d.counters)
    }
}
