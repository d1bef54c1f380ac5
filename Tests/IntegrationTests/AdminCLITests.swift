import APNSCore
import Foundation
import TestSupport
import XCTest

/// `apnsctl` against a real Redis and a running worker (issue #6).
final class AdminCLITests: XCTestCase {
    private func ctl(_ f: WorkerFixture, _ args: [String], stdinFile: String? = nil, env: [String: String] = [:]) throws -> (code: Int32, out: String)
    {
        let out = f.directory.file("ctl-\(UInt32.random(in: 0...UInt32.max)).out")
        let redis = f.redis.endpoint.socket ?? "\(f.redis.endpoint.host):\(f.redis.endpoint.port)"
        let p = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--redis", redis, "--queue", f.queue] + args,
            environment: env, outputFile: out)
        let code = p.wait(timeout: 30) ?? -1
        return (code, p.output)
    }

    private func json(_ text: String) throws -> Any {
        let line = text.split(separator: "\n").first { $0.hasPrefix("{") || $0.hasPrefix("[") } ?? ""
        return try JSONSerialization.jsonObject(with: Data(line.utf8))
    }

    /// A Redis on the same machine may listen on a unix socket only: the worker and apnsctl both
    /// reach it there (`"redis": {"socket": …}`, `--redis /path`).
    func testWorkerAndApnsctlUseARedisUnixSocket() throws {
        let f = try WorkerFixture(redis: try TestRedis(unixSocket: true))
        XCTAssertNotNil(f.redis.endpoint.socket)
        let jobs = (0..<40).map { WorkerFixture.job($0) }
        try jobs.joined(separator: "\n").write(toFile: f.directory.file("jobs.jsonl"), atomically: true, encoding: .utf8)
        XCTAssertEqual(try ctl(f, ["enqueue", "--file", f.directory.file("jobs.jsonl")]).code, 0)
        let before = try json(try ctl(f, ["--json", "stats"]).out) as! [String: Any]
        XCTAssertEqual(before["depth"] as? Int, 40)
        try f.startWorker()
        try f.waitForOutcomes(40)
        XCTAssertEqual(try f.finalStats(), ["delivered": 40])
        XCTAssertEqual(try f.records(f.keys.results).filter { $0["status"] as? String == "ok" }.count, 40)
        let after = try json(try ctl(f, ["--json", "stats"]).out) as! [String: Any]
        XCTAssertEqual(after["depth"] as? Int, 0)
    }

    func testEnqueueStatsAndTheDeadLetterRoundTrip() throws {
        let f = try WorkerFixture { config in config.faults.tokens = [.init(tokenPrefix: "dead", status: 410)] }
        // Bulk enqueue from a file of JSON lines, before any worker runs: stats must match.
        let lines = (0..<50).map { WorkerFixture.job($0) } + [WorkerFixture.job(99, prefix: "dead")]
        try lines.joined(separator: "\n").write(toFile: f.directory.file("jobs.jsonl"), atomically: true, encoding: .utf8)
        let enq = try ctl(f, ["enqueue", "--file", f.directory.file("jobs.jsonl"), "--progress"])
        XCTAssertEqual(enq.code, 0, enq.out)
        XCTAssertTrue(enq.out.contains("51/51"), "a progress bar for bulk loads: \(enq.out)")
        let stats = try json(try ctl(f, ["--json", "stats"]).out) as! [String: Any]
        XCTAssertEqual(stats["depth"] as? Int, 51)
        XCTAssertEqual(stats["in_flight"] as? Int, 0)
        // A bad line enqueues nothing and says which line.
        try (lines + ["{oops"]).joined(separator: "\n").write(toFile: f.directory.file("bad.jsonl"), atomically: true, encoding: .utf8)
        let bad = try ctl(f, ["enqueue", "--file", f.directory.file("bad.jsonl")])
        XCTAssertEqual(bad.code, 1)
        XCTAssertTrue(bad.out.contains("job 52"), bad.out)
        // One job from flags, plus malformed ones straight into Redis.
        XCTAssertEqual(try ctl(f, ["enqueue", "--token", WorkerFixture.token(500), "--title", "Hi", "--body", "there", "--id", "flags"]).code, 0)
        try f.enqueue(["not json", #"{"token":"\#(WorkerFixture.token(1))","priority":9,"payload":{"a":1}}"#])
        try f.startWorker()
        try f.waitForOutcomes(54)
        let after = try json(try ctl(f, ["--json", "stats"]).out) as! [String: Any]
        XCTAssertEqual((after["counters"] as? [String: Any])?["delivered"] as? Int, 51)
        XCTAssertEqual(((after["apps"] as? [String: Any])?["default"] as? [String: Any])?["delivered"] as? Int, 51)
        XCTAssertEqual(((after["workers"] as? [[String: Any]])?.first)?["alive"] as? Bool, true)
        XCTAssertEqual(after["dead_letters"] as? Int, 2)

        let listed = try json(try ctl(f, ["--json", "dead", "list", "--reason", "BadPriority"]).out) as! [[String: Any]]
        XCTAssertEqual(listed.count, 1)
        let id = try XCTUnwrap(listed.first?["id"] as? String)
        let shown = try ctl(f, ["dead", "show", id])
        XCTAssertEqual(shown.code, 0)
        XCTAssertTrue(shown.out.contains("BadPriority") && shown.out.contains(#""priority":9"#), shown.out)
        // Fix the job while requeueing it.
        try #"{"id":"fixed","token":"\#(WorkerFixture.token(1))","priority":10,"payload":{"a":1}}"#
            .write(toFile: f.directory.file("fixed.json"), atomically: true, encoding: .utf8)
        let requeued = try ctl(f, ["dead", "requeue", id, "--replace", f.directory.file("fixed.json")])
        XCTAssertEqual(requeued.code, 0, requeued.out)
        try f.waitForOutcomes(55)
        XCTAssertEqual(try f.records(f.keys.results).last?["job_id"] as? String, "fixed")
        XCTAssertEqual(try ctl(f, ["dead", "show", id]).code, 1, "a requeued letter is gone")
        let tokens = try json(try ctl(f, ["--json", "tokens", "invalid"]).out) as! [[String: Any]]
        XCTAssertEqual((tokens.first?["record"] as? [String: Any])?["token"] as? String, WorkerFixture.token(99, prefix: "dead"))
        XCTAssertEqual(try ctl(f, ["dead", "purge", "--reason", "MalformedJob"]).code, 0)
        XCTAssertEqual(try f.connect().command(["XLEN", f.keys.deadLetters]).integer, 0)
        XCTAssertEqual(try ctl(f, ["dead", "purge"]).code, 2, "purging needs a selection")
        XCTAssertEqual(try ctl(f, ["frobnicate"]).code, 2)
        XCTAssertEqual(try ctl(f, ["dead", "requeue", "--help"]).code, 0)
    }

    func testCheckConfigAndRedisErrorsHaveTheirExitCodes() throws {
        let f = try WorkerFixture()
        let good = try ctl(f, ["--config", f.configFile, "check-config"])
        XCTAssertEqual(good.code, 0, good.out)
        XCTAssertTrue(good.out.contains("key parses"), good.out)
        // A broken .p8.
        try "-----BEGIN PRIVATE KEY-----\nbroken\n-----END PRIVATE KEY-----\n".write(
            toFile: f.directory.file("bad.p8"), atomically: true, encoding: .utf8)
        var config = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: f.configFile))) as! [String: Any]
        var apps = config["apps"] as! [[String: Any]]
        apps[0]["token"] = ["team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": f.directory.file("bad.p8")]
        config["apps"] = apps
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: f.directory.file("bad.json")))
        let bad = try ctl(f, ["--config", f.directory.file("bad.json"), "check-config"])
        XCTAssertEqual(bad.code, 1)
        XCTAssertTrue(bad.out.contains("not a valid APNs .p8 key"), bad.out)
        XCTAssertFalse(bad.out.contains("broken"), "no key material in errors")
        let down = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--redis", "127.0.0.1:\(freePort())", "stats"],
            outputFile: f.directory.file("down.out"))
        XCTAssertEqual(down.wait(timeout: 30), 3, down.output)
    }
}
