import Foundation
import RedisClient
import TestSupport
import XCTest

/// A worker and apnsctl as an ACL user with the least rules docs/redis-contract.md gives, and
/// nothing else (issue 30, item 2): every step of a job's life runs, and Redis denies nothing.
final class RedisACLTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// The documented `ACL SETUSER` line, with the password filled in.
    private func documentedRule(password: String) throws -> [String] {
        let doc = try String(contentsOfFile: root + "/docs/redis-contract.md", encoding: .utf8)
        let line = try XCTUnwrap(doc.split(separator: "\n").first { $0.hasPrefix("ACL SETUSER apnsw ") })
        return line.split(separator: " ").map { $0 == ">PASSWORD" ? ">" + password : String($0) }
    }

    func testAWorkerAndApnsctlRunAsTheLeastACLUser() throws {
        let admin = "admin-\(UInt32.random(in: 0...UInt32.max))", password = "pw-\(UInt32.random(in: 0...UInt32.max))"
        let redis = try TestRedis(dedicated: true, password: admin)
        let r = try redis.connect()
        XCTAssertEqual(try r.command(try documentedRule(password: password)), .status("OK"))
        _ = try r.command(["ACL", "LOG", "RESET"])
        // The fixture's own calls (enqueue, reading records) go as the admin; the worker as apnsw.
        let f = try WorkerFixture(
            redis: redis,
            settings: [
                "redis": ["host": redis.endpoint.host, "port": redis.endpoint.port, "username": "apnsw", "password": password],
                "lease_ms": 1000,
            ]
        ) { config in
            config.faults.tokens = [.init(tokenPrefix: "429", status: 429, attempts: 1), .init(tokenPrefix: "dead", status: 410)]
        }
        let fanout = #"{"id":"fan","tokens":["\#(WorkerFixture.token(1))","\#(WorkerFixture.token(2))"],"payload":{"aps":{"alert":"x"}}}"#
        let scheduled =
            #"{"id":"later","token":"\#(WorkerFixture.token(3))","send_at":\#(Int(Date().timeIntervalSince1970) + 1),"payload":{"aps":{"alert":"x"}}}"#
        // Two jobs with one idempotency key: the claim script's GET and SET run as the user too.
        let keyed = (4...5).map {
            #"{"id":"keyed-\#($0)","idempotency_key":"acl-key","token":"\#(WorkerFixture.token($0))","payload":{"aps":{"alert":"x"}}}"#
        }
        try f.enqueue(
            (0..<200).map { WorkerFixture.job($0) } + (0..<5).map { WorkerFixture.job($0, prefix: "429") }
                + (0..<5).map { WorkerFixture.job($0, prefix: "dead") } + ["not json", fanout, scheduled] + keyed)
        let w = try f.startWorker("w-acl")
        try f.waitForOutcomes(200 + 5 + 5 + 1 + 2 + 1 + 2, timeout: 60)
        XCTAssertEqual(try f.stats()["duplicate"], 1, "one of the keyed pair is a duplicate")
        w.signal(SIGTERM)
        XCTAssertEqual(w.wait(timeout: 20), 0, w.output)

        // apnsctl as the same user, from the environment.
        let out = f.directory.file("ctl.out")
        let env = [
            "APNSW_REDIS_HOST": redis.endpoint.host, "APNSW_REDIS_PORT": String(redis.endpoint.port), "APNSW_REDIS_USERNAME": "apnsw",
            "APNSW_REDIS_PASSWORD": password, "APNSW_QUEUE": f.queue,
        ]
        for args in [["stats"], ["dead", "list"], ["tokens", "invalid"]] {
            let p = try ChildProcess(ChildProcess.productsDirectory + "/apnsctl", args, environment: env, outputFile: out)
            XCTAssertEqual(p.wait(timeout: 30), 0, "\(args): \(p.output)")
        }
        // The dashboard's data, written by the worker as this user, and apnsctl web reading and purging as it.
        XCTAssertGreaterThan(try r.command(["ZCARD", f.keys.history]).integer ?? 0, 0, "the worker wrote the counter history")
        let secret = "acl-dashboard-secret-0"
        let web = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["web", "--listen", "127.0.0.1:0"],
            environment: env.merging(["APNSW_WEB_TOKEN": secret]) { a, _ in a }, outputFile: f.directory.file("web.out"))
        defer { web.signal(SIGTERM) }
        let port = servedPort(web)
        XCTAssertNotNil(port, web.output)
        for path in ["/api/overview", "/api/workers", "/api/apps", "/api/dead", "/api/tokens", "/", "/workers", "/apps", "/dead", "/tokens"] {
            XCTAssertEqual(httpRequest(port: port ?? 0, method: "GET", path: path)?.status, 200, path)
        }
        let bearer = ["Authorization": "Bearer \(secret)"]
        let ask = try XCTUnwrap(httpRequest(port: port ?? 0, method: "POST", path: "/api/dead/purge", headers: bearer, body: ""))
        XCTAssertEqual(ask.status, 409, ask.body)
        let answer = try JSONSerialization.jsonObject(with: Data(ask.body.utf8)) as? [String: Any]
        let count = try XCTUnwrap(answer?["would_purge"] as? Int), until = try XCTUnwrap(answer?["until"] as? Int)
        let purged = httpRequest(port: port ?? 0, method: "POST", path: "/api/dead/purge", headers: bearer, body: "confirm=\(count)&until=\(until)")
        XCTAssertEqual(purged?.status, 200, purged?.body ?? "")
        let p = try ChildProcess(ChildProcess.productsDirectory + "/apnsctl", ["dead", "purge", "--all", "--yes"], environment: env, outputFile: out)
        XCTAssertEqual(p.wait(timeout: 30), 1, "the dashboard purged them all already: \(p.output)")
        let denied = try r.command(["ACL", "LOG"]).array
        XCTAssertEqual(denied.count, 0, "Redis denied nothing: \(denied)")
        XCTAssertTrue(w.output.contains("redis://apnsw@"), "the user, never the password, in the logs")
        XCTAssertFalse(w.output.contains(password))
    }
}
