import APNSCore
import Foundation
import TestSupport
import XCTest

/// Metrics, health and readiness of a running worker (issue #6).
final class OperationsTests: XCTestCase {
    /// The value of one series in Prometheus text, or 0.
    private func value(_ metrics: String, _ series: String) -> Double {
        for line in metrics.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return 0
    }

    func testMetricsAgreeWithTheMocksCounts() throws {
        let port = freePort()
        let f = try WorkerFixture(settings: ["metrics_port": port]) { config in
            config.faults.tokens = [.init(tokenPrefix: "dead", status: 410), .init(tokenPrefix: "429", status: 429, attempts: 1)]
        }
        try f.startWorker()
        var jobs = (0..<300).map { WorkerFixture.job($0) }
        jobs += (0..<20).map { WorkerFixture.job($0, prefix: "dead") }
        jobs += (0..<5).map { WorkerFixture.job($0, prefix: "429") }
        jobs.append("not json")
        try f.enqueue(jobs)
        try f.waitForOutcomes(jobs.count, timeout: 30)
        let metrics = try XCTUnwrap(httpGet(port: port, path: "/metrics"))
        XCTAssertEqual(metrics.status, 200)
        let mock = f.mock.server.stats.withLock { $0 }
        let ok = value(metrics.body, #"apns_notifications_total{app="default",push_type="alert",reason="",status="200"}"#)
        let gone = value(metrics.body, #"apns_notifications_total{app="default",push_type="alert",reason="Unregistered",status="410"}"#)
        let throttled = value(metrics.body, #"apns_notifications_total{app="default",push_type="alert",reason="TooManyRequests",status="429"}"#)
        XCTAssertEqual(ok, Double(mock.byStatus[200] ?? 0))
        XCTAssertEqual(ok, 305)
        XCTAssertEqual(gone, Double(mock.byStatus[410] ?? 0))
        XCTAssertEqual(throttled, Double(mock.byStatus[429] ?? 0))
        XCTAssertEqual(value(metrics.body, #"apns_retries_total{app="default"}"#), 5)
        XCTAssertEqual(value(metrics.body, #"apns_invalid_tokens_total{app="default",reason="Unregistered"}"#), 20)
        // A job that names no app counts under the only one (issue 28, item 1).
        XCTAssertEqual(value(metrics.body, #"apns_dead_letters_total{app="default",reason="MalformedJob"}"#), 1)
        XCTAssertEqual(value(metrics.body, #"apns_round_trip_seconds_count{app="default"}"#), 330)
        // Every send's wait is recorded (issue 28, item 5: about one in six was).
        XCTAssertEqual(value(metrics.body, #"apns_queue_wait_seconds_count{app="default"}"#), 330)
        XCTAssertEqual(value(metrics.body, "apns_redis_up"), 1)
        XCTAssertTrue(metrics.body.contains(#"apns_app_paused{app="default",loop="apns-io-0"} 0"#), metrics.body)
        XCTAssertTrue(metrics.body.contains("apns_queue_oldest_age_seconds{queue="), metrics.body)
        XCTAssertGreaterThan(value(metrics.body, #"apns_connections{loop="apns-io-0",pool="default"}"#), 0)
        XCTAssertTrue(metrics.body.contains("# TYPE apns_end_to_end_seconds histogram"))
        XCTAssertTrue(metrics.body.contains("apns_queue_depth"))
        XCTAssertEqual(httpGet(port: port, path: "/healthz")?.status, 200)
    }

    /// A proxy in front of APNs answers 5xx with an HTML page or nothing: still a server error,
    /// retried. Reasons APNs does not document share one label (200 of them made 200 series).
    func testServerErrorsWithoutAReasonAreRetriedAndOddReasonsShareALabel() throws {
        let port = freePort()
        let f = try WorkerFixture(settings: ["metrics_port": port]) { config in
            config.faults.tokens = [
                .init(tokenPrefix: "5e", status: 503, attempts: 1, body: "<html><body>503 Service Unavailable</body></html>"),
                .init(tokenPrefix: "50", status: 500, attempts: 1, body: ""),
                .init(tokenPrefix: "0dd", status: 400, reasonPerToken: true),
            ]
        }
        try f.startWorker()
        let jobs =
            (0..<10).map { WorkerFixture.job($0, prefix: "5e") } + (0..<10).map { WorkerFixture.job($0, prefix: "50") }
            + (0..<30).map { WorkerFixture.job($0, prefix: "0dd") }
        try f.enqueue(jobs)
        try f.waitForOutcomes(jobs.count, timeout: 30)
        XCTAssertEqual(try f.finalStats(), ["delivered": 20, "dead_lettered": 30])
        XCTAssertEqual(try f.stats()["retried"], 20)
        let metrics = try XCTUnwrap(httpGet(port: port, path: "/metrics")).body
        XCTAssertEqual(value(metrics, #"apns_notifications_total{app="default",push_type="alert",reason="other",status="400"}"#), 30)
        XCTAssertEqual(value(metrics, #"apns_dead_letters_total{app="default",reason="other"}"#), 30)
        XCTAssertFalse(metrics.contains("Odd"), "no series of its own for each made-up reason")
    }

    func testReadinessFollowsRedis() throws {
        let redis = try TestRedis(dedicated: true)
        let port = freePort()
        let f = try WorkerFixture(redis: redis, settings: ["metrics_port": port])
        let worker = try f.startWorker()
        try f.enqueue([WorkerFixture.job(1)])
        try f.waitForOutcomes(1)
        XCTAssertTrue(waitUntil(timeout: 5) { httpGet(port: port, path: "/readyz")?.status == 200 })
        redis.stop()
        XCTAssertTrue(waitUntil(timeout: 5) { httpGet(port: port, path: "/readyz")?.status == 503 }, "not ready without Redis")
        let report = httpGet(port: port, path: "/readyz")?.body ?? ""
        XCTAssertTrue(report.contains(#""redis":{"ok":false"#), report)
        // The worker's own connections, with their error (issue 28, item 5).
        XCTAssertTrue(report.contains("fetcher apns-io-0:") || report.contains("completer apns-io-0:") || report.contains("housekeeper:"), report)
        let down = httpGet(port: port, path: "/metrics")?.body ?? ""
        XCTAssertTrue(down.contains("apns_redis_up 0"), down)
        XCTAssertFalse(down.contains("apns_queue_depth{"), "no stale depth while Redis does not answer")
        XCTAssertEqual(httpGet(port: port, path: "/healthz")?.status, 200, "still alive")
        try redis.restart()
        XCTAssertTrue(waitUntil(timeout: 10) { httpGet(port: port, path: "/readyz")?.status == 200 }, "ready again")
        XCTAssertTrue(worker.isRunning)
    }

    func testARedisPasswordWorksAndNeverReachesLogsOrErrors() throws {
        let secret = "s3cret-\(UInt32.random(in: 0...UInt32.max))"
        let redis = try TestRedis(dedicated: true, password: secret)
        let f = try WorkerFixture(redis: redis, settings: ["log_level": "debug"])
        let worker = try f.startWorker()
        try f.enqueue([WorkerFixture.job(1)])
        try f.waitForOutcomes(1)
        worker.signal(SIGTERM)
        XCTAssertEqual(worker.wait(timeout: 20), 0)
        XCTAssertFalse(worker.output.contains(secret))
        // A wrong password: a clear error, still without the password.
        let wrong = try WorkerFixture.reconfigure(
            f, ["redis": ["host": redis.endpoint.host, "port": redis.endpoint.port, "password": "nope-\(secret)"]])
        let failing = try wrong.startWorker()
        XCTAssertTrue(waitUntil(timeout: 10) { failing.output.contains("authentication") }, failing.output)
        failing.signal(SIGTERM)
        _ = failing.wait(timeout: 20)
        XCTAssertFalse(failing.output.contains(secret))
    }

    func testStreamsAreCappedByAge() throws {
        let f = try WorkerFixture(settings: ["dead_letters_max_age_s": 2, "results_max_age_s": 2])
        try f.startWorker()
        try f.enqueue(["not json", WorkerFixture.job(1)])
        try f.waitForOutcomes(2)
        XCTAssertEqual(try f.connect().command(["XLEN", f.keys.deadLetters]).integer, 1)
        XCTAssertTrue(
            try waitUntil(timeout: 10) {
                try f.connect().command(["XLEN", f.keys.deadLetters]).integer == 0 && f.connect().command(["XLEN", f.keys.results]).integer == 0
            }, "entries older than the cap are dropped")
        XCTAssertEqual(try f.finalStats(), ["delivered": 1, "dead_lettered": 1], "the counters stay")
    }

    /// An app paused on its credentials is not ready, and says why (issue 28, item 5: /readyz
    /// said ok 70 s into an InvalidProviderToken pause).
    func testAnAppPausedOnItsCredentialsIsNotReady() throws {
        let port = freePort()
        let f = try WorkerFixture(settings: ["metrics_port": port, "credential_pause_ms": 2000])
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(1)])
        try f.waitForOutcomes(1)
        XCTAssertTrue(waitUntil(timeout: 5) { httpGet(port: port, path: "/readyz")?.status == 200 })
        f.mock.server.revoke(keyID: f.mock.files.keyID)
        try f.enqueue([WorkerFixture.job(2)])
        XCTAssertTrue(waitUntil(timeout: 10) { httpGet(port: port, path: "/readyz")?.status == 503 }, "not ready while paused")
        let report = httpGet(port: port, path: "/readyz")?.body ?? ""
        XCTAssertTrue(report.contains("paused") && report.contains("InvalidProviderToken"), report)
        let metrics = httpGet(port: port, path: "/metrics")?.body ?? ""
        XCTAssertTrue(metrics.contains(#"apns_app_paused{app="default",loop="apns-io-0"} 1"#), metrics)
        // apnsctl stats shows the pause and why.
        func stats() throws -> String {
            let p = try ChildProcess(
                ChildProcess.productsDirectory + "/apnsctl",
                ["--redis", "\(f.redis.endpoint.host):\(f.redis.endpoint.port)", "--queue", f.queue, "stats"],
                outputFile: f.directory.file("stats-\(UInt32.random(in: 0...UInt32.max)).out"))
            _ = p.wait(timeout: 30)
            return p.output
        }
        let shown = try waitUntil(timeout: 5) { try stats().contains("PAUSED: app default") }
        XCTAssertTrue(shown, "apnsctl stats shows the pause")
        XCTAssertTrue(try stats().contains("InvalidProviderToken"))
        f.mock.server.revoke(keyID: f.mock.files.keyID, false)
        XCTAssertTrue(waitUntil(timeout: 30) { httpGet(port: port, path: "/readyz")?.status == 200 }, "ready once the probe succeeds")
        XCTAssertTrue(try waitUntil(timeout: 5) { try !stats().contains("PAUSED") }, "the pause is gone from stats")
    }
}
