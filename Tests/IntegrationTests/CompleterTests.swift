import APNSCore
import Configuration
import Delivery
import Foundation
import IOLoop
import QueueContract
import RedisClient
import Telemetry
import TestSupport
import XCTest

@testable import APNSWorker

/// The completion step against a real Redis: a batch whose jobs are all still in flight is
/// acked in one go; in a batch where some were recovered meanwhile, only the rest is written.
final class CompleterTests: XCTestCase {
    private let worker = "w-completer"
    private let token = String(repeating: "ab", count: 32)

    func testOnlyJobsStillInFlightAreRecordedAndFanOutAcksWithItsLastPiece() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        let (completer, _) = try startCompleter(keys, redis.endpoint)
        defer { completer.stop() }
        let batches = keys.batches(worker: worker)

        // Batch a-1 (handles 1-3) was taken back by a recovery; a-2 (4-6) was fetched after it.
        let a1 = TakenBatch(id: "a-1", number: 1, jobs: 3)
        let a2 = try batch(r, keys, "a-2", number: 2, first: 4, jobs: 3)
        completer.submit([
            unsent(1, a1, 0, .deadLetter(JobRejection("Bad", "bad"))), delivered(2, a1, 1), rejected(3, a1, 2, status: 410, .unregistered),
            unsent(4, a2, 0, .deadLetter(JobRejection("Bad", "bad"))), delivered(5, a2, 1),
            delivered(6, a2, 2, fanout: 2), delivered(6, a2, 2, fanout: 2),
        ])
        try waitFor(r, ["HLEN", batches], equals: 0)
        XCTAssertEqual(try r.command(["EXISTS", keys.batch(worker: worker, id: "a-2"), keys.batchDone(worker: worker, id: "a-2")]).integer, 0)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 4, "results for 4, 5 and both pieces of 6 only")
        XCTAssertEqual(try r.command(["XLEN", keys.deadLetters]).integer, 1)
        XCTAssertEqual(try r.command(["XLEN", keys.invalidTokens]).integer, 0, "3 was recovered: not recorded here")
        XCTAssertEqual(
            try stats(r, keys), ["dead_lettered": 1, "dead_lettered:default": 1, "dead_lettered/Bad": 1, "delivered": 3, "delivered:default": 3],
            "a dead letter counts under its reason too")

        // All still in flight: recorded in one transaction; finished jobs are noted in the batch's
        // done set, a fan-out job only with its last piece, and the batch goes with its last job.
        let a3 = try batch(r, keys, "a-3", number: 3, first: 7, jobs: 3)
        completer.submit([delivered(7, a3, 0), rejected(8, a3, 1, status: 410, .unregistered), delivered(9, a3, 2, fanout: 2)])
        try waitFor(r, ["XLEN", keys.invalidTokens], equals: 1)
        XCTAssertEqual(
            Set(try r.command(["SMEMBERS", keys.batchDone(worker: worker, id: "a-3")]).array.compactMap(\.text)),
            ["0", "1", "2:\(token)"], "9 waits for its second piece; its first is marked")
        XCTAssertEqual(try InFlightJobs.count(r, keys, worker: worker), 1)
        completer.submit([delivered(9, a3, 2, fanout: 2)])
        try waitFor(r, ["HLEN", batches], equals: 0)
        XCTAssertEqual(try r.command(["EXISTS", keys.batch(worker: worker, id: "a-3"), keys.batchDone(worker: worker, id: "a-3")]).integer, 0)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 8)
        XCTAssertEqual(
            try stats(r, keys),
            [
                "dead_lettered": 1, "dead_lettered:default": 1, "dead_lettered/Bad": 1, "delivered": 6, "delivered:default": 6,
                "invalid_token": 1, "invalid_token:default": 1,
            ])

        // A retry needs Redis's clock, so its batch goes through the script: scheduled, not recorded.
        let a4 = try batch(r, keys, "a-4", number: 4, first: 10, jobs: 2)
        completer.submit([delivered(10, a4, 0), rejected(11, a4, 1, status: 503, .serviceUnavailable)])
        try waitFor(r, ["HLEN", batches], equals: 0)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 9)
        XCTAssertEqual(try r.command(["ZCARD", keys.scheduled]).integer, 1)
        XCTAssertEqual(try stats(r, keys)["retried:default"], 1)
    }

    /// Each transaction WATCHes the take-back key again after its EXEC and checks the oldest
    /// unfinished batch in the same write, so the next transaction skips that round trip. A
    /// recovery in between must still abort it, and its jobs must then go unrecorded here.
    func testARecoveryAfterATransactionAbortsTheNextOneThatRodeOnItsCheck() throws {
        let rig = try OneBatch(self, jobs: 3)
        defer { rig.close() }
        let (r, keys, completer, gate, b1) = (rig.r, rig.keys, rig.completer, rig.gate, rig.batch)
        completer.submit([delivered(1, b1, 0)])
        try waitFor(r, ["XLEN", keys.results], equals: 1)
        XCTAssertEqual(try r.command(["SMEMBERS", keys.batchDone(worker: worker, id: "b-1")]).array.compactMap(\.text), ["0"])

        _ = try r.command(["ZADD", keys.workers, "1", worker])  // a lease long run out
        XCTAssertEqual(
            try InFlightJobs.recover(r, keys, worker: worker, maxRecoveries: 3, caps: WorkerConfiguration().recordCaps, mode: .lease).requeued, 2)
        completer.submit([delivered(2, b1, 1), delivered(3, b1, 2)])
        XCTAssertTrue(gate.waitUntilEmpty(timeout: 10), "the completer decided the second batch")
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 1, "2 and 3 were taken back: recorded by whoever sends them again")
        XCTAssertEqual(try stats(r, keys), ["delivered": 1, "delivered:default": 1, "recovered": 2, "may_duplicate": 2])
        XCTAssertEqual(try r.command(["LLEN", keys.jobs]).integer, 2)
    }

    /// Recorded jobs are kept for the fetcher, which allocated them, and freed only when it
    /// drops them: the completer holds no reference of its own to them. The fetcher frees them
    /// one at a time.
    func testRecordedJobsAreFreedByWhoeverDropsThem() throws {
        let rig = try OneBatch(self, jobs: 2)
        defer { rig.close() }
        let (r, keys, completer, gate, b1) = (rig.r, rig.keys, rig.completer, rig.gate, rig.batch)
        weak var first: SendRequest?, second: SendRequest?
        do {
            let jobs = [try request(1, b1, 0, fanout: 1), try request(2, b1, 1, fanout: 1)]
            (first, second) = (jobs[0], jobs[1])
            completer.submit(jobs.map { $0.decide(.delivered(id: "id"), appName: "default") })
        }
        XCTAssertTrue(gate.waitUntilEmpty(timeout: 10), "the completer recorded both")
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 2)
        XCTAssertNotNil(first, "kept until dropped")
        XCTAssertNotNil(second)
        var unfreed = RecordedJobs.Unfreed(from: completer.completer.recorded)
        unfreed.collect()
        XCTAssertEqual(unfreed.count, 2)
        unfreed.collect()
        XCTAssertEqual(unfreed.count, 2, "taken once")
        unfreed.freeOne()
        XCTAssertTrue((first == nil) != (second == nil), "one freed")
        XCTAssertEqual(unfreed.count, 1)
        unfreed.freeOne()
        XCTAssertNil(first, "both freed")
        XCTAssertNil(second)
        unfreed.freeOne()
        XCTAssertEqual(unfreed.count, 0, "freeing none left is no error")
    }

    /// A completion whose EXEC ran but whose reply was lost is written again through the script,
    /// which skips every outcome already marked done: nothing is recorded twice.
    func testACompletionWrittenAgainAfterItsReplyWasLostRecordsNothingTwice() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        let directory = try TemporaryDirectory("apnsw-lost-reply")
        let port = freePort()
        // Passes bytes both ways, but cuts the first connection that sends EXEC once Redis has run
        // it, without passing on the answer.
        let proxy = try ChildProcess(
            "/usr/bin/python3",
            [
                "-c",
                """
                import socket, sys, threading, time
                listen, target = int(sys.argv[1]), int(sys.argv[2])
                s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", listen)); s.listen(8)
                cut = [False]
                def pump(a, b, state, upstream):
                    try:
                        while True:
                            data = a.recv(65536)
                            if not data: break
                            if upstream and not cut[0] and b"EXEC" in data:
                                cut[0] = state["dropping"] = True
                                b.sendall(data)
                                time.sleep(0.3)
                                a.close(); b.close(); return
                            if not state["dropping"]: b.sendall(data)
                    except OSError: pass
                while True:
                    c, _ = s.accept()
                    u = socket.create_connection(("127.0.0.1", target))
                    state = {"dropping": False}
                    threading.Thread(target=pump, args=(c, u, state, True), daemon=True).start()
                    threading.Thread(target=pump, args=(u, c, state, False), daemon=True).start()
                """, String(port), String(redis.endpoint.port),
            ], outputFile: directory.file("proxy.log"))
        defer { proxy.signal(SIGKILL); _ = proxy.wait(timeout: 5) }
        XCTAssertTrue(waitUntil(timeout: 10) { (try? BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 200)) != nil })
        let (completer, gate) = try startCompleter(keys, RedisEndpoint(host: "127.0.0.1", port: port, password: redis.endpoint.password))
        defer { completer.stop() }
        let b1 = try openBatch(r, keys, completer, "b-1", first: 1, jobs: 4)
        gate.add(sent: 0, decided: 3)
        completer.submit([delivered(1, b1, 0), rejected(2, b1, 1, status: 410, .unregistered), delivered(3, b1, 2, fanout: 2)])
        XCTAssertTrue(gate.waitUntilEmpty(timeout: 20), "the completer wrote the batch in the end")
        XCTAssertTrue(try String(contentsOfFile: directory.file("proxy.log"), encoding: .utf8).isEmpty)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 3, "one result each, though written twice")
        XCTAssertEqual(try r.command(["XLEN", keys.invalidTokens]).integer, 1)
        XCTAssertEqual(try stats(r, keys), ["delivered": 2, "delivered:default": 2, "invalid_token": 1, "invalid_token:default": 1])
        XCTAssertEqual(
            Set(try r.command(["SMEMBERS", keys.batchDone(worker: worker, id: "b-1")]).array.compactMap(\.text)),
            ["0", "1", "2:\(token)"])
        XCTAssertEqual(try InFlightJobs.count(r, keys, worker: worker), 2, "job 4, and job 3 waiting for its second piece")
    }

    /// A completion transaction WATCHes the take-back key: recovery and hand-back touch it.
    func testTakingJobsBackAbortsACompletionTransactionUnderWay() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let completing = try redis.connect(), other = try redis.connect()
        let takeback = keys.takeback(worker: worker)
        var configuration = WorkerConfiguration()
        configuration.redis = redis.endpoint
        for (n, handBack) in [false, true].enumerated() {
            _ = try batch(other, keys, "a-\(n)", number: n, first: 1, jobs: 1)
            _ = try other.command(["ZADD", keys.workers, "1", worker])  // a lease long run out
            _ = try completing.command(["WATCH", takeback])
            if handBack {
                XCTAssertEqual(try InFlightJobs.handBack(other, keys, worker: worker), 1)
            } else {
                XCTAssertEqual(
                    try InFlightJobs.recover(
                        other, keys, worker: worker, maxRecoveries: configuration.maxRecoveries, caps: configuration.recordCaps, mode: .lease
                    ).requeued, 1)
            }
            var t = RedisTransaction()
            t.append(RedisArgs(["XADD", keys.results, "*", "record", "{}"]))
            XCTAssertFalse(try completing.exec(&t), handBack ? "hand-back" : "recovery")
            XCTAssertGreaterThan(try other.command(["PTTL", takeback]).integer ?? 0, 0, "the key expires by itself")
        }
        XCTAssertEqual(try other.command(["XLEN", keys.results]).integer, 0)
        XCTAssertEqual(try other.command(["LLEN", keys.jobs]).integer, 2, "both jobs went back to the queue")
    }

    /// A completer on its own thread, with a gate of its own. The caller stops it.
    /// A running completer on a fresh queue, with one batch ("b-1") of `jobs` in flight in Redis,
    /// open in the completer and counted in the gate as decided.
    private struct OneBatch {
        let redis: TestRedis, keys: QueueKeys, r: BlockingRedisConnection, completer: LoopCompleter, gate: InFlightGate, batch: TakenBatch

        init(_ test: CompleterTests, jobs: Int) throws {
            redis = try TestRedis()
            keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            r = try redis.connect()
            (completer, gate) = try test.startCompleter(keys, redis.endpoint)
            batch = try test.openBatch(r, keys, completer, "b-1", first: 1, jobs: jobs)
            gate.add(sent: 0, decided: jobs)
        }

        func close() {
            completer.stop()
            try? redis.reset(queue: keys.queue)
        }
    }

    /// Outcomes that come in pieces share one transaction until it is full (half of what the
    /// gate lets wait) or the linger ends: a transaction costs a sleep, a wake-up and a round
    /// trip whatever its size.
    func testOutcomesGatherIntoOneTransactionUntilItIsFull() throws {
        let redis = try TestRedis()
        let keys = QueueKeys(queue: "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? redis.reset(queue: keys.queue) }
        let r = try redis.connect()
        var configuration = WorkerConfiguration()
        configuration.redis = redis.endpoint
        configuration.batchSize = 8  // recording capacity 8: a full transaction is 4
        configuration.connections = 1
        configuration.streams = 1
        let gate = InFlightGate(sendingCapacity: 100, recordingCapacity: 100)
        // A linger longer than the test: only a full transaction is written.
        let completer = try LoopCompleter(keys: keys, workerID: worker, configuration: configuration, gate: gate, linger: 60)
        defer { completer.stop() }
        let b = try openBatch(r, keys, completer, "b-1", first: 1, jobs: 4)
        gate.add(sent: 0, decided: 4)
        func execs() throws -> Int {
            let info = try r.command(["INFO", "commandstats"]).text ?? ""
            guard let line = info.split(separator: "\r\n").first(where: { $0.hasPrefix("cmdstat_exec:") }),
                let calls = line.split(separator: "=").dropFirst().first?.split(separator: ",").first
            else { return 0 }
            return Int(calls) ?? 0
        }
        let before = try execs()
        for i in 0..<3 { completer.submit([delivered(i + 1, b, i)]) }
        Thread.sleep(forTimeInterval: 0.3)
        XCTAssertEqual(try r.command(["XLEN", keys.results]).integer, 0, "three of four: still gathering")
        completer.submit([delivered(4, b, 3)])
        XCTAssertTrue(waitUntil(timeout: 10) { (try? r.command(["XLEN", keys.results]).integer) == 4 })
        XCTAssertEqual(try execs() - before, 1, "one transaction for the four")
    }

    private func startCompleter(_ keys: QueueKeys, _ endpoint: RedisEndpoint) throws -> (LoopCompleter, InFlightGate) {
        var configuration = WorkerConfiguration()
        configuration.redis = endpoint
        let gate = InFlightGate(sendingCapacity: 100, recordingCapacity: 100)
        return (try LoopCompleter(keys: keys, workerID: worker, configuration: configuration, gate: gate), gate)
    }

    /// A completer on an event loop running on a thread of its own, as an I/O thread runs it.
    final class LoopCompleter: Sendable {
        let completer: Completer
        private let loop: EventLoop

        init(keys: QueueKeys, workerID: String, configuration: WorkerConfiguration, gate: InFlightGate, linger: TimeInterval = 0.002) throws {
            loop = try EventLoop()
            completer = Completer(
                keys: keys, workerID: workerID, configuration: configuration, gate: gate, metrics: Metrics(),
                logger: Logger(level: .error), loop: loop, linger: linger)
            let (loop, completer) = (loop, completer)
            Thread { loop.run() }.start()
            loop.execute { completer.start() }
        }

        var unfinished: UnfinishedBatches { completer.unfinished }

        func submit(_ batch: [FinishedJob]) { completer.submit(batch) }

        /// Writes what the completer holds, then ends the loop.
        func stop() {
            let ended = DispatchSemaphore(value: 0)
            let (loop, completer) = (loop, completer)
            loop.execute {
                completer.finish {
                    loop.stop(); ended.signal()
                }
            }
            XCTAssertEqual(ended.wait(timeout: .now() + 30), .success, "the completer finished")
        }
    }

    /// A batch in flight in Redis, as a fetch leaves it.
    private func batch(_ r: BlockingRedisConnection, _ keys: QueueKeys, _ id: String, number: Int, first: Int, jobs: Int) throws -> TakenBatch {
        try storeBatch(r, keys, id, first: first, jobs: jobs)
        return TakenBatch(id: id, number: number, jobs: jobs)
    }

    /// A batch in Redis, opened with `completer` as its fetcher would.
    private func openBatch(
        _ r: BlockingRedisConnection, _ keys: QueueKeys, _ completer: LoopCompleter, _ id: String, first: Int, jobs: Int
    ) throws -> TakenBatch {
        try storeBatch(r, keys, id, first: first, jobs: jobs)
        return completer.unfinished.open(id: id, jobs: jobs)
    }

    /// The batch's list of jobs and its entry in the worker's batches, as the fetch script leaves them.
    private func storeBatch(_ r: BlockingRedisConnection, _ keys: QueueKeys, _ id: String, first: Int, jobs: Int) throws {
        _ = try r.command(["RPUSH", keys.batch(worker: worker, id: id)] + Array(repeating: "{}", count: jobs))
        _ = try r.command(["HSET", keys.batches(worker: worker), id, String(first)])
    }

    private func request(_ handle: Int, _ batch: TakenBatch, _ index: Int, fanout: Int) throws -> SendRequest {
        let job = try Job.parse(Array(#"{"token":"\#(token)","payload":{"aps":{"alert":"hi"}}}"#.utf8))
        let ticket = QueueTicket(
            handle: Int64(handle), batch: batch, index: index, takenAtNs: 1, sinceMs: 0, attempts: [], recoveries: 0, fanout: fanout)
        return SendRequest(ticket: ticket, job: job, token: DeviceToken(token)!, app: 0, topic: "com.example.app")
    }

    private func delivered(_ handle: Int, _ batch: TakenBatch, _ index: Int, fanout: Int = 1) -> FinishedJob {
        try! request(handle, batch, index, fanout: fanout).decide(.delivered(id: "id-\(handle)"), appName: "default")
    }

    private func rejected(_ handle: Int, _ batch: TakenBatch, _ index: Int, status: Int, _ reason: APNSReason) -> FinishedJob {
        let rejection = Rejection(status: status, reason: reason, apnsID: nil, timestamp: 1)
        var rng = SystemRandomNumberGenerator()
        guard case .finish(let verdict) = RejectionPolicy().decide(.rejected(rejection), attempts: 0, jobMaxAttempts: nil, using: &rng) else {
            fatalError("\(reason) keeps a job in flight")
        }
        return try! request(handle, batch, index, fanout: 1).decide(.rejected(rejection, verdict), appName: "default")
    }

    private func unsent(_ handle: Int, _ batch: TakenBatch, _ index: Int, _ outcome: Outcome) -> FinishedJob {
        .unsent(
            handle: Int64(handle), batch: batch, index: index, raw: Array("{}".utf8)[...], job: nil, appName: "default", topic: nil,
            outcome: outcome, attempts: [], recoveries: 0)
    }

    private func stats(_ r: BlockingRedisConnection, _ keys: QueueKeys) throws -> [String: Int64] {
        let flat = try r.command(["HGETALL", keys.stats]).array
        return Dictionary(uniqueKeysWithValues: stride(from: 0, to: flat.count, by: 2).map { (flat[$0].text!, flat[$0 + 1].integer!) })
    }

    private func waitFor(_ r: BlockingRedisConnection, _ command: [String], equals value: Int64) throws {
        let deadline = Date().addingTimeInterval(10)
        while try r.command(command).integer != value {
            guard Date() < deadline else { return XCTFail("\(command) never reached \(value)") }
            usleep(10_000)
        }
    }
}
