import Foundation
import TLS
import TestSupport
import XCTest

/// Credentials that change without a restart (issue 31, item 6): SIGHUP or a change to the
/// settings file reloads the apps and keys; nothing in flight is lost, a rotated key serves new
/// connections, a removed app's jobs wait, and settings that do not load change nothing.
final class ReloadTests: XCTestCase {
    private func makeKey(_ id: String, in dir: TemporaryDirectory) throws -> (p8: String, pub: String) {
        let key = try ES256PrivateKey()
        let p8 = dir.file("\(id).p8"), pub = dir.file("\(id).pub.pem")
        try key.pkcs8PEM().write(toFile: p8, atomically: true, encoding: .utf8)
        chmod(p8, 0o600)
        try key.publicKeyPEM().write(toFile: pub, atomically: true, encoding: .utf8)
        return (p8, pub)
    }

    private func app(_ f: WorkerFixture, name: String = "default", keyID: String? = nil, keyFile: String? = nil) -> [String: Any] {
        [
            "name": name, "bundle_id": f.mock.files.topic,
            "token": ["team_id": f.mock.files.teamID, "key_id": keyID ?? f.mock.files.keyID, "key_file": keyFile ?? f.mock.files.p8File],
        ]
    }

    private func waitForLog(_ w: ChildProcess, _ text: String, count: Int = 1, file: StaticString = #filePath, line: UInt = #line) {
        let ok = waitUntil(timeout: 20) { w.output.components(separatedBy: text).count > count }
        XCTAssertTrue(ok, "no \"\(text)\" in the worker's log:\n\(w.output.suffix(3000))", file: file, line: line)
    }

    func testASIGHUPThatRotatesTheKeyKeepsTwentyThousandJobsFlowing() throws {
        let dir = try TemporaryDirectory("apnsw-reload")
        let rotated = try makeKey("ROTATED001", in: dir)
        var k1 = ""
        let f = try WorkerFixture { config in
            k1 = config.keys[0].keyID
            config.keys.append(.init(keyID: "ROTATED001", teamID: config.keys[0].teamID, publicKey: rotated.pub, topics: config.keys[0].topics))
        }
        let w = try f.startWorker()
        let total = 20_000
        let jobs = (0..<total).map { WorkerFixture.job($0) }
        try f.enqueue(Array(jobs[..<10_000]))
        XCTAssertTrue(try waitUntil(timeout: 60) { try f.finalOutcomes() >= 2000 }, "the first jobs go out")
        _ = try WorkerFixture.reconfigure(f, ["apps": [app(f, keyID: "ROTATED001", keyFile: rotated.p8)]])
        w.signal(SIGHUP)
        try f.enqueue(Array(jobs[10_000...]))
        waitForLog(w, "reloaded the apps")
        try f.waitForOutcomes(total, timeout: 120)
        XCTAssertEqual(try f.finalStats(), ["delivered": total], "every job delivered, none lost")
        try f.assertOneResultEach(total)
        XCTAssertTrue(w.output.contains("changed\":\"default"), String(w.output.suffix(2000)))
        waitForLog(w, "closed a retired pool")

        // The old key is revoked: new jobs go with the rotated one, on its connections.
        f.mock.server.revoke(keyID: k1)
        try f.enqueue((total..<total + 200).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(total + 200)
        XCTAssertEqual(try f.finalStats(), ["delivered": total + 200])
        let log = try f.mock.logEntries()  // stops the mock
        XCTAssertEqual(log.count, total + 200, "nothing sent twice, nothing refused")
        XCTAssertTrue(log.contains { $0["key_id"] as? String == k1 }, "the first jobs went with the old key")
        XCTAssertTrue(log.suffix(200).allSatisfy { $0["key_id"] as? String == "ROTATED001" && $0["status"] as? Int == 200 })
        XCTAssertEqual(try f.acceptedTwice(), 0, "no notification sent twice")
    }

    func testAReloadThatDoesNotLoadChangesNothing() throws {
        let f = try WorkerFixture()
        let w = try f.startWorker()
        try f.enqueue((0..<5).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(5)
        let good = try String(contentsOfFile: f.configFile, encoding: .utf8)

        try "{ this is not json".write(toFile: f.configFile, atomically: true, encoding: .utf8)
        w.signal(SIGHUP)
        waitForLog(w, "reload refused")
        _ = try WorkerFixture.reconfigure(
            f.restoring(good), ["apps": [app(f, keyID: "MISSING001", keyFile: "/nonexistent/AuthKey_MISSING001.p8")]])
        w.signal(SIGHUP)
        waitForLog(w, "AuthKey_MISSING001.p8")  // the error names the file to fix
        XCTAssertFalse(w.output.contains("reloaded the apps"), String(w.output.suffix(2000)))

        try f.enqueue((5..<25).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(25)
        XCTAssertEqual(try f.finalStats(), ["delivered": 25], "the old settings still send")
        XCTAssertTrue(try f.mock.logEntries().allSatisfy { $0["key_id"] as? String == f.mock.files.keyID })
        XCTAssertNil(w.wait(timeout: 0.1), "the worker keeps running")
    }

    func testAFileChangeAddsAnAppAndARemovedAppsJobsWaitForIt() throws {
        let f = try WorkerFixture()
        let w = try f.startWorker()
        try f.enqueue([WorkerFixture.job(0)])
        try f.waitForOutcomes(1)

        // No signal: the watch sees the file change.
        _ = try WorkerFixture.reconfigure(f, ["apps": [app(f), app(f, name: "second")]])
        waitForLog(w, "added\":\"second")
        try f.enqueue([WorkerFixture.job(1, extra: #","app":"second""#)])
        try f.waitForOutcomes(2)
        XCTAssertEqual(try f.finalStats(), ["delivered": 2])

        _ = try WorkerFixture.reconfigure(f, ["apps": [app(f)]])
        waitForLog(w, "removed\":\"second")
        try f.enqueue([WorkerFixture.job(2, extra: #","app":"second""#), WorkerFixture.job(3)])
        XCTAssertTrue(try waitUntil(timeout: 20) { try f.stats()["deferred"] == 1 }, "the job waits in the schedule")
        try f.waitForOutcomes(3)
        XCTAssertEqual(try f.finalStats(), ["delivered": 3], "the removed app's job is not dead-lettered")
        let r = try f.connect()
        let waiting = try r.command(["ZRANGE", f.keys.scheduled, "0", "-1"]).array.compactMap(\.text)
        XCTAssertEqual(waiting.count, 1)
        XCTAssertTrue(waiting.first?.contains("job-2") == true, "\(waiting)")

        // The app comes back: its job goes out when its wait ends (made due now).
        _ = try WorkerFixture.reconfigure(f, ["apps": [app(f), app(f, name: "second")]])
        waitForLog(w, "added\":\"second", count: 2)
        _ = try r.command(["ZADD", f.keys.scheduled, "XX", "0", waiting[0]])
        try f.waitForOutcomes(4)
        XCTAssertEqual(try f.finalStats(), ["delivered": 4])
        try f.assertOneResultEach(4)
    }
}

extension WorkerFixture {
    /// This fixture with its settings file put back to `text`.
    fileprivate func restoring(_ text: String) throws -> WorkerFixture {
        try text.write(toFile: configFile, atomically: true, encoding: .utf8)
        return self
    }
}
