import APNSCore
import Foundation
import QueueContract
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

    /// `--idempotency-key` writes the field, and on a sharded queue a keyed job goes to its key's
    /// shard (FNV-1a), every time: the worker sends it once.
    func testEnqueueWithAnIdempotencyKeyGoesToTheKeysShardAndIsSentOnce() throws {
        let f = try WorkerFixture(settings: ["shards": 4])
        let key = "invoice-77:paid"
        for i in 0..<6 {
            let r = try ctl(
                f, ["--shards", "4", "enqueue", "--token", WorkerFixture.token(i), "--title", "Paid", "--body", "77", "--idempotency-key", key])
            XCTAssertEqual(r.code, 0, r.out)
        }
        let home = IdempotencyClaim.shard(ofKey: key, shards: 4)
        for set in f.keySets where set.shard != nil {
            let depth = try f.connect(set.jobs).command(["LLEN", set.jobs]).integer
            XCTAssertEqual(depth, set.shard == home ? 6 : 0, "shard \(set.shard!)")
        }
        try f.startWorker()
        try f.waitForOutcomes(6)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1, "duplicate": 5])
        let bad = try ctl(f, ["enqueue", "--token", WorkerFixture.token(9), "--title", "x", "--idempotency-key", "two words"])
        XCTAssertEqual(bad.code, 1, "checked with the worker's parser first")
        XCTAssertTrue(bad.out.contains("idempotency_key"), bad.out)
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
        XCTAssertEqual(try ctl(f, ["dead", "purge", "--reason", "MalformedJob", "--yes"]).code, 0)
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

    /// apnsctl refuses what it cannot do safely (issue 28, item 4): a misspelt flag purged every
    /// BadPriority dead letter, a filter purged without asking, a malformed id read as a Redis
    /// error, and paging the invalid-token feed repeated a row.
    func testApnsctlRefusesWhatItCannotDoSafely() throws {
        let f = try WorkerFixture()
        let r = try f.connect()
        let token = WorkerFixture.token(7)
        for (i, reason) in ["BadPriority", "BadPriority", "MalformedJob"].enumerated() {
            let record = #"{"v":1,"reason":"\#(reason)","app":"default","job_id":"j\#(i)","token":"\#(token)","job":{"token":"\#(token)"}}"#
            _ = try r.command(["XADD", f.keys.deadLetters, "*", "record", record])
        }
        func deadCount() throws -> Int64 { try r.command(["XLEN", f.keys.deadLetters]).integer ?? -1 }

        let typo = try ctl(f, ["dead", "purge", "--reason", "BadPriority", "--older-thn", "7d", "--yes"])
        XCTAssertEqual(typo.code, 2, typo.out)
        XCTAssertTrue(typo.out.contains("--older-thn"), typo.out)
        XCTAssertEqual(try deadCount(), 3, "a misspelt flag touches nothing")
        XCTAssertEqual(try ctl(f, ["stats", "--limit", "3"]).code, 2, "every command refuses flags it does not take")
        XCTAssertEqual(try ctl(f, ["dead", "list", "extra"]).code, 2)

        let unconfirmed = try ctl(f, ["dead", "purge", "--reason", "BadPriority"])
        XCTAssertEqual(unconfirmed.code, 2)
        XCTAssertTrue(unconfirmed.out.contains("would purge 2 dead letter(s)") && unconfirmed.out.contains("--yes"), unconfirmed.out)
        let dry = try ctl(f, ["dead", "requeue", "--all", "--dry-run"])
        XCTAssertEqual(dry.code, 0, dry.out)
        XCTAssertTrue(dry.out.contains("would requeue 3 dead letter(s)") && dry.out.contains("j2"), dry.out)
        XCTAssertEqual(try deadCount(), 3, "neither asking nor a dry run changes anything")
        XCTAssertEqual(try r.command(["LLEN", f.keys.jobs]).integer, 0)
        XCTAssertEqual(try ctl(f, ["dead", "purge", "--reason", "BadPriority", "--yes"]).code, 0)
        XCTAssertEqual(try deadCount(), 1)
        XCTAssertEqual(try ctl(f, ["dead", "purge", "--reason", "BadPriority", "--yes"]).code, 1, "nothing matched")

        let malformed = try ctl(f, ["dead", "show", "12ab"])
        XCTAssertEqual(malformed.code, 1, malformed.out)
        XCTAssertTrue(malformed.out.contains("is not a dead-letter id"), malformed.out)
        XCTAssertEqual(try ctl(f, ["dead", "list", "--reason", "Nothing"]).code, 1, "nothing matched is 1")
        let listed = try ctl(f, ["dead", "list"])
        XCTAssertTrue(listed.out.contains(token), "tokens are shown whole: \(listed.out)")

        XCTAssertEqual(try ctl(f, ["enqueue", "--token", token]).code, 2, "a job with no content")
        try WorkerFixture.job(1).write(toFile: f.directory.file("one.jsonl"), atomically: true, encoding: .utf8)
        XCTAssertEqual(try ctl(f, ["enqueue", "--file", f.directory.file("one.jsonl"), "--token", token, "--title", "x"]).code, 2)
        let unknownApp = try ctl(f, ["--config", f.configFile, "--queue", f.queue, "enqueue", "--token", token, "--title", "x", "--app", "legacy"])
        XCTAssertEqual(unknownApp.code, 1, unknownApp.out)
        XCTAssertTrue(unknownApp.out.contains("legacy") && unknownApp.out.contains("default"), unknownApp.out)
        XCTAssertEqual(try r.command(["LLEN", f.keys.jobs]).integer, 0, "nothing was enqueued")

        // Paging the invalid-token feed with the last id seen repeats no row.
        for i in 0..<5 {
            _ = try r.command(["XADD", f.keys.invalidTokens, "*", "record", #"{"token":"\#(WorkerFixture.token(i))","app":"default"}"#])
        }
        let first = try json(try ctl(f, ["--json", "tokens", "invalid", "--limit", "3"]).out) as! [[String: Any]]
        XCTAssertEqual(first.count, 3)
        let rest = try json(try ctl(f, ["--json", "tokens", "invalid", "--since", first.last!["id"] as! String]).out) as! [[String: Any]]
        XCTAssertEqual(rest.count, 2, "the page starts after the id given")
        XCTAssertEqual(Set((first + rest).map { $0["id"] as! String }).count, 5)

        let checked = try ctl(f, ["--config", f.configFile, "--json", "check-config"])
        XCTAssertEqual(checked.code, 0, checked.out)
        let report = try json(checked.out) as! [String: Any]
        XCTAssertEqual(report["ok"] as? Bool, true)
        XCTAssertFalse((report["checks"] as? [[String: String]] ?? []).isEmpty)

        let misspelt = try ctl(f, ["--queue", f.queue + "-typo", "stats"])
        XCTAssertEqual(misspelt.code, 0)
        XCTAssertTrue(misspelt.out.contains("has no keys in Redis"), misspelt.out)
    }

    /// Every program says its version and commit, and apns-mock has --help (issue 28, item 4).
    func testEveryProgramHasVersionAndHelp() throws {
        let dir = try TemporaryDirectory("apnsw-version")
        for program in ["apns-worker", "apnsctl", "apns-mock"] {
            for flag in ["--version", "--help"] {
                let p = try ChildProcess(ChildProcess.productsDirectory + "/" + program, [flag], outputFile: dir.file("\(program)\(flag).out"))
                XCTAssertEqual(p.wait(timeout: 10), 0, "\(program) \(flag): \(p.output)")
                if flag == "--version" {
                    let line = p.output.trimmingCharacters(in: .whitespacesAndNewlines)
                    XCTAssertNotNil(
                        line.range(of: #"^\#(program) \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,40}|unknown)\)$"#, options: .regularExpression), line)
                } else {
                    XCTAssertTrue(p.output.contains("usage"), p.output)
                }
            }
        }
    }
}
