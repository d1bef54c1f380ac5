import APNSCore
import APNSMock
import Foundation
import TestSupport
import XCTest

/// Issue #4 end to end: several apps and teams in one process, certificate auth, JWT expiry,
/// every push type, and validation that keeps bad requests from ever leaving the worker.
final class ProtocolCoverageTests: XCTestCase {
    func testTwoTeamsInOneProcessNeverShareAConnection() throws {
        var secondKey = ""
        let dir = try TemporaryDirectory("apnsw-team2")
        let f = try WorkerFixture(settings: [:]) { config in
            secondKey =
                (try? MockCredentials.addProviderKey(
                    in: dir.path, to: &config, teamID: "TEAMTWO002", keyID: "KEYTWO0002",
                    topics: ["com.other.app"])) ?? ""
        }
        let apps: [[String: Any]] = [
            [
                "name": "one", "bundle_id": "com.example.app", "endpoint": f.endpoint,
                "token": ["team_id": f.mock.files.teamID, "key_id": f.mock.files.keyID, "key_file": f.mock.files.p8File],
            ],
            [
                "name": "two", "bundle_id": "com.other.app", "endpoint": f.endpoint,
                "token": ["team_id": "TEAMTWO002", "key_id": "KEYTWO0002", "key_file": secondKey],
            ],
        ]
        let g = try WorkerFixture.reconfigure(f, ["apps": apps])
        try g.startWorker()
        try g.enqueue((0..<200).map { WorkerFixture.job($0, extra: #","app":"\#($0 % 2 == 0 ? "one" : "two")""#) })
        try g.waitForOutcomes(200)
        XCTAssertEqual(try g.finalStats(), ["delivered": 200])
        let log = try g.mock.logEntries()
        var keysPerConnection: [Int: Set<String>] = [:]
        for e in log { keysPerConnection[e["conn"] as! Int, default: []].insert(e["key_id"] as? String ?? "-") }
        XCTAssertEqual(Set(keysPerConnection.values.flatMap { $0 }), ["KEY1234567", "KEYTWO0002"])
        XCTAssertTrue(keysPerConnection.values.allSatisfy { $0.count == 1 }, "one team per connection: \(keysPerConnection)")
    }

    func testAppsWithTheSameCredentialShareOnePool() throws {
        let f = try WorkerFixture()
        let token: [String: Any] = ["team_id": f.mock.files.teamID, "key_id": f.mock.files.keyID, "key_file": f.mock.files.p8File]
        let g = try WorkerFixture.reconfigure(
            f,
            [
                "connections": 2,
                "apps": [
                    ["name": "main", "bundle_id": "com.example.app", "token": token],
                    ["name": "beta", "bundle_id": "com.example.app.beta", "token": token],
                ],
            ])
        try g.startWorker()
        try g.enqueue((0..<100).map { WorkerFixture.job($0, extra: #","app":"\#($0 % 2 == 0 ? "main" : "beta")""#) })
        try g.waitForOutcomes(100)
        XCTAssertEqual(try g.finalStats(), ["delivered": 100])
        let log = try g.mock.logEntries()
        XCTAssertEqual(Set(log.compactMap { ($0["headers"] as? [String: String])?["apns-topic"] }), ["com.example.app", "com.example.app.beta"])
        XCTAssertEqual(g.mock.server.stats.withLock { $0.connections }, 2, "one pool of 2 connections serves both apps")
    }

    func testCertificateAppsSendWithPEMAndPKCS12() throws {
        let f = try WorkerFixture()
        let files = f.mock.files
        let apps: [[String: Any]] = [
            [
                "name": "pem", "bundle_id": files.certificateTopic,
                "certificate": ["certificate_file": files.clientCertificateFile, "key_file": files.clientKeyFile],
            ],
            [
                "name": "p12", "bundle_id": files.certificateTopic,
                "certificate": ["pkcs12_file": files.clientPKCS12File, "password": files.clientPKCS12Password],
            ],
        ]
        let g = try WorkerFixture.reconfigure(f, ["apps": apps])
        try g.startWorker()
        try g.enqueue([
            WorkerFixture.job(1, extra: #","app":"pem""#), WorkerFixture.job(2, extra: #","app":"p12""#),
            WorkerFixture.job(3, extra: #","app":"pem","push_type":"voip""#),
        ])
        try g.waitForOutcomes(3)
        XCTAssertEqual(try g.finalStats(), ["delivered": 3])
        let log = try g.mock.logEntries()
        XCTAssertEqual(log.count, 3)
        for e in log {
            let headers = e["headers"] as! [String: String]
            XCTAssertNil(headers["authorization"], "certificate connections carry no JWT")
            XCTAssertTrue(headers["apns-topic"]!.hasPrefix(files.certificateTopic))
        }
    }

    func testAnExpiredJWTIsReplacedAndNoJobIsLost() throws {
        let f = try WorkerFixture(settings: ["token_min_refresh_s": 1]) { config in config.tokenMaxAgeSeconds = 2 }
        let worker = try f.startWorker()
        try f.enqueue([WorkerFixture.job(0)])
        try f.waitForOutcomes(1)
        usleep(3_000_000)  // the JWT is now older than the mock accepts
        try f.enqueue((1..<101).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(101, timeout: 30)
        XCTAssertEqual(try f.finalStats(), ["delivered": 101])
        let results = try f.records(f.keys.results)
        XCTAssertTrue(results.allSatisfy { $0["attempts"] as? Int == 1 }, "the refresh cost no job an attempt")
        let log = try f.mock.logEntries()
        XCTAssertGreaterThan(log.filter { $0["reason"] as? String == "ExpiredProviderToken" }.count, 0)
        XCTAssertEqual(log.filter { $0["reason"] as? String == "TooManyProviderTokenUpdates" }.count, 0)
        XCTAssertTrue(worker.isRunning)
    }

    func testEveryPushTypeIsDeliveredWithItsTopicAndPriority() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        let cases: [(String, String)] = [
            ("alert", #""priority":10"#), ("background", #""priority":5"#), ("voip", #""priority":10"#),
            ("complication", #""priority":5"#), ("fileprovider", #""priority":5"#), ("liveactivity", #""priority":5"#),
            ("location", #""priority":10"#), ("mdm", #""topic":"com.example.app""#), ("pushtotalk", #""priority":10,"expiration":0"#),
            ("widgets", #""priority":5"#), ("controls", #""priority":10"#),
        ]
        func payload(_ type: String) -> String {
            switch type {
            case "liveactivity": return #"{"aps":{"event":"update","timestamp":1700000000,"content-state":{"s":1}}}"#
            case "widgets", "controls": return #"{"aps":{"content-changed":true}}"#
            default: return #"{"aps":{"content-available":1}}"#
            }
        }
        try f.enqueue(
            cases.enumerated().map { i, c in
                #"{"id":"\#(c.0)","token":"\#(WorkerFixture.token(i))","push_type":"\#(c.0)",\#(c.1),"payload":\#(payload(c.0))}"#
            })
        try f.waitForOutcomes(cases.count)
        XCTAssertEqual(try f.finalStats(), ["delivered": cases.count])
        let headers = Dictionary(
            uniqueKeysWithValues: try f.mock.logEntries().map { e -> (String, [String: String]) in
                let h = e["headers"] as! [String: String]
                return (h["apns-push-type"]!, h)
            })
        let topics = headers.mapValues { $0["apns-topic"]! }
        // Neighbouring requests share header values where they can: each still has its own.
        for (type, fields) in cases {
            // A job without a priority is sent with its push type's default: APNs reads none as 10.
            let priority = fields.firstMatch(of: /"priority":(\d+)/).map { String($0.1) } ?? "10"
            XCTAssertEqual(headers[type]?["apns-priority"], priority, type)
            XCTAssertEqual(headers[type]?["apns-expiration"], fields.contains("expiration") ? "0" : nil, type)
        }
        XCTAssertEqual(topics["voip"], "com.example.app.voip")
        XCTAssertEqual(topics["complication"], "com.example.app.complication")
        XCTAssertEqual(topics["fileprovider"], "com.example.app.pushkit.fileprovider")
        XCTAssertEqual(topics["liveactivity"], "com.example.app.push-type.liveactivity")
        XCTAssertEqual(topics["location"], "com.example.app.location-query")
        XCTAssertEqual(topics["pushtotalk"], "com.example.app.voip-ptt")
        XCTAssertEqual(topics["widgets"], "com.example.app.push-type.widgets")
        XCTAssertEqual(topics["controls"], "com.example.app.push-type.controls")
        XCTAssertEqual(topics["alert"], "com.example.app")
    }

    func testEveryValidationRuleDeadLettersWithApplesReasonAndSendsNothing() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        let t = WorkerFixture.token(1)
        let big = String(repeating: "x", count: 4100), bigger = String(repeating: "x", count: 5120)
        let cases: [(String, String)] = [
            (#"{"token":"\#(t)","collapse_id":"\#(String(repeating: "c", count: 65))","payload":{"a":1}}"#, "BadCollapseId"),
            (#"{"token":"\#(t)","apns_id":"not-a-uuid","payload":{"a":1}}"#, "BadMessageId"),
            (#"{"token":"\#(t)","expiration":-1,"payload":{"a":1}}"#, "BadExpirationDate"),
            (#"{"token":"\#(t)","push_type":"voip","topic":"com.example.app","payload":{"a":1}}"#, "BadTopic"),
            (#"{"token":"\#(t)","push_type":"alert","topic":"com.example.app.voip","payload":{"a":1}}"#, "BadTopic"),
            (#"{"token":"\#(t)","push_type":"background","priority":10,"payload":{"a":1}}"#, "BadPriority"),
            (#"{"token":"\#(t)","push_type":"pushtotalk","priority":5,"payload":{"a":1}}"#, "BadPriority"),
            (#"{"token":"\#(t)","push_type":"liveactivity","priority":1,"payload":{"a":1}}"#, "BadPriority"),
            (#"{"token":"\#(t)","priority":0,"payload":{"a":1}}"#, "BadPriority"),
            (#"{"token":"\#(t)","push_type":"news","payload":{"a":1}}"#, "InvalidPushType"),
            (#"{"token":"\#(t)","payload":{"a":"\#(big)"}}"#, "PayloadTooLarge"),
            (#"{"token":"\#(t)","push_type":"voip","payload":{"a":"\#(bigger)"}}"#, "PayloadTooLarge"),
            (#"{"token":"\#(t)","payload":{}}"#, "PayloadEmpty"),
            (#"{"token":"12345","payload":{"a":1}}"#, "BadDeviceToken"),
            (#"{"token":"","payload":{"a":1}}"#, "MissingDeviceToken"),
            (#"{"token":"\#(t)","topic":"com.someone.else","payload":{"a":1}}"#, "TopicDisallowed"),
            (#"{"token":"\#(t)","topic":"com.example.appx","payload":{"a":1}}"#, "TopicDisallowed"),
        ]
        try f.enqueue(cases.map(\.0))
        try f.waitForOutcomes(cases.count)
        XCTAssertEqual(try f.finalStats(), ["dead_lettered": cases.count])
        let dead = try f.records(f.keys.deadLetters)
        XCTAssertEqual(dead.map { $0["reason"] as? String ?? "" }.sorted(), cases.map(\.1).sorted())
        XCTAssertEqual(try f.mock.logEntries().count, 0, "nothing was sent")
    }
}
