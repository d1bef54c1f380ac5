import APNSMock
import Foundation
import TLS
import TestSupport
import XCTest

/// A failing or hostile APNs costs time, never a job, and one app's trouble holds up no other
/// (issue 26): real worker processes, Redis and the mock.
final class APNsResilienceTests: XCTestCase {
    /// A key revoked for a minute pauses its app once (the answers in flight do not double the
    /// pause); the other app's jobs flow meanwhile, since the paused app keeps only a bounded
    /// number and defers the rest to the schedule; a probe after the pause resumes it.
    func testAPausedAppHoldsUpNoOtherAppAndResumesAtItsProbe() throws {
        let keys = try TemporaryDirectory("apnsw-keyb")
        let key = try ES256PrivateKey()
        try key.pkcs8PEM().write(toFile: keys.file("b.p8"), atomically: true, encoding: .utf8)
        try key.publicKeyPEM().write(toFile: keys.file("b.pub.pem"), atomically: true, encoding: .utf8)
        let pauseMs = 60_000
        var f = try WorkerFixture(settings: ["credential_pause_ms": pauseMs]) { config in
            config.keys.append(.init(keyID: "KEYB000001", teamID: "TEAM123456", publicKey: keys.file("b.pub.pem"), topics: ["com.example.b"]))
        }
        f = try WorkerFixture.reconfigure(
            f,
            [
                "apps": [
                    [
                        "name": "default", "bundle_id": f.mock.files.topic,
                        "token": ["team_id": f.mock.files.teamID, "key_id": f.mock.files.keyID, "key_file": f.mock.files.p8File],
                    ],
                    [
                        "name": "b", "bundle_id": "com.example.b",
                        "token": ["team_id": "TEAM123456", "key_id": "KEYB000001", "key_file": keys.file("b.p8")],
                    ],
                ]
            ])
        f.mock.server.revoke(keyID: "KEYB000001")
        let worker = try f.startWorker()
        let paused = (0..<2000).map { WorkerFixture.job(100_000 + $0, extra: #","app":"b""#) }
        try f.enqueue(paused)
        usleep(1_000_000)
        let revokedAt = Date()
        try f.enqueue((0..<3000).map { WorkerFixture.job($0) })
        let flowed = try waitUntil(timeout: 30) { (try f.stats()["delivered:default"] ?? 0) >= 3000 }
        let seen = try f.stats()
        XCTAssertTrue(flowed, "the other app's jobs keep flowing: \(seen)")
        XCTAssertLessThan(Date().timeIntervalSince(revokedAt), 30)
        let during = try f.stats()
        XCTAssertNil(during["dead_lettered"], "nothing is dead-lettered: \(during)")
        XCTAssertNil(during["delivered:b"])
        XCTAssertGreaterThan(during["deferred:b"] ?? 0, 1000, "what the paused app cannot hold waits in Redis: \(during)")
        let restoredAt = Date()
        f.mock.server.revoke(keyID: "KEYB000001", false)
        try f.waitForOutcomes(5000, timeout: 120)
        let resumedAfter = Date().timeIntervalSince(restoredAt)
        XCTAssertEqual(try f.finalStats(), ["delivered": 5000])
        XCTAssertLessThan(resumedAfter, Double(pauseMs) / 1000 + 40, "the probe after one pause resumes the app")
        let log = try f.mock.logEntries()
        let refused = log.filter { ($0["headers"] as? [String: String])?["apns-topic"] == "com.example.b" && $0["status"] as? Int == 403 }
        XCTAssertLessThanOrEqual(refused.count, 6, "one refusal per connection in flight, then one probe: \(refused.count)")
        let accepted = log.filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        XCTAssertEqual(Set(accepted).count, 5000, "each delivered exactly once")
        XCTAssertEqual(accepted.count, 5000)
        let pauses = worker.output.components(separatedBy: "pausing the app").count - 1
        XCTAssertEqual(pauses, 1, "one outage, one pause")
    }

    /// A pool whose APNs never answers (its own mock, in a timeout storm) holds up no other pool:
    /// after 10 s without an answer it probes one request at a time and defers the rest, and the
    /// other app's jobs keep flowing; once its APNs answers again, its jobs are delivered.
    func testAPoolThatGetsNoAnswersHoldsUpNoOtherPool() throws {
        var f = try WorkerFixture(settings: ["request_timeout_ms": 3000])
        // The same key as the first mock's: one key id is one key, at Apple and in the worker.
        let keys = try MockConfiguration.load(path: f.mock.files.mockConfigFile).keys
        let silent = try MockFixture { config in
            config.keys = keys
            config.faults.storm = .init(kind: .timeout, forMs: 25_000)
        }
        let silentEndpoint: [String: Any] = ["host": "127.0.0.1", "port": silent.port, "ca_file": silent.files.caFile, "server_name": "localhost"]
        let token: [String: Any] = ["team_id": f.mock.files.teamID, "key_id": f.mock.files.keyID, "key_file": f.mock.files.p8File]
        f = try WorkerFixture.reconfigure(
            f,
            [
                "apps": [
                    ["name": "default", "bundle_id": f.mock.files.topic, "token": token],
                    [
                        "name": "silent", "bundle_id": silent.files.topic, "endpoint": silentEndpoint,
                        "token": token,
                    ],
                ]
            ])
        try f.startWorker()
        try f.enqueue((0..<2000).map { WorkerFixture.job(100_000 + $0, extra: #","app":"silent""#) })
        usleep(1_000_000)
        try f.enqueue((0..<3000).map { WorkerFixture.job($0) })
        let flowed = try waitUntil(timeout: 30) { (try f.stats()["delivered:default"] ?? 0) >= 3000 }
        let seen = try f.stats()
        XCTAssertTrue(flowed, "the other pool's jobs keep flowing: \(seen)")
        XCTAssertGreaterThan(seen["deferred:silent"] ?? 0, 1000, "the silent pool's jobs wait in Redis: \(seen)")
        try f.waitForOutcomes(5000, timeout: 90)
        XCTAssertEqual(try f.finalStats(), ["delivered": 5000], "nothing dead-lettered")
        let accepted = try silent.logEntries().filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        XCTAssertEqual(Set(accepted).count, 2000, "each delivered once the server answers")
        XCTAssertEqual(accepted.count, 2000)
    }

    /// Each storm of issue 26, item 3, blows for 30 s on its own mock while a worker has 2,000
    /// jobs to send, then the mock turns good: every job is delivered exactly once, none is
    /// dead-lettered, and the worker opened no more than about 40 connections per pool.
    func testEveryStormCostsNoJobAndFewConnections() throws {
        let stormMs = 30_000
        let redis = try TestRedis()
        let kinds = MockConfiguration.Storm.Kind.allCases
        let fixtures = try kinds.map { kind in
            try WorkerFixture(redis: redis, settings: ["request_timeout_ms": 5000]) { config in
                config.faults.storm = .init(kind: kind, forMs: stormMs)
            }
        }
        let started = Date()
        for (k, f) in fixtures.enumerated() {
            try f.startWorker("storm-\(kinds[k].rawValue)")
            try f.enqueue((0..<2000).map { WorkerFixture.job($0) })
        }
        usleep(UInt32(stormMs) * 1000 - UInt32(Date().timeIntervalSince(started) * 1_000_000))
        let connectionsDuringStorm = fixtures.map { f in f.mock.server.stats.withLock { $0.connections } }
        for (k, f) in fixtures.enumerated() {
            let kind = kinds[k]
            try f.waitForOutcomes(2000, timeout: 90)
            XCTAssertEqual(try f.finalStats(), ["delivered": 2000], "\(kind)")
            let log = try f.mock.logEntries()
            let accepted = log.filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
            XCTAssertEqual(accepted.count, 2000, "\(kind): each delivered exactly once")
            XCTAssertEqual(Set(accepted).count, 2000, "\(kind)")
            XCTAssertGreaterThan(f.mock.server.stats.withLock { $0.stormEvents }, 0, "\(kind): the storm blew")
            XCTAssertLessThanOrEqual(connectionsDuringStorm[k], 40, "\(kind): reconnects back off")
            let output = f.workers[0].output
            let lines = output.split(separator: "\n").count
            XCTAssertLessThan(lines, 100, "\(kind): the storm is logged in summary, not per event (\(lines) lines)")
            print("storm \(kind.rawValue): \(connectionsDuringStorm[k]) connections during it, \(lines) log lines")
        }
    }
}
