import Delivery
import QueueContract
import RedisClient
import XCTest

/// The completer's write steps as a value (`CompletionSteps`), driven event by event without
/// Redis: what each reply, failure and reconnect makes it send next.
final class CompletionStepsTests: XCTestCase {
    private let b1 = TakenBatch(id: "b1", number: 1, jobs: 4)
    private let b2 = TakenBatch(id: "b2", number: 2, jobs: 4)

    private func reply(_ s: inout CompletionSteps, _ r: CompletionSteps.Reply, next: TakenBatch? = nil) throws -> CompletionSteps.Action {
        let awaited = s.replyArrived()
        return try s.replied(r, to: awaited, ready: true, next: { next })
    }

    func testAFirstChunkIsCheckedThenWrittenByTransactionWithTheNextCheckRidingOnIt() throws {
        var s = CompletionSteps(waitsForReplicas: false)
        s.begin(oldest: b1, recordable: true)
        XCTAssertEqual(s.send(ready: false, next: { nil }), .none, "nothing while the connection is not ready")
        XCTAssertEqual(s.send(ready: true, next: { nil }), .check(b1))
        XCTAssertEqual(s.send(ready: true, next: { nil }), .none, "one request at a time")
        XCTAssertEqual(try reply(&s, .checked(found: true), next: b2), .transaction(next: b2))
        XCTAssertEqual(s.checked, 1)
        XCTAssertEqual(try reply(&s, .executed(ran: true, nextFound: true)), .recorded(replicas: nil))
        XCTAssertEqual(s.checked, 2, "the riding check covers the next chunk")
        XCTAssertFalse(s.isWriting)
        s.begin(oldest: b2, recordable: true)
        XCTAssertEqual(s.send(ready: true, next: { nil }), .transaction(next: nil), "no check of its own")
        XCTAssertEqual(try reply(&s, .executed(ran: true, nextFound: false)), .recorded(replicas: nil))
        XCTAssertNil(s.checked)
    }

    func testJobsTakenBackSendTheScriptAfterUnwatchAndANoscriptLoadsIt() throws {
        var s = CompletionSteps(waitsForReplicas: false)
        s.begin(oldest: b1, recordable: true)
        XCTAssertEqual(s.send(ready: true, next: { nil }), .check(b1))
        XCTAssertEqual(try reply(&s, .checked(found: false)), .unwatchThenScript)
        XCTAssertEqual(try reply(&s, .scripted(error: "NOSCRIPT No matching script.")), .script(loading: true))
        XCTAssertEqual(try reply(&s, .scripted(error: nil)), .recorded(replicas: nil))
        XCTAssertNil(s.checked)
    }

    func testAnExecThatDidNotRunIsDecidedAgain() throws {
        var s = CompletionSteps(waitsForReplicas: false)
        s.begin(oldest: b1, recordable: true)
        _ = s.send(ready: true, next: { nil })
        XCTAssertEqual(try reply(&s, .checked(found: true)), .transaction(next: nil))
        XCTAssertEqual(try reply(&s, .executed(ran: false, nextFound: false)), .check(b1), "a WATCHed key changed: check again")
    }

    func testAWriteLostWithItsConnectionIsWrittenAgainOnlyByTheScript() throws {
        var s = CompletionSteps(waitsForReplicas: false)
        s.begin(oldest: b1, recordable: true)
        _ = s.send(ready: true, next: { nil })
        _ = try reply(&s, .checked(found: true))
        s.failed(connectionLost: true)  // the transaction was on its way
        XCTAssertNil(s.checked)
        s.connected()
        XCTAssertEqual(s.send(ready: true, next: { nil }), .script(loading: false))
        XCTAssertEqual(try reply(&s, .scripted(error: nil)), .recorded(replicas: nil))
    }

    func testAFailureWithNothingOnItsWayLeavesTheTransactionPath() throws {
        var s = CompletionSteps(waitsForReplicas: false)
        s.begin(oldest: b1, recordable: true)
        s.failed(connectionLost: true)
        XCTAssertEqual(s.send(ready: true, next: { nil }), .check(b1))
        s.failed(connectionLost: false)  // an error answer, not a lost write
        XCTAssertEqual(s.send(ready: true, next: { nil }), .check(b1))
    }

    func testAChunkThatATransactionCannotHoldGoesByScriptAndOtherScriptErrorsAreThrown() {
        var s = CompletionSteps(waitsForReplicas: false)
        s.begin(oldest: b1, recordable: false)
        XCTAssertEqual(s.send(ready: true, next: { nil }), .script(loading: false))
        XCTAssertThrowsError(try reply(&s, .scripted(error: "ERR record caps must be whole numbers from 1")))
    }

    func testReplicasAreAwaitedBeforeTheChunkCounts() throws {
        var s = CompletionSteps(waitsForReplicas: true)
        s.begin(oldest: b1, recordable: true)
        _ = s.send(ready: true, next: { nil })
        _ = try reply(&s, .checked(found: true))
        XCTAssertEqual(try reply(&s, .executed(ran: true, nextFound: false)), .waitReplicas)
        XCTAssertTrue(s.isWriting)
        XCTAssertEqual(try reply(&s, .waited(replicas: 1)), .recorded(replicas: 1))
        XCTAssertFalse(s.isWriting)
    }

    func testAnAbandonedChunkIgnoresLateReplies() throws {
        var s = CompletionSteps(waitsForReplicas: false)
        s.begin(oldest: b1, recordable: true)
        _ = s.send(ready: true, next: { nil })
        s.abandon()
        XCTAssertEqual(try reply(&s, .checked(found: true)), .none)
        XCTAssertEqual(s.send(ready: true, next: { nil }), .none)
    }

    /// The complete script's call, in the order the script reads it.
    func testTheCompleteCallListsKeysCapsBatchesJobsAndCounters() {
        let keys = QueueKeys(queue: "q")
        var groups = AckGroups()
        _ = groups.note(b1, index: 0, piece: nil)
        var call = QueueScripts.CompleteCall(
            keys, worker: "w", caps: RecordCaps(results: 10, deadLetters: 20, invalidTokens: 30), jobs: 1, groups: groups)
        call.appendJob(group: 0, piece: "0:ab", index: 0, counterPair: 1) { args in
            args.append("r")
            args.append("{}")
            args.append("")
        }
        let args = call.finish(counters: CounterPairs())
        let words = (0..<args.count).map { String(decoding: args.argument($0), as: UTF8.self) }
        XCTAssertEqual(words[0], "EVALSHA")
        XCTAssertEqual(words[1], QueueScripts.complete.sha1)
        XCTAssertEqual(words[2], "9", "seven streams and hashes, then the batch's list and done set")
        XCTAssertEqual(words[10], keys.batch(worker: "w", id: "b1"))
        XCTAssertEqual(words[11], keys.batchDone(worker: "w", id: "b1"))
        XCTAssertEqual(Array(words[12...]), ["10", "20", "30", "1", "b1", "0", "1", "0:ab", "1", "r", "{}", ""])
    }

    func testOneNoscriptTestAndOneReloadPath() throws {
        XCTAssertTrue(RedisScript.isMissing("NOSCRIPT No matching script. Please use EVAL."))
        XCTAssertFalse(RedisScript.isMissing("ERR something else"))
        let again = try QueueScripts.complete.reloading(after: "NOSCRIPT No matching script.", [RedisArgs(["PING"])])
        XCTAssertEqual(again.count, 2)
        XCTAssertEqual(String(decoding: again[0].argument(1), as: UTF8.self), "LOAD")
        XCTAssertThrowsError(try QueueScripts.complete.reloading(after: "ERR wrong", []))
    }
}
