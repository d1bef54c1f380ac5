import Foundation
import QueueContract
import TestSupport
import XCTest

/// One worker serving several queues (`queues`, issue 47, item 2): a strict queue goes before
/// the bulk that waits, weighted queues share the worker by their weights, and each queue keeps
/// its own keys and records. These check the order and the proportions; the times are measured
/// by `scripts/bench-queues`.
final class SeveralQueuesTests: XCTestCase {
    private func fixture(_ queues: [[String: Any]], base: String, connections: Int, streams: Int, batch: Int) throws -> WorkerFixture {
        try WorkerFixture(
            queue: base, settings: ["queues": queues, "connections": connections, "streams": streams, "batch_size": batch]
        ) { mock in
            // Every answer a little late, so that a backlog lasts seconds.
            mock.faults.tokens = [.init(tokenPrefix: "a", delayMs: 20), .init(tokenPrefix: "b", delayMs: 20)]
        }
    }

    private func length(_ f: WorkerFixture, _ key: String, _ command: String) throws -> Int {
        Int(try f.connect(key).command([command, key]).integer ?? -1)
    }

    /// 3,000 bulk jobs flow at about 500 a second; 200 urgent jobs pushed to a strict queue go
    /// out before the bulk that waited: while they go, the bulk sends only what it already held
    /// (at most the gate, 20, and a fetch, 20). With two equal weights it would send about 200.
    func testAStrictQueueGoesBeforeTheBulkThatWaits() throws {
        let base = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let urgent = QueueKeys(queue: base + "-urgent")
        let f = try fixture(
            [["name": urgent.queue, "strict": true], ["name": base, "weight": 1]], base: base, connections: 1, streams: 10, batch: 20)
        defer { try? f.redis.reset(queue: urgent.queue) }
        try f.enqueue((0..<3000).map { WorkerFixture.job($0, prefix: "b") })
        let w = try f.startWorker()
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? self.length(f, f.keys.results, "XLEN")) ?? 0) >= 300 }, w.output)
        let waitingBefore = try length(f, f.keys.jobs, "LLEN")
        try f.enqueue((0..<200).map { WorkerFixture.job($0, prefix: "a") }, to: urgent.jobs)
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? self.length(f, urgent.results, "XLEN")) ?? 0) >= 200 }, w.output)
        let bulkSentMeanwhile = waitingBefore - (try length(f, f.keys.jobs, "LLEN"))
        XCTAssertGreaterThan(waitingBefore, 1000, "the bulk still had a backlog when the urgent jobs came")
        XCTAssertLessThanOrEqual(bulkSentMeanwhile, 60, "the bulk took no more while the strict queue had jobs")
        // The bulk goes on, alone, to its end; each queue's records are its own.
        XCTAssertTrue(waitUntil(timeout: 30) { ((try? self.length(f, f.keys.results, "XLEN")) ?? 0) >= 3000 }, w.output)
        XCTAssertEqual(try length(f, urgent.results, "XLEN"), 200)
        XCTAssertEqual(try f.records(f.keys.results).filter { ($0["job_id"] as? String)?.hasPrefix("job-") != true }.count, 0)
        let urgentStats = try f.connect(urgent.stats).command(["HGET", urgent.stats, "delivered"]).text
        XCTAssertEqual(urgentStats, "200", "the strict queue's counters are its own")
        XCTAssertEqual(try f.stats()["delivered"], 3000, "the bulk queue's counters are its own")
        w.signal(SIGTERM)
        XCTAssertEqual(w.wait(timeout: 30), 0, w.output)
    }

    /// Two queues with backlogs, weights 3 and 1: between two counts the first sends about
    /// three jobs to the second's one; once the first is empty, the second goes alone.
    func testWeightedQueuesShareTheWorkerByTheirWeights() throws {
        let base = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let light = QueueKeys(queue: base + "-light")
        let f = try fixture(
            [["name": base, "weight": 3], ["name": light.queue, "weight": 1]], base: base, connections: 1, streams: 20, batch: 10)
        defer { try? f.redis.reset(queue: light.queue) }
        try f.enqueue((0..<4000).map { WorkerFixture.job($0, prefix: "b") })
        try f.enqueue((0..<2000).map { WorkerFixture.job($0, prefix: "a") }, to: light.jobs)
        let w = try f.startWorker()
        func sent() throws -> (heavy: Int, light: Int) { (try length(f, f.keys.results, "XLEN"), try length(f, light.results, "XLEN")) }
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? sent()).map { $0.heavy + $0.light } ?? 0) >= 400 }, w.output)
        let first = try sent()
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? sent()).map { $0.heavy + $0.light } ?? 0) >= 2000 }, w.output)
        let second = try sent()
        let (heavy, lighter) = (second.heavy - first.heavy, second.light - first.light)
        let ratio = Double(heavy) / Double(max(1, lighter))
        print("weights 3:1 over \(heavy + lighter) sends: \(heavy) and \(lighter), \(ratio)")
        XCTAssertLessThan(second.heavy, 4000, "both queues still had jobs at the second count")
        XCTAssertGreaterThan(ratio, 2.0, "\(heavy) and \(lighter)")
        XCTAssertLessThan(ratio, 4.5, "\(heavy) and \(lighter)")
        XCTAssertTrue(waitUntil(timeout: 40) { ((try? sent()).map { $0.heavy + $0.light } ?? 0) >= 6000 }, w.output)
        XCTAssertEqual(try length(f, light.jobs, "LLEN"), 0)
        w.signal(SIGTERM)
        XCTAssertEqual(w.wait(timeout: 30), 0, w.output)
    }

    /// `apnsctl queues` lists each queue of the configuration with its share and figures, and
    /// `--queue` picks one of them, with its own shards.
    func testApnsctlShowsEachQueue() throws {
        let base = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let other = base + "-otp"
        let f = try fixture(
            [["name": base, "weight": 2, "shards": 2], ["name": other, "strict": true]], base: base, connections: 1, streams: 10, batch: 10)
        defer {
            for set in QueueKeys.served(queue: other, shards: 1) + QueueKeys.served(queue: base, shards: 2) { try? f.redis.reset(queue: set.label) }
        }
        try f.enqueue((0..<7).map { WorkerFixture.job($0) }, to: QueueKeys(queue: base, shard: 1).jobs)
        try f.enqueue((0..<3).map { WorkerFixture.job($0) }, to: QueueKeys(queue: other).jobs)
        func ctl(_ args: [String]) throws -> (code: Int32, out: String) {
            let p = try ChildProcess(
                ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile] + args, outputFile: f.directory.file("ctl-\(args.count).out"))
            return (p.wait(timeout: 30) ?? -1, p.output)
        }
        let listed = try ctl(["queues", "--json"])
        XCTAssertEqual(listed.code, 0, listed.out)
        let rows = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.out.utf8)) as? [[String: Any]], listed.out)
        XCTAssertEqual(rows.map { $0["queue"] as? String }, [base, other])
        XCTAssertEqual(rows.map { $0["waiting"] as? Int }, [7, 3])
        XCTAssertEqual(rows.map { $0["strict"] as? Bool }, [false, true])
        XCTAssertEqual(rows.map { $0["weight"] as? Int }, [2, 0])
        XCTAssertEqual(rows.map { $0["shards"] as? Int }, [2, 1])
        let table = try ctl(["queues"])
        XCTAssertTrue(table.out.contains("strict") && table.out.contains("weight 2"), table.out)
        let stats = try ctl(["--queue", other, "stats", "--json"])
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(stats.out.utf8)) as? [String: Any], stats.out)
        XCTAssertEqual(json["queue"] as? String, other)
        XCTAssertEqual(json["depth"] as? Int, 3)
        let sharded = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(try ctl(["stats", "--json"]).out.utf8)) as? [String: Any])
        XCTAssertEqual(sharded["shards"] as? Int, 2, "the first queue, with its own shards")
        XCTAssertEqual(sharded["depth"] as? Int, 7)
        // The dashboard's overview lists every queue of the configuration.
        let web = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "web", "--listen", "127.0.0.1:0"],
            outputFile: f.directory.file("web.out"))
        defer { web.signal(SIGKILL) }
        let port = try XCTUnwrap(servedPort(web), web.output)
        let api = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/api/overview"))
        let overview = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(api.body.utf8)) as? [String: Any], api.body)
        let listedByWeb = try XCTUnwrap(overview["queues"] as? [[String: Any]], api.body)
        XCTAssertEqual(listedByWeb.map { $0["queue"] as? String }, [base, other])
        XCTAssertEqual(listedByWeb.map { $0["waiting"] as? Int }, [7, 3])
        let page = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/"))
        XCTAssertTrue(page.body.contains("id=\"queues\""), page.body)
        XCTAssertTrue(page.body.contains("apnsctl web --queue \(other)"), "how to see the other queue's pages")
    }
}
