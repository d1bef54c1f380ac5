import Foundation
import QueueContract
import RedisClient
import TestSupport
import XCTest

@testable import APNSWorker

/// A queue of N shards (issue 30, item 5) on one real redis-server: its keys live under N hash
/// tags, every worker serves every shard and the queue's own keys, and apnsctl sums them all.
final class ShardTests: XCTestCase {
    private func ctl(_ f: WorkerFixture, _ args: [String], shards: Int) throws -> (code: Int32, out: String) {
        let out = f.directory.file("ctl-\(UInt32.random(in: 0...UInt32.max)).out")
        let redis = "\(f.redis.endpoint.host):\(f.redis.endpoint.port)"
        let p = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--redis", redis, "--queue", f.queue, "--shards", String(shards)] + args,
            outputFile: out)
        let code = p.wait(timeout: 30) ?? -1
        return (code, p.output)
    }

    private func json(_ text: String) throws -> [String: Any] {
        let line = text.split(separator: "\n").first { $0.hasPrefix("{") } ?? ""
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    /// Results per job id over every key set's results stream.
    private func resultsPerJob(_ f: WorkerFixture) throws -> [String: Int] {
        var perJob: [String: Int] = [:]
        for r in try f.records(in: \.results) { perJob[r["job_id"] as? String ?? "?", default: 0] += 1 }
        return perJob
    }

    func testKeysOfAShardShareItsHashTagAndTheQueueKeepsItsTemplates() {
        let served = QueueKeys.served(queue: "push", shards: 3)
        XCTAssertEqual(served.map(\.jobs), ["apns:{push}:jobs", "apns:{push.0}:jobs", "apns:{push.1}:jobs", "apns:{push.2}:jobs"])
        XCTAssertEqual(Set(served.map(\.templates)), ["apns:{push}:templates"])
        XCTAssertEqual(Set(served.map(\.paused)), ["apns:{push}:paused"])
        XCTAssertEqual(served[2].batch(worker: "w", id: "b"), "apns:{push.1}:batch:w:b")
        XCTAssertEqual(QueueKeys.served(queue: "push", shards: 1), [QueueKeys(queue: "push")])
    }

    func testEveryKeySetHasAThreadAndEveryThreadAKeySet() {
        for sets in 1...9 {
            for threads in 1...9 {
                let assigned = (0..<threads).map { LaneAssignment.keySets(thread: $0, threads: threads, sets: sets) }
                XCTAssertTrue(assigned.allSatisfy { !$0.isEmpty }, "\(threads) threads, \(sets) sets")
                XCTAssertEqual(Set(assigned.flatMap { $0 }), Set(0..<sets), "\(threads) threads, \(sets) sets")
            }
        }
    }

    /// Producers push to any shard; one thread serves all five key sets, another worker has two
    /// threads. Every job has exactly one result, and apnsctl's sums match.
    func testJobsPushedToAnyShardAreDeliveredOnceEach() throws {
        let f = try WorkerFixture(settings: ["shards": 4, "io_threads": 1])
        let jobs = 2000
        // Uneven on purpose: shard 3 gets most, shard 1 none, the queue's own list some.
        let lists = [f.keySets[4].jobs, f.keySets[4].jobs, f.keySets[4].jobs, f.keySets[1].jobs, f.keySets[3].jobs, f.keys.jobs]
        for (n, list) in lists.enumerated() {
            try f.enqueue(stride(from: n, to: jobs, by: lists.count).map { WorkerFixture.job($0) }, to: list)
        }
        // The queue's templates serve every shard's jobs, from the first fetch on.
        _ = try f.connect().command(["HSET", f.keys.templates, "greet", #"{"aps":{"alert":"Hi {{name}}"}}"#])
        let templated = (jobs..<jobs + 10).map {
            #"{"id":"job-\#($0)","token":"\#(WorkerFixture.token($0))","template":{"name":"greet","data":{"name":"Ann"}}}"#
        }
        try f.enqueue(templated, to: f.keySets[3].jobs)
        let stats = try json(try ctl(f, ["--json", "stats"], shards: 4).out)
        XCTAssertEqual(stats["depth"] as? Int, jobs + 10)
        XCTAssertEqual(stats["shards"] as? Int, 4)
        let parts = try XCTUnwrap(stats["key_sets"] as? [[String: Any]])
        // {Q} and shard 0 a sixth each, shard 1 none, shard 2 a sixth and the templated ten, shard 3 half.
        XCTAssertEqual(parts.map { $0["depth"] as? Int ?? -1 }, [333, 333, 0, 343, 1001])
        try f.startWorker("w-one-thread")
        _ = try WorkerFixture.reconfigure(f, ["shards": 4, "io_threads": 2])
        try f.startWorker("w-two-threads")
        try f.waitForOutcomes(jobs + 10)
        try f.assertOneResultEach(jobs + 10)
        let greeted = try f.mock.logEntries().filter {
            (($0["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String == "Hi Ann"
        }
        XCTAssertEqual(greeted.count, 10)
        let after = try json(try ctl(f, ["--json", "stats"], shards: 4).out)
        XCTAssertEqual(after["depth"] as? Int, 0)
        XCTAssertEqual((after["counters"] as? [String: Any])?["delivered"] as? Int, jobs + 10)
        let workers = try XCTUnwrap(after["workers"] as? [[String: Any]])
        XCTAssertEqual(Set(workers.compactMap { $0["id"] as? String }), ["w-one-thread", "w-two-threads"])
        let text = try ctl(f, ["stats"], shards: 4).out
        XCTAssertTrue(text.contains("(4 shards): 0 waiting"), text)
    }

    /// A sharded worker killed with SIGKILL leaves batches on several shards: another takes each
    /// back when the lease runs out, and no job is lost.
    func testAKilledWorkersShardsAreEachTakenBack() throws {
        let f = try WorkerFixture(settings: ["shards": 3, "io_threads": 2, "lease_ms": 2000]) { config in
            config.faults.tokens = [.init(tokenPrefix: "", delayMs: 300)]
        }
        let jobs = 600
        for (n, set) in f.keySets.enumerated() {
            try f.enqueue(stride(from: n, to: jobs, by: f.keySets.count).map { WorkerFixture.job($0) }, to: set.jobs)
        }
        let doomed = try f.startWorker("w-doomed")
        XCTAssertTrue(
            try waitUntil(timeout: 20) { try f.keySets.filter { try InFlightJobs.count(f.connect(), $0, worker: "w-doomed") > 0 }.count >= 3 },
            doomed.output)
        doomed.signal(SIGKILL)
        _ = doomed.wait(timeout: 5)
        let heir = try f.startWorker("w-heir")
        XCTAssertTrue(try waitUntil(timeout: 60) { try self.resultsPerJob(f).count >= jobs }, heir.output.suffix(3000).description)
        let perJob = try resultsPerJob(f)
        XCTAssertEqual((0..<jobs).filter { perJob["job-\($0)"] == nil }.count, 0, "lost")
        XCTAssertGreaterThan(try f.stats()["recovered"] ?? 0, 0)
        for set in f.keySets { XCTAssertEqual(try InFlightJobs.count(f.connect(), set, worker: "w-doomed"), 0, set.label) }
    }

    /// Moving a queue from 1 shard to 3 while workers run: an unsharded worker runs; a sharded
    /// one joins; the unsharded one stops; producers then push to the shards. Nothing is lost,
    /// nothing is recorded twice.
    func testMovingAQueueFromOneShardToThreeWhileWorkersRunLosesNothing() throws {
        let f = try WorkerFixture(settings: ["shards": 3]) { config in config.faults.tokens = [.init(tokenPrefix: "", delayMs: 5)] }
        let jobs = 3000
        _ = try WorkerFixture.reconfigure(f, ["shards": 1])
        let old = try f.startWorker("w-old")
        try f.enqueue((0..<1000).map { WorkerFixture.job($0) })
        XCTAssertTrue(try waitUntil(timeout: 20) { try f.finalOutcomes() >= 100 }, old.output)
        _ = try WorkerFixture.reconfigure(f, ["shards": 3])
        let new = try f.startWorker("w-new")
        try f.enqueue((1000..<2000).map { WorkerFixture.job($0) })
        old.signal(SIGTERM)
        XCTAssertEqual(old.wait(timeout: 30), 0, old.output)
        for (n, set) in f.keySets.dropFirst().enumerated() {
            try f.enqueue(stride(from: 2000 + n, to: jobs, by: 3).map { WorkerFixture.job($0) }, to: set.jobs)
        }
        try f.waitForOutcomes(jobs)
        try f.assertOneResultEach(jobs)
        new.signal(SIGTERM)
        XCTAssertEqual(new.wait(timeout: 30), 0, new.output)
    }

    /// Rolling back from 4 shards to 2 while producers still push to 4: the workers set to 2
    /// serve shards 2 and 3 too while they hold jobs, apnsctl shows them draining, and nothing
    /// is left (issue 44, item 3: 400 queued and 20 scheduled jobs stayed on shards 2 and 3,
    /// unlisted, with no word in any log). A later start that finds them empty drops them.
    func testLoweringShardsStrandsNothing() throws {
        let f = try WorkerFixture(settings: ["shards": 4])
        let four = try f.startWorker("w-four")
        try f.enqueue((0..<40).map { WorkerFixture.job($0) }, to: f.keySets[3].jobs)
        try f.waitForOutcomes(40)
        four.signal(SIGTERM)
        XCTAssertEqual(four.wait(timeout: 30), 0, four.output)
        // The rollback: workers set to 2; producers still push to all four.
        _ = try WorkerFixture.reconfigure(f, ["shards": 2])
        let later = Int(Date().timeIntervalSince1970) + 2
        var n = 40
        for set in f.keySets.dropFirst() {
            try f.enqueue((n..<n + 100).map { WorkerFixture.job($0) }, to: set.jobs)
            try f.enqueue((n + 100..<n + 105).map { WorkerFixture.job($0, extra: #","send_at":\#(later)"#) }, to: set.jobs)
            n += 105
        }
        let shown = try ctl(f, ["stats"], shards: 2)
        XCTAssertEqual(shown.code, 0, shown.out)
        XCTAssertEqual(shown.out.components(separatedBy: "draining").count - 1, 2, "shards 2 and 3 shown draining: \(shown.out)")
        let two = try f.startWorker("w-two")
        try f.waitForOutcomes(n, timeout: 60)
        try f.assertOneResultEach(n)
        XCTAssertTrue(two.output.contains("serves those that still hold jobs"), two.output)
        XCTAssertTrue(two.output.contains("\(f.queue).3: 105"), two.output)
        two.signal(SIGTERM)
        XCTAssertEqual(two.wait(timeout: 30), 0, two.output)
        // Empty now: the next start serves its own two, and the record comes down.
        let again = try f.startWorker("w-two-again")
        try f.enqueue([WorkerFixture.job(n)], to: f.keySets[1].jobs)
        try f.waitForOutcomes(n + 1)
        XCTAssertFalse(again.output.contains("serves those that still hold jobs"), again.output)
        XCTAssertEqual(try f.connect().command(["HGET", f.keys.shardsRecord, "max"]).text, "2")
        XCTAssertFalse(try ctl(f, ["stats"], shards: 2).out.contains("draining"))
    }

    /// Dead letters and invalid tokens of every shard are read, requeued and purged together;
    /// a shard's record ids end in @shard.
    func testApnsctlReadsRequeuesAndPurgesDeadLettersAcrossShards() throws {
        let f = try WorkerFixture(settings: ["shards": 2]) { config in
            config.faults.tokens = [.init(tokenPrefix: "dead", status: 410), .init(tokenPrefix: "f0f0", status: 400, reason: "BadTopic")]
        }
        try f.startWorker()
        for (n, set) in f.keySets.enumerated() {
            try f.enqueue([WorkerFixture.job(10 + n, prefix: "dead"), WorkerFixture.job(20 + n, prefix: "f0f0")], to: set.jobs)
        }
        try f.waitForOutcomes(6)
        let listed = try ctl(f, ["--json", "dead", "list"], shards: 2).out
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]], listed)
        let ids = rows.compactMap { $0["id"] as? String }
        XCTAssertEqual(ids.count, 3, listed)
        XCTAssertEqual(Set(ids.map { $0.split(separator: "@").count == 2 ? String($0.split(separator: "@")[1]) : "-" }), ["-", "0", "1"])
        let shardID = try XCTUnwrap(ids.first { $0.hasSuffix("@1") })
        let shown = try ctl(f, ["dead", "show", shardID], shards: 2)
        XCTAssertEqual(shown.code, 0, shown.out)
        XCTAssertTrue(shown.out.contains("BadTopic"), shown.out)
        XCTAssertEqual(try ctl(f, ["dead", "show", "1-0@7"], shards: 2).code, 1)
        let tokens = try ctl(f, ["--json", "tokens", "invalid"], shards: 2).out
        let feed = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(tokens.utf8)) as? [[String: Any]], tokens)
        XCTAssertEqual(feed.count, 3)
        // Requeued to its own shard: it fails there again, and is a dead letter of that shard once more.
        XCTAssertEqual(try ctl(f, ["dead", "requeue", shardID], shards: 2).code, 0)
        XCTAssertTrue(try waitUntil(timeout: 20) { try f.records(f.keySets[2].deadLetters).count == 1 && f.finalOutcomes() >= 7 })
        let purged = try ctl(f, ["--json", "dead", "purge", "--reason", "BadTopic", "--yes"], shards: 2)
        XCTAssertEqual(try json(purged.out)["purged"] as? Int, 3, purged.out)
        XCTAssertEqual(try f.records(in: \.deadLetters).count, 0)
    }
}
