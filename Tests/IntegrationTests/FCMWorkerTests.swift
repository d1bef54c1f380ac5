import APNSCore
import APNSMock
import Foundation
import TestSupport
import XCTest

/// Android through the same queue (issue 48): `apns-worker` processes with an FCM app beside an
/// APNs app, against the mock FCM over real TLS and HTTP/2 and a real redis-server.
final class FCMWorkerTests: XCTestCase {
    /// A worker fixture whose apps are the mock APNs's "default" and the mock FCM's "android".
    private func fixture(
        _ fcm: FCMMockFixture, settings: [String: Any] = [:], perMinute: Int? = nil, reusing: WorkerFixture? = nil,
        configureMock: (inout MockConfiguration) -> Void = { _ in }
    ) throws -> WorkerFixture {
        let f = try reusing ?? WorkerFixture(settings: settings, configureMock: configureMock)
        let apns: [String: Any] = [
            "name": "default", "bundle_id": f.mock.files.topic,
            "token": ["team_id": f.mock.files.teamID, "key_id": f.mock.files.keyID, "key_file": f.mock.files.p8File],
        ]
        var android: [String: Any] = [
            "name": "android", "fcm": ["service_account_file": fcm.serviceAccountFile],
            "endpoint": ["host": "127.0.0.1", "port": fcm.port, "ca_file": fcm.files.caFile],
        ]
        if let perMinute { android["max_per_minute"] = perMinute }
        return try WorkerFixture.reconfigure(f, ["apps": [apns, android]])
    }

    static func token(_ i: Int, prefix: String = "fcm") -> String { "\(prefix)-token:APA91b\(String(format: "%06d", i))" }

    static func job(_ i: Int, prefix: String = "fcm", extra: String = "") -> String {
        #"{"v":1,"id":"fcm-\#(i)","app":"android","token":"\#(token(i, prefix: prefix))"\#(extra),"payload":{"data":{"n":"\#(i)"}}}"#
    }

    /// What the mock FCM accepted, by token.
    private func accepted(_ fcm: FCMMockFixture) throws -> [String: Int] {
        var sent: [String: Int] = [:]
        for e in try fcm.logEntries() where e["status"] as? Int == 200 { if let t = e["token"] as? String { sent[t, default: 0] += 1 } }
        return sent
    }

