import Foundation
import TLS
import TestSupport
import XCTest

/// Scoped keys (issue 31, item 5): an app of several token keys sends each job with the key that
/// serves its topic in its environment, on connections of that key alone; the mock refuses a key
/// of the other environment, a topic key outside its topics, and unrelated keys on one connection.
final class ScopedKeyTests: XCTestCase {
    struct Key {
        let id: String, p8: String, pub: String
    }

    /// A key pair of the fixture's team, written into `dir`.
    private func makeKey(_ id: String, in dir: TemporaryDirectory) throws -> Key {
        let key = try ES256PrivateKey()
        let p8 = dir.file("\(id).p8"), pub = dir.file("\(id).pub.pem")
        try key.pkcs8PEM().write(toFile: p8, atomically: true, encoding: .utf8)
        chmod(p8, 0o600)
        try key.publicKeyPEM().write(toFile: pub, atomically: true, encoding: .utf8)
        return Key(id: id, p8: p8, pub: pub)
    }

    func testEachJobGoesWithTheKeyForItsTopicAndEnvironment() throws {
        let dir = try TemporaryDirectory("apnsw-keys")
        let sandbox = try makeKey("SANDBOX001", in: dir), prod = try makeKey("PRODKEY001", in: dir), clip = try makeKey("CLIPKEY001", in: dir)
        var team = ""
        let f = try WorkerFixture { config in
            team = config.keys[0].teamID
            let bundle = config.keys[0].topics[0]
            config.keys += [
                .init(keyID: sandbox.id, teamID: team, publicKey: sandbox.pub, topics: [bundle], environment: "development"),
                .init(keyID: prod.id, teamID: team, publicKey: prod.pub, topics: [bundle], environment: "production"),
                .init(keyID: clip.id, teamID: team, publicKey: clip.pub, topics: [bundle + ".clip"], environment: "production", scope: "topic"),
            ]
        }
        let bundle = f.mock.files.topic
        func token(_ k: Key, _ extra: [String: Any] = [:]) -> [String: Any] {
            ["team_id": team, "key_id": k.id, "key_file": k.p8].merging(extra) { $1 }
        }
        _ = try WorkerFixture.reconfigure(
            f,
            [
                "apps": [
                    [
                        "name": "default", "bundle_id": bundle, "environment": "production",
                        "tokens": [
                            token(sandbox, ["environment": "development"]), token(prod, ["environment": "production"]),
                            token(clip, ["environment": "production", "topics": [bundle + ".clip"]]),
                        ],
                    ]
                ]
            ])
        let check = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "check-config"], outputFile: f.directory.file("check.out"))
        XCTAssertEqual(check.wait(timeout: 30), 0, check.output)
        XCTAssertTrue(check.output.contains("key CLIPKEY001 serves \(bundle).clip in production"), check.output)
        XCTAssertTrue(check.output.contains("key PRODKEY001 serves every topic in production"), check.output)
        XCTAssertTrue(check.output.contains("key SANDBOX001") && check.output.contains("never used"), check.output)

        try f.startWorker()
        var jobs: [String] = []
        for i in 0..<30 { jobs.append(WorkerFixture.job(i)) }
        for i in 30..<60 { jobs.append(WorkerFixture.job(i, extra: #","topic":"\#(bundle).clip""#)) }
        for i in 60..<70 { jobs.append(WorkerFixture.job(i, extra: #","topic":"\#(bundle).clip.voip","push_type":"voip""#)) }
        try f.enqueue(jobs)
        try f.waitForOutcomes(70)
        XCTAssertEqual(try f.finalStats(), ["delivered": 70])
        var keysByConnection: [Int: Set<String>] = [:]
        for e in try f.mock.logEntries() where e["status"] as? Int == 200 {
            let topic = (e["headers"] as? [String: String])?["apns-topic"] ?? ""
            let key = e["key_id"] as? String ?? "?"
            XCTAssertEqual(key, topic.hasPrefix(bundle + ".clip") ? clip.id : prod.id, "topic \(topic)")
            keysByConnection[e["conn"] as! Int, default: []].insert(key)
        }
        XCTAssertTrue(keysByConnection.values.allSatisfy { $0.count == 1 }, "a connection never mixes keys: \(keysByConnection)")
        XCTAssertGreaterThanOrEqual(keysByConnection.count, 2)

        // An app whose only key is a topic key has no key for its own bundle.
        _ = try WorkerFixture.reconfigure(
            f,
            [
                "apps": [
                    ["name": "default", "bundle_id": bundle, "tokens": [token(clip, ["environment": "production", "topics": [bundle + ".clip"]])]]
                ]
            ])
        let warned = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "check-config"], outputFile: f.directory.file("check2.out"))
        _ = warned.wait(timeout: 30)
        XCTAssertTrue(warned.output.contains("no key serves topic \(bundle) in production"), warned.output)
    }

    /// An app with a topic key for its bundle and one for its App Clip sends each topic with the
    /// key that serves it: the bundle's key covers the bundle's push-type topics, not the clip's
    /// (issue 43, item 3: the clip's jobs went with the bundle's key, and APNs refused them).
    func testTheClipsTopicGoesWithTheClipsKeyNotTheBundles() throws {
        let dir = try TemporaryDirectory("apnsw-keys")
        let app = try makeKey("BUNDLEKEY1", in: dir), clip = try makeKey("CLIPKEY003", in: dir)
        var team = ""
        let f = try WorkerFixture { config in
            team = config.keys[0].teamID
            let bundle = config.keys[0].topics[0]
            config.keys += [
                .init(keyID: app.id, teamID: team, publicKey: app.pub, topics: [bundle], scope: "topic"),
                .init(keyID: clip.id, teamID: team, publicKey: clip.pub, topics: [bundle + ".clip"], scope: "topic"),
            ]
        }
        let bundle = f.mock.files.topic
        _ = try WorkerFixture.reconfigure(
            f,
            [
                "apps": [
                    [
                        "name": "default", "bundle_id": bundle,
                        "tokens": [
                            ["team_id": team, "key_id": app.id, "key_file": app.p8, "topics": [bundle]],
                            ["team_id": team, "key_id": clip.id, "key_file": clip.p8, "topics": [bundle + ".clip"]],
                        ],
                    ]
                ]
            ])
        let check = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "check-config"], outputFile: f.directory.file("check.out"))
        XCTAssertEqual(check.wait(timeout: 30), 0, check.output)
        XCTAssertFalse(check.output.contains("not a topic of bundle"), check.output)
        try f.startWorker()
        var jobs: [String] = []
        for i in 0..<10 { jobs.append(WorkerFixture.job(i)) }
        for i in 10..<20 { jobs.append(WorkerFixture.job(i, extra: #","topic":"\#(bundle).voip","push_type":"voip""#)) }
        for i in 20..<30 { jobs.append(WorkerFixture.job(i, extra: #","topic":"\#(bundle).clip""#)) }
        for i in 30..<40 { jobs.append(WorkerFixture.job(i, extra: #","topic":"\#(bundle).clip.voip","push_type":"voip""#)) }
        try f.enqueue(jobs)
        try f.waitForOutcomes(40)
        XCTAssertEqual(try f.finalStats(), ["delivered": 40])
        for e in try f.mock.logEntries() {
            let topic = (e["headers"] as? [String: String])?["apns-topic"] ?? ""
            XCTAssertEqual(e["status"] as? Int, 200, "\(topic): \(e)")
            XCTAssertEqual(e["key_id"] as? String, topic.hasPrefix(bundle + ".clip") ? clip.id : app.id, "topic \(topic)")
        }
    }

    func testATopicWithNoKeyIsDeadLetteredAndOnlyKeysOfTheEnvironmentRun() throws {
        let dir = try TemporaryDirectory("apnsw-keys")
        let clip = try makeKey("CLIPKEY002", in: dir), sandbox = try makeKey("SANDBOX002", in: dir)
        var team = ""
        let f = try WorkerFixture { config in
            team = config.keys[0].teamID
            config.keys += [
                .init(keyID: clip.id, teamID: team, publicKey: clip.pub, topics: [config.keys[0].topics[0] + ".clip"], scope: "topic"),
                .init(keyID: sandbox.id, teamID: team, publicKey: sandbox.pub, topics: config.keys[0].topics, environment: "development"),
            ]
        }
        let bundle = f.mock.files.topic
        _ = try WorkerFixture.reconfigure(
            f,
            [
                "apps": [
                    [
                        "name": "default", "bundle_id": bundle,
                        "tokens": [
                            ["team_id": team, "key_id": clip.id, "key_file": clip.p8, "topics": [bundle + ".clip"]],
                            ["team_id": team, "key_id": sandbox.id, "key_file": sandbox.p8, "environment": "development"],
                        ],
                    ]
                ]
            ])
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(1), WorkerFixture.job(2, extra: #","topic":"\#(bundle).clip""#)])
        try f.waitForOutcomes(2)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1, "dead_lettered": 1])
        let dead = try f.records(f.keys.deadLetters)
        XCTAssertEqual(dead.first?["reason"] as? String, "NoKeyForTopic")
        XCTAssertTrue((dead.first?["detail"] as? String ?? "").contains("no key for topic \(bundle)"), "\(dead)")
        XCTAssertFalse(try f.mock.logEntries().contains { $0["key_id"] as? String == sandbox.id }, "a sandbox key never goes to production")

        // A configuration whose keys all serve the other environment is refused at start.
        _ = try WorkerFixture.reconfigure(
            f,
            [
                "apps": [
                    [
                        "name": "default", "bundle_id": bundle,
                        "tokens": [["team_id": team, "key_id": sandbox.id, "key_file": sandbox.p8, "environment": "development"]],
                    ]
                ]
            ])
        let refused = try f.startWorker("refused")
        XCTAssertEqual(refused.wait(timeout: 30), 2)
        XCTAssertTrue(refused.output.contains("no key serves production"), refused.output)
    }

    /// UnrelatedKeyIdInToken opens a new connection: the notification is sent again there,
    /// never on the connection that refused it, and costs no attempt.
    func testUnrelatedKeyIdInTokenIsSentAgainOnANewConnection() throws {
        let f = try WorkerFixture { $0.faults.tokens = [.init(tokenPrefix: "ee", status: 403, reason: "UnrelatedKeyIdInToken", attempts: 1)] }
        try f.startWorker()
        try f.enqueue([WorkerFixture.job(1, prefix: "ee"), WorkerFixture.job(2)])
        try f.waitForOutcomes(2)
        XCTAssertEqual(try f.finalStats(), ["delivered": 2])
        let tries = try f.mock.logEntries().filter { ($0["token"] as? String)?.hasPrefix("ee") == true }
        XCTAssertEqual(tries.map { $0["status"] as? Int }, [403, 200])
        XCTAssertNotEqual(tries[0]["conn"] as? Int, tries[1]["conn"] as? Int, "not retried on the same connection")
        let result = try f.records(f.keys.results).first { $0["job_id"] as? String == "job-1" }
        XCTAssertEqual(result?["attempts"] as? Int, 1, "the refusal cost no attempt")
    }
}
