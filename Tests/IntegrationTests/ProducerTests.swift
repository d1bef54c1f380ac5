import Foundation
import QueueContract
import TestSupport
import XCTest

/// The example producers (examples/producers) enqueue with nothing of ours, and the worker
/// delivers what they wrote. A missing interpreter or Redis library fails the test.
final class ProducerTests: XCTestCase {
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("examples/producers").path

    private func produce(
        _ interpreter: String, _ script: String, idPrefix: String, into f: WorkerFixture, shards: Int = 1, keyPrefix: String? = nil
    ) throws {
        var environment = [
            "REDIS_HOST": f.redis.endpoint.host, "REDIS_PORT": String(f.redis.endpoint.port), "QUEUE": f.queue,
            "COUNT": "25", "ID_PREFIX": idPrefix, "NODE_PATH": "/usr/share/nodejs", "SHARDS": String(shards),
        ]
        environment["KEY_PREFIX"] = keyPrefix
        let p = try ChildProcess(
            interpreter, [Self.examples + "/" + script], environment: environment,
            outputFile: f.directory.file("\(idPrefix)-\(UInt32.random(in: 0...UInt32.max))-producer.log"))
        XCTAssertEqual(p.wait(timeout: 30), 0, "\(script) failed: \(p.output)")
    }

    func testJobsFromEveryExampleProducerAreDelivered() throws { try deliver(shards: 1) }

    /// With SHARDS, each producer spreads its jobs over the shards' lists.
    func testJobsFromEveryExampleProducerSpreadOverShardsAreDelivered() throws { try deliver(shards: 3) }

    /// With KEY_PREFIX, each producer gives its jobs idempotency keys and pushes each to its
    /// key's shard (FNV-1a): every producer run twice over four shards sends each key once.
    func testKeyedJobsFromEveryExampleProducerPushedTwiceAreSentOnce() throws {
        let f = try WorkerFixture(settings: ["shards": 4])
        try f.startWorker()
        let producers = [
            ("/bin/sh", "enqueue.sh", "sh"), ("/usr/bin/python3", "enqueue.py", "py"),
            ("/usr/bin/ruby", "enqueue.rb", "rb"), ("/usr/bin/node", "enqueue.js", "js"),
        ]
        for _ in 0..<2 {
            for (interpreter, script, prefix) in producers {
                try produce(interpreter, script, idPrefix: prefix, into: f, shards: 4, keyPrefix: "key-" + prefix)
            }
        }
        try f.waitForOutcomes(200)
        XCTAssertEqual(try f.finalStats(), ["delivered": 100, "duplicate": 100])
        // One home per key: the shard FNV-1a names, as apnsctl and the contract compute it.
        for set in f.keySets where set.shard != nil {
            for r in try f.records(set.results) {
                let id = try XCTUnwrap(r["job_id"] as? String)
                let key = "key-" + id  // producers key job <prefix>-<i> as key-<prefix>-<i>
                XCTAssertEqual(IdempotencyClaim.shard(ofKey: key, shards: 4), set.shard, "\(key) went to its shard")
            }
        }
    }

    private func deliver(shards: Int) throws {
        let f = try WorkerFixture(settings: ["shards": shards])
        try f.startWorker()
        let producers = [
            ("/bin/sh", "enqueue.sh", "sh"), ("/usr/bin/python3", "enqueue.py", "py"),
            ("/usr/bin/ruby", "enqueue.rb", "rb"), ("/usr/bin/node", "enqueue.js", "js"),
        ]
        for (interpreter, script, prefix) in producers {
            XCTAssertTrue(FileManager.default.isExecutableFile(atPath: interpreter), "\(interpreter) is missing (scripts/test installs it)")
            try produce(interpreter, script, idPrefix: prefix, into: f, shards: shards)
        }
        try f.waitForOutcomes(100)
        XCTAssertEqual(try f.finalStats(), ["delivered": 100])
        let ids = Set(try f.records(in: \.results).compactMap { $0["job_id"] as? String })
        let used = try f.keySets.filter { try !f.records($0.results).isEmpty }
        XCTAssertEqual(used.count, shards == 1 ? 1 : shards, "jobs went to every shard: \(used.map(\.label))")
        for (_, _, prefix) in producers {
            XCTAssertEqual(ids.filter { $0.hasPrefix(prefix + "-") }.count, 25, "\(prefix) jobs delivered")
        }
    }
}