    func testAMixedQueueGoesToBothProvidersWithOneRecordEach() throws {
        let fcm = try FCMMockFixture()
        let metricsPort = freePort()
        let f = try fixture(fcm, settings: ["metrics_port": metricsPort])
        var jobs = (0..<100).map { WorkerFixture.job($0) } + (0..<100).map { Self.job($0) }
        jobs.append(
            #"{"v":1,"id":"fcm-notification","app":"android","token":"\#(Self.token(500))","priority":10,"collapse_id":"score","notification":{"title":"Goal","body":"2-1","channel_id":"sports"}}"#
        )
        jobs += (0..<2).map { Self.job(600 + $0, prefix: "unregistered") }
        jobs.append(#"{"v":1,"id":"fcm-reserved","app":"android","token":"\#(Self.token(700))","payload":{"data":{"from":"me"}}}"#)
        jobs.append(#"{"v":1,"id":"apns-fcm-token","token":"\#(Self.token(800))","payload":{"aps":{"alert":"x"}}}"#)
        // FCM's other targets: a topic and a condition; two targets, and a condition for APNs, refused.
        jobs.append(#"{"v":1,"id":"fcm-topic","app":"android","topic":"news","notification":{"title":"Extra"}}"#)
        jobs.append(#"{"v":1,"id":"fcm-condition","app":"android","condition":"'a' in topics","payload":{"data":{"k":"v"}}}"#)
        jobs.append(#"{"v":1,"id":"fcm-two","app":"android","token":"\#(Self.token(900))","topic":"news","payload":{"data":{"k":"v"}}}"#)
        jobs.append(#"{"v":1,"id":"apns-condition","condition":"'a' in topics","payload":{"aps":{"alert":"x"}}}"#)
        try f.enqueue(jobs)
        try f.startWorker()
        try f.waitForOutcomes(jobs.count)
        XCTAssertEqual(try f.finalStats(), ["delivered": 203, "invalid_token": 2, "dead_lettered": 4])
        let results = try f.records(in: \.results)
        XCTAssertEqual(results.count, jobs.count, "one result per job")
        let fcmDelivered = results.filter { $0["provider"] as? String == "fcm" }
        XCTAssertEqual(fcmDelivered.count, 103)
        XCTAssertTrue(fcmDelivered.allSatisfy { ($0["fcm_name"] as? String)?.hasPrefix("projects/demo-project/messages/") == true })
        let invalid = try f.records(in: \.invalidTokens)
        XCTAssertEqual(Set(invalid.compactMap { $0["token"] as? String }), Set((0..<2).map { Self.token(600 + $0, prefix: "unregistered") }))
        XCTAssertEqual(Set(invalid.compactMap { $0["reason"] as? String }), ["UNREGISTERED"])
        let dead = try f.records(in: \.deadLetters)
        XCTAssertEqual(
            Set(dead.compactMap { $0["reason"] as? String }), ["ReservedDataKey", "BadDeviceToken", "WrongFieldType"],
            "\(dead.map { $0["detail"] ?? "" })")
        let log = try fcm.logEntries()
        let sent = log.compactMap { ($0["payload"] as? [String: Any])?["message"] as? [String: Any] }
        XCTAssertTrue(sent.contains { $0["topic"] as? String == "news" && $0["token"] == nil }, "the topic's message")
        XCTAssertTrue(sent.contains { $0["condition"] as? String == "'a' in topics" }, "the condition's message")
        let notification = try XCTUnwrap(log.first { $0["token"] as? String == Self.token(500) })
        let message = try XCTUnwrap((notification["payload"] as? [String: Any])?["message"] as? [String: Any])
        XCTAssertEqual((message["notification"] as? [String: Any])?["title"] as? String, "Goal")
        let android = try XCTUnwrap(message["android"] as? [String: Any])
        XCTAssertEqual(android["priority"] as? String, "high")
        XCTAssertEqual(android["collapse_key"] as? String, "score")
        XCTAssertEqual((android["notification"] as? [String: Any])?["channel_id"] as? String, "sports")
        XCTAssertFalse(log.contains { $0["token"] as? String == Self.token(700) }, "a bad job never reaches FCM")
        XCTAssertEqual(log.filter { $0["status"] as? Int == 200 && $0["token"] != nil }.count, 101)
        let metrics = try XCTUnwrap(httpGet(port: metricsPort, path: "/metrics")).body
        XCTAssertTrue(metrics.contains(#"apns_app_info{app="android",provider="fcm"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"apns_app_info{app="default",provider="apns"} 1"#))
        XCTAssertFalse(metrics.contains("ya29.") || metrics.contains("PRIVATE KEY"), "no secret in the metrics")
    }

    /// check-config reads the service account and parses its key; `--online` gets a token.
    /// Neither says anything of the file's secrets; a revoked account fails, naming Google's error.
    func testCheckConfigReadsTheServiceAccountAndOnlineGetsAToken() throws {
        let fcm = try FCMMockFixture()
        let f = try fixture(fcm)
        func check(_ extra: [String]) throws -> (Int32, String) {
            let p = try ChildProcess(
                ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "check-config"] + extra,
                outputFile: f.directory.file("ctl-\(UInt32.random(in: 0...UInt32.max)).out"))
            return (p.wait(timeout: 30) ?? -1, p.output)
        }
        let (offline, said) = try check([])
        XCTAssertEqual(offline, 0, said)
        let account = "sender@demo-project.iam.gserviceaccount.com"
        XCTAssertTrue(said.contains("ok: app android: the service account \(account) reads, and its key parses"), said)
        XCTAssertFalse(said.contains("gave an access token"))
        let (online, saidOnline) = try check(["--online"])
        XCTAssertEqual(online, 0, saidOnline)
        XCTAssertTrue(saidOnline.contains("gave an access token for"), saidOnline)
        fcm.server.revokeFCM(clientEmail: fcm.account.clientEmail)
        let (refused, saidRefused) = try check(["--online"])
        XCTAssertNotEqual(refused, 0)
        XCTAssertTrue(saidRefused.contains("400 invalid_grant: Invalid JWT Signature."), saidRefused)
        for text in [said, saidOnline, saidRefused] { XCTAssertFalse(text.contains("PRIVATE KEY") || text.contains("ya29."), text) }
    }

    /// An FCM app added by a reload (SIGHUP) takes its jobs without a restart, and the worker's
    /// info (the dashboard's source) names each app's provider.
    func testAnFCMAppAddedByAReloadSendsWithoutARestart() throws {
        let fcm = try FCMMockFixture()
        let f = try WorkerFixture()
        let w = try f.startWorker()
        try f.enqueue((0..<20).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(20)
        _ = try fixture(fcm, reusing: f)
        w.signal(SIGHUP)
        XCTAssertTrue(try waitUntil(timeout: 10) { w.output.contains("android") }, w.output)
        try f.enqueue((0..<50).map { Self.job($0) })
        try f.waitForOutcomes(70)
        try f.assertOneResultEach(70)
        XCTAssertTrue(
            try waitUntil(timeout: 10) {
                let info = try f.connect().command(["HGETALL", f.keys.workerInfo]).array.compactMap(\.text).joined()
                return info.contains(#""provider":"fcm""#) && info.contains(#""token_left_s""#)
            }, "the worker's info names the FCM app's provider and its token's time left")
    }

    /// `max_per_minute` keeps an app under a project's quota: 600 a minute is 10 a second.
    func testACapPerMinuteSpreadsTheSends() throws {
        let fcm = try FCMMockFixture()
        let f = try fixture(fcm, perMinute: 600)
        try f.enqueue((0..<40).map { Self.job($0) })
        let start = Date()
        try f.startWorker()
        try f.waitForOutcomes(40)
        let took = Date().timeIntervalSince(start)
        try f.assertOneResultEach(40)
        XCTAssertGreaterThan(took, 2.5, "40 sends at 10 a second (a burst of 10 first)")
    }

    /// Access tokens that FCM stops taking mid-run: one new token for the storm of 401s, and no
    /// job is lost or dead-lettered.
    func testAnExpiredAccessTokenIsRenewedOnceAndNothingIsLost() throws {
        let fcm = try FCMMockFixture()
        let f = try fixture(fcm, settings: ["streams": 50])
        try f.enqueue((0..<300).map { Self.job($0) })
        try f.startWorker()
        try f.waitForOutcomes(300)
        let before = fcm.server.fcmTokensIssued
        fcm.server.expireFCMAccessTokens()
        try f.enqueue((300..<900).map { Self.job($0) })
        try f.waitForOutcomes(900)
        try f.assertOneResultEach(900)
        let minted = fcm.server.fcmTokensIssued - before
        XCTAssertTrue((1...2).contains(minted), "\(minted) tokens minted for one expiry")
        XCTAssertEqual(try accepted(fcm).values.filter { $0 > 1 }.count, 0, "no message sent twice")
    }

    /// A token endpoint that refuses at start: the app's jobs wait (none dead-lettered) and go
    /// once it answers again.
    func testJobsWaitWhileTheTokenEndpointFails() throws {
        let fcm = try FCMMockFixture()
        fcm.server.failFCMTokenRequests(status: 503)
        let f = try fixture(fcm)
        try f.enqueue((0..<50).map { Self.job($0) } + (0..<20).map { WorkerFixture.job($0) })
        try f.startWorker()
        try f.waitForOutcomes(20)
        sleep(3)
        XCTAssertEqual(try f.finalStats(), ["delivered": 20], "APNs goes on; FCM's jobs wait")
        fcm.server.failFCMTokenRequests(status: nil)
        try f.waitForOutcomes(70, timeout: 60)
        try f.assertOneResultEach(70)
    }

    /// A service account revoked mid-run (its tokens refused, its assertions too): after one
    /// failed renewal the app pauses and probes; its jobs wait (none dead-lettered, no attempt
    /// counted) while the APNs app goes on, and go once the account works again.
    func testARevokedServiceAccountPausesTheAppAndItsJobsWait() throws {
        let fcm = try FCMMockFixture()
        let f = try fixture(fcm, settings: ["credential_pause_ms": 300])
        try f.enqueue((0..<20).map { Self.job($0) })
        let w = try f.startWorker()
        try f.waitForOutcomes(20)
        fcm.server.revokeFCM(clientEmail: fcm.account.clientEmail)
        try f.enqueue((20..<50).map { Self.job($0) } + (0..<20).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(40)
        XCTAssertTrue(try waitUntil(timeout: 20) { w.output.contains("FCM refused the app's credentials; pausing the app and probing") }, w.output)
        XCTAssertEqual(try f.finalStats(), ["delivered": 40], "the FCM jobs wait; none is dead-lettered")
        // apnsctl stats says which app is paused, by which provider, and why.
        var said = ""
        let shown = try waitUntil(timeout: 10) {
            let ctl = try ChildProcess(
                ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "stats"],
                outputFile: f.directory.file("ctl-\(UInt32.random(in: 0...UInt32.max)).out"))
            _ = ctl.wait(timeout: 30)
            said = ctl.output
            return said.contains("PAUSED: app android") && said.contains("FCM refused its credentials")
        }
        XCTAssertTrue(shown, said)
        fcm.server.revokeFCM(clientEmail: fcm.account.clientEmail, false)
        try f.waitForOutcomes(70, timeout: 60)
        try f.assertOneResultEach(70)
        let attempts = try f.records(in: \.results).compactMap { $0["attempts"] as? Int }
        XCTAssertEqual(attempts.filter { $0 != 1 }.count, 0, "a refused credential costs a job no attempt")
    }

    /// GOAWAYs, dropped connections, 500s and 503s with retry-after: every job one final record,
    /// delivered.
    func testAStormOfConnectionFaultsCostsNoJob() throws {
        let fcm = try FCMMockFixture { config in
            config.faults.goawayAfter = 97
            config.faults.dropAfter = 151
            config.faults.tokens = [
                .init(tokenPrefix: "inner", status: 500, attempts: 1),
                .init(tokenPrefix: "busy", status: 503, attempts: 2),
                .init(tokenPrefix: "quota", status: 429, attempts: 1),
            ]
        }
        let f = try fixture(
            fcm,
            settings: [
                "retry": ["backoff_base_ms": 50, "server_error_min_delay_ms": 50, "server_error_max_delay_ms": 200, "quota_min_delay_ms": 100]
            ])
        let prefixes = ["fcm", "inner", "busy", "quota"]
        let jobs = (0..<800).map { Self.job($0, prefix: prefixes[$0 % 4]) }
        try f.enqueue(jobs)
        try f.startWorker()
        try f.waitForOutcomes(jobs.count, timeout: 90)
        try f.assertOneResultEach(jobs.count)
        let retried = try f.stats()["retried"] ?? 0
        XCTAssertGreaterThanOrEqual(retried, 600, "each 500, 503 and 429 was retried")
        let sent = try accepted(fcm)
        XCTAssertEqual(sent.count, jobs.count, "every token accepted")
    }

    /// `kill -9` while half the FCM jobs wait on slow answers: the next worker takes them back and
    /// sends them; every job has exactly one result.
    func testAWorkerKilledWithFCMJobsInFlightLosesNone() throws {
        let jobs = 200
        let fcm = try FCMMockFixture { $0.faults.tokens = [.init(tokenPrefix: "slow", attempts: 1, delayMs: 60_000)] }
        let f = try fixture(fcm, settings: ["lease_ms": 2000, "batch_size": 50])
        try f.enqueue((0..<jobs).map { Self.job($0, prefix: $0 % 2 == 0 ? "slow" : "fast") })
        try f.killWithHalfInFlightAndTakeOver(jobs)
        try f.assertOneResultEach(jobs)
        XCTAssertEqual(try f.stats()["recovered"], jobs / 2)
    }
}
