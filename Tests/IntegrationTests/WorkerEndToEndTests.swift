import APNSCore
import Foundation
import TestSupport
import XCTest

final class WorkerEndToEndTests: XCTestCase {
    func testEnqueuedJobsAreDeliveredAndRecorded() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        try f.enqueue((0..<200).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(200)
        XCTAssertEqual(try f.finalStats(), ["delivered": 200])
        let results = try f.records(f.keys.results)
        XCTAssertEqual(results.count, 200)
        XCTAssertTrue(results.allSatisfy { $0["status"] as? String == "ok" && UUIDText.isValid($0["apns_id"] as? String ?? "") })
        XCTAssertEqual(Set(results.compactMap { $0["job_id"] as? String }), Set((0..<200).map { "job-\($0)" }))
        XCTAssertEqual(try f.inFlight("x"), 0)
        let accepted = try f.mock.logEntries().filter { $0["status"] as? Int == 200 }
        XCTAssertEqual(accepted.count, 200, "the mock saw each notification once")
        XCTAssertEqual(Set(accepted.compactMap { $0["token"] as? String }).count, 200)
    }

    /// Redis and APNs given by name: the worker looks both up off its loops and delivers.
    func testEndpointsGivenByNameAreLookedUp() throws {
        let base = try WorkerFixture()
        var endpoint = base.endpoint
        endpoint["host"] = "localhost"
        let f = try WorkerFixture.reconfigure(
            base,
            [
                "redis": ["host": "localhost", "port": base.redis.endpoint.port],
                "apps": [
                    [
                        "name": "default", "bundle_id": base.mock.files.topic, "endpoint": endpoint,
                        "token": ["team_id": base.mock.files.teamID, "key_id": base.mock.files.keyID, "key_file": base.mock.files.p8File],
                    ]
                ],
            ])
        try f.startWorker()
        try f.enqueue((0..<20).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(20)
        XCTAssertEqual(try f.finalStats(), ["delivered": 20])
    }

    /// Each I/O thread fetches its own batches on its own Redis connection: both take part, and
    /// every job is sent and recorded once.
    func testEachIOThreadFetchesItsOwnJobs() throws {
        let jobs = 3000
        let f = try WorkerFixture(redis: TestRedis(dedicated: true), settings: ["io_threads": 2, "batch_size": 50, "streams": 10]) { config in
            config.faults.tokens = [.init(tokenPrefix: "", delayMs: 5)]
        }
        try f.enqueue((0..<jobs).map { WorkerFixture.job($0) })
        let w = try f.startWorker("w-two")
        try f.waitForOutcomes(jobs)
        XCTAssertEqual(try f.finalStats(), ["delivered": jobs])
        let results = try f.records(f.keys.results)
        XCTAssertEqual(Set(results.compactMap { $0["job_id"] as? String }).count, jobs)
        let accepted = try f.mock.logEntries().filter { $0["status"] as? Int == 200 }
        XCTAssertEqual(accepted.count, jobs, "the mock saw each notification once")
        // With the queue empty, each fetcher waits on its own connection in BLMOVE.
        let r = try f.connect()
        let waiting = { (try r.command(["CLIENT", "LIST"]).text ?? "").split(separator: "\n").filter { $0.contains("cmd=blmove") }.count }
        XCTAssertTrue(try waitUntil(timeout: 5) { try waiting() == 2 }, "two fetchers wait for jobs: \((try? waiting()) ?? -1)")
        XCTAssertTrue(w.isRunning)
    }

    /// Connections × streams smaller than a batch (4 × 25 against 256) must not stall the
    /// pipeline: the fetcher takes what fits instead of waiting for every send to be answered
    /// (issue 27, item 4: 0.77-0.80 of the bound before).
    func testAPipelineSmallerThanABatchKeepsItsConnectionsFull() throws {
        let f = try WorkerFixture(settings: ["connections": 4, "streams": 25]) { config in
            config.faults.tokens = [.init(tokenPrefix: "", delayMs: 50)]
        }
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(999_999)])
        try f.waitForOutcomes(1)  // connections up and past their first success
        let jobs = 8000
        try f.enqueue((0..<jobs).map { WorkerFixture.job($0) })
        let started = Date()
        try f.waitForOutcomes(jobs + 1, timeout: 60)
        let rate = Double(jobs) / Date().timeIntervalSince(started)
        let bound = 4.0 * 25 / 0.050
        print("pipeline: \(Int(rate)) jobs/s, \(rate / bound) of the bound")
        XCTAssertGreaterThan(rate / bound, 0.88, "\(Int(rate)) jobs/s against a bound of \(Int(bound))")
    }

    func testMalformedJobsAreDeadLetteredWithReasonsAndTheWorkerKeepsRunning() throws {
        let f = try WorkerFixture()
        let worker = try f.startWorker()
        let t = WorkerFixture.token(1)
        let bad: [(String, String)] = [
            ("not json at all", "MalformedJob"),
            (#"{"token":"\#(t)","payload":{"a":1}"#, "MalformedJob"),
            (#"{"payload":{"a":1}}"#, "MissingDeviceToken"),
            (#"{"token":"nothex","payload":{"a":1}}"#, "BadDeviceToken"),
            (#"{"token":"\#(t)","push_type":"yell","payload":{"a":1}}"#, "InvalidPushType"),
            (#"{"token":"\#(t)","priority":3,"payload":{"a":1}}"#, "BadPriority"),
            (#"{"token":"\#(t)","tokn":"x","payload":{"a":1}}"#, "UnknownField"),
            (#"{"token":"\#(t)","payload":{"a":"\#(String(repeating: "x", count: 5000))"}}"#, "PayloadTooLarge"),
            (#"{"token":"\#(t)","app":"nope","payload":{"a":1}}"#, "UnknownApp"),
            (#"{"token":"\#(t)","topic":"com.evil.app","payload":{"a":1}}"#, "TopicDisallowed"),
        ]
        var jobs: [String] = []
        for (i, b) in bad.enumerated() {
            jobs.append(WorkerFixture.job(100 + i))
            jobs.append(b.0)
        }
        try f.enqueue(jobs)
        try f.waitForOutcomes(jobs.count)
        XCTAssertEqual(try f.finalStats(), ["delivered": bad.count, "dead_lettered": bad.count])
        let dead = try f.records(f.keys.deadLetters)
        XCTAssertEqual(dead.map { $0["reason"] as? String ?? "" }.sorted(), bad.map(\.1).sorted())
        for d in dead {
            XCTAssertFalse((d["detail"] as? String ?? "").isEmpty, "a person can act on the reason")
            XCTAssertTrue(d["job"] != nil || d["job_text"] != nil, "the original job is kept")
        }
        XCTAssertEqual(dead.first { $0["reason"] as? String == "MalformedJob" && $0["job_text"] != nil }?["job_text"] as? String, "not json at all")
        XCTAssertTrue(worker.isRunning)
        // And it goes on working.
        try f.enqueue([WorkerFixture.job(999)])
        try f.waitForOutcomes(jobs.count + 1)
        XCTAssertEqual(try f.stats()["delivered"], bad.count + 1)
        XCTAssertEqual(try f.mock.logEntries().count, bad.count + 1, "nothing invalid was sent")
    }

    func testRejectionsAreRecordedAndDeadTokensFeedTheInvalidTokenStream() throws {
        let f = try WorkerFixture { config in
            config.faults.tokens = [.init(tokenPrefix: "dead", status: 410), .init(tokenPrefix: "f0f0", status: 400, reason: "BadTopic")]
        }
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(1, prefix: "dead"), WorkerFixture.job(2, prefix: "f0f0"), WorkerFixture.job(3)])
        try f.waitForOutcomes(3)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1, "invalid_token": 1, "dead_lettered": 1])
        let results = Dictionary(uniqueKeysWithValues: try f.records(f.keys.results).map { ($0["job_id"] as! String, $0) })
        XCTAssertEqual(results["job-1"]?["status"] as? String, "failed")
        XCTAssertEqual(results["job-1"]?["http_status"] as? Int, 410)
        XCTAssertEqual(results["job-1"]?["reason"] as? String, "Unregistered")
        XCTAssertNotNil(results["job-1"]?["apns_timestamp"] as? Int)
        XCTAssertEqual(results["job-2"]?["reason"] as? String, "BadTopic")
        XCTAssertEqual(results["job-3"]?["status"] as? String, "ok")
        let invalid = try f.records(f.keys.invalidTokens)
        XCTAssertEqual(invalid.count, 1)
        XCTAssertEqual(invalid.first?["token"] as? String, WorkerFixture.token(1, prefix: "dead"))
        XCTAssertEqual(invalid.first?["app"] as? String, "default")
        XCTAssertEqual(invalid.first?["topic"] as? String, "com.example.app")
        XCTAssertEqual(invalid.first?["reason"] as? String, "Unregistered")
        let dead = try f.records(f.keys.deadLetters)
        XCTAssertEqual(dead.first?["reason"] as? String, "BadTopic")
        XCTAssertEqual((dead.first?["attempts"] as? [[String: Any]])?.first?["status"] as? Int, 400)
    }

    func testSIGTERMFinishesWhatIsInFlightAndExitsZero() throws {
        let f = try WorkerFixture { config in config.faults.tokens = [.init(tokenPrefix: "", delayMs: 700)] }
        let worker = try f.startWorker("w-term")
        try f.enqueue((0..<40).map { WorkerFixture.job($0) })
        XCTAssertTrue(try waitUntil(timeout: 10) { try f.inFlight("w-term") > 0 })
        worker.signal(SIGTERM)
        XCTAssertEqual(worker.wait(timeout: 20), 0, worker.output)
        XCTAssertEqual(try f.stats()["delivered"], 40, "jobs in flight at SIGTERM were finished")
        XCTAssertEqual(try f.inFlight("w-term"), 0)
        XCTAssertTrue(worker.output.contains("\"msg\":\"stopped\""))
    }

    func testLogsAreJSONAndHoldNoKeyMaterial() throws {
        let f = try WorkerFixture(settings: ["log_level": "debug"]) { config in
            config.faults.tokens = [.init(tokenPrefix: "dead", status: 410)]
        }
        let worker = try f.startWorker()
        try f.enqueue([WorkerFixture.job(1), WorkerFixture.job(2, prefix: "dead"), "garbage"])
        try f.waitForOutcomes(3)
        worker.signal(SIGTERM)
        XCTAssertEqual(worker.wait(timeout: 20), 0)
        let p8 = try String(contentsOfFile: f.mock.files.p8File, encoding: .utf8)
        let keyBody = p8.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let output = worker.output
        XCTAssertFalse(output.contains(keyBody))
        XCTAssertFalse(output.contains("eyJ"), "no JWT (base64url JSON) in the logs")
        let lines = output.split(separator: "\n")
        XCTAssertGreaterThan(lines.count, 2)
        for line in lines {
            let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            XCTAssertNotNil(o?["time"])
            XCTAssertNotNil(o?["level"])
            XCTAssertNotNil(o?["msg"])
        }
        XCTAssertTrue(output.contains("\"reason\":\"Unregistered\""), "APNs errors are logged with their reason")
    }
}
