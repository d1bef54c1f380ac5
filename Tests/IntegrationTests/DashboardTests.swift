import APNSCore
import Foundation
import QueueContract
import TestSupport
import XCTest

/// `apnsctl web` as a process against a real Redis and workers sending to the mock: what the
/// workers write for it, its API against `apnsctl --json`, and its security rules.
final class DashboardTests: XCTestCase {
    static let secret = "s3cret-s3cret-s3cret"

    /// Starts `apnsctl web` for the fixture's queue on a free port; returns it and the port.
    private func startWeb(_ f: WorkerFixture, _ extra: [String] = [], env: [String: String] = [:]) throws -> (ChildProcess, Int) {
        let out = f.directory.file("web-\(UInt32.random(in: 0...UInt32.max)).out")
        let redis = "\(f.redis.endpoint.host):\(f.redis.endpoint.port)"
        let web = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--redis", redis, "--queue", f.queue, "web", "--listen", "127.0.0.1:0"] + extra,
            environment: env, outputFile: out)
        let port = servedPort(web)
        XCTAssertNotNil(port, "apnsctl web did not start: \(web.output)")
        return (web, port ?? 0)
    }

    private func ctlJSON(_ f: WorkerFixture, _ args: [String]) throws -> Any {
        let out = f.directory.file("ctl-\(UInt32.random(in: 0...UInt32.max)).out")
        let p = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl",
            ["--redis", "\(f.redis.endpoint.host):\(f.redis.endpoint.port)", "--queue", f.queue, "--json"] + args,
            outputFile: out)
        XCTAssertEqual(p.wait(timeout: 30), 0, p.output)
        let line = p.output.split(separator: "\n").first { $0.hasPrefix("{") || $0.hasPrefix("[") } ?? ""
        return try JSONSerialization.jsonObject(with: Data(line.utf8))
    }

    private func getJSON(_ port: Int, _ path: String, headers: [String: String] = [:]) throws -> Any {
        let r = try XCTUnwrap(httpRequest(port: port, method: "GET", path: path, headers: headers))
        XCTAssertEqual(r.status, 200, r.body)
        return try JSONSerialization.jsonObject(with: Data(r.body.utf8))
    }

    func testWorkersWriteTheCounterHistoryAndTheirInfoAndRemoveTheirInfoWhenTheyStop() throws {
        let f = try WorkerFixture()
        let worker = try f.startWorker("dash-w1")
        try f.enqueue((0..<50).map { WorkerFixture.job($0) })
        try f.waitForOutcomes(50)
        let redis = try f.connect()
        var snapshots: [CounterHistory.Snapshot] = []
        XCTAssertTrue(
            waitUntil(timeout: 15) {
                snapshots = ((try? redis.command(["ZRANGE", f.keys.history, "0", "-1"]))?.array ?? []).compactMap {
                    $0.text.flatMap(CounterHistory.Snapshot.init(member:))
                }
                return snapshots.last?.delivered == 50
            }, "a snapshot with the 50 deliveries within two slots: \(snapshots)")
        // One snapshot per 10-second slot, whichever worker wrote it.
        XCTAssertEqual(Set(snapshots.map(\.slotMs)).count, snapshots.count)
        XCTAssertTrue(snapshots.allSatisfy { $0.slotMs % 10_000 == 0 })
        var info: [String: Any] = [:]
        XCTAssertTrue(
            waitUntil(timeout: 10) {
                guard let text = (try? redis.command(["HGET", f.keys.workerInfo, "dash-w1"]))?.text,
                    let o = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                    let apps = o["apps"] as? [[String: Any]], (apps.first?["connections"] as? Int ?? 0) > 0
                else { return false }
                info = o
                return true
            }, "the worker's info with a ready connection")
        XCTAssertEqual(info["worker"] as? String, "dash-w1")
        XCTAssertFalse((info["host"] as? String ?? "").isEmpty)
        let app = try XCTUnwrap((info["apps"] as? [[String: Any]])?.first)
        XCTAssertEqual(app["app"] as? String, "default")
        XCTAssertGreaterThan(app["stream_limit"] as? Int ?? 0, 0)
        XCTAssertNotNil(app["jwt_age_s"], "the JWT's age, never the JWT")
        let raw = try XCTUnwrap(try redis.command(["HGET", f.keys.workerInfo, "dash-w1"]).text)
        XCTAssertFalse(raw.contains("eyJ"), "no JWT in the worker's info: \(raw)")
        worker.signal(SIGTERM)
        XCTAssertEqual(worker.wait(timeout: 20), 0)
        XCTAssertEqual(try redis.command(["HEXISTS", f.keys.workerInfo, "dash-w1"]).integer, 0, "a stopped worker leaves no info behind")
    }

    func testTheAPIGivesWhatApnsctlJSONGives() throws {
        let f = try WorkerFixture { config in config.faults.tokens = [.init(tokenPrefix: "dead", status: 410)] }
        try f.startWorker("dash-w2")
        try f.enqueue((0..<20).map { WorkerFixture.job($0) } + [WorkerFixture.job(1, prefix: "dead"), #"{"id":"bad","tokens":"x"}"#])
        try f.waitForOutcomes(22)
        let (web, port) = try startWeb(f)
        defer { web.signal(SIGTERM) }
        let overview = try XCTUnwrap(try getJSON(port, "/api/overview") as? [String: Any])
        let stats = try XCTUnwrap(try ctlJSON(f, ["stats"]) as? [String: Any])
        for key in ["queue", "depth", "in_flight", "scheduled", "retries", "dead_letters", "shards", "queue_exists"] {
            XCTAssertEqual("\(overview[key] ?? "nil")", "\(stats[key] ?? "nil")", key)
        }
        XCTAssertEqual(overview["counters"] as? [String: Int], stats["counters"] as? [String: Int])
        XCTAssertEqual(overview["apps"] as? [String: [String: Int]], stats["apps"] as? [String: [String: Int]])
        XCTAssertEqual((overview["per_minute_last_hour"] as? [Any])?.count, 60)
        XCTAssertEqual((overview["per_minute_last_day"] as? [Any])?.count, 1440)
        let dead = try XCTUnwrap(try getJSON(port, "/api/dead") as? [String: Any])
        let listed = try XCTUnwrap(try ctlJSON(f, ["dead", "list"]) as? [[String: Any]])
        XCTAssertEqual(dead["matched"] as? Int, 1)
        XCTAssertEqual((dead["dead_letters"] as? [[String: Any]]).map { NSArray(array: $0) }, NSArray(array: listed))
        let tokens = try XCTUnwrap(try getJSON(port, "/api/tokens") as? [[String: Any]])
        XCTAssertEqual(NSArray(array: tokens), NSArray(array: try XCTUnwrap(try ctlJSON(f, ["tokens", "invalid"]) as? [[String: Any]])))
        let workers = try XCTUnwrap(try getJSON(port, "/api/workers") as? [[String: Any]])
        XCTAssertEqual(workers.map { $0["id"] as? String }, ["dash-w2"])
        XCTAssertEqual(workers.first?["alive"] as? Bool, true)
        let apps = try XCTUnwrap(try getJSON(port, "/api/apps") as? [[String: Any]])
        XCTAssertEqual(apps.first?["app"] as? String, "default")
        XCTAssertEqual((apps.first?["counters"] as? [String: Int])?["delivered"], 20)
        let missing = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/api/nothing"))
        XCTAssertEqual(missing.status, 404)
    }

    func testApnsctlWebRefusesToListenBeyondLoopbackWithoutASecret() throws {
        let f = try WorkerFixture()
        let redis = "\(f.redis.endpoint.host):\(f.redis.endpoint.port)"
        func run(_ args: [String], env: [String: String] = [:]) throws -> (Int32?, String) {
            let p = try ChildProcess(
                ChildProcess.productsDirectory + "/apnsctl", ["--redis", redis, "web"] + args, environment: env,
                outputFile: f.directory.file("refuse-\(UInt32.random(in: 0...UInt32.max)).out"))
            let code = p.wait(timeout: 5)
            if code == nil { p.signal(SIGKILL) }
            return (code, p.output)
        }
        let open = try run(["--listen", "0.0.0.0:0"])
        XCTAssertEqual(open.0, 2, "refused at start, not served: \(open.1)")
        XCTAssertTrue(open.1.contains("without authentication"), open.1)
        let short = try run(["--listen", "0.0.0.0:0"], env: ["APNSW_WEB_TOKEN": "short"])
        XCTAssertEqual(short.0, 2)
        XCTAssertTrue(short.1.contains("at least 16"), short.1)
        XCTAssertEqual(try run(["--listen", "nonsense"]).0, 2)
        XCTAssertEqual(try run(["--auth-file", f.directory.file("missing")]).0, 2)
        XCTAssertEqual(try run(["--listn", "127.0.0.1:0"]).0, 2, "a misspelt flag is refused")
    }

    func testBeyondLoopbackEverythingNeedsTheSecret() throws {
        let f = try WorkerFixture()
        try Self.secret.write(toFile: f.directory.file("secret"), atomically: true, encoding: .utf8)
        let redis = "\(f.redis.endpoint.host):\(f.redis.endpoint.port)"
        let web = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl",
            ["--redis", redis, "--queue", f.queue, "web", "--listen", "0.0.0.0:0", "--auth-file", f.directory.file("secret")],
            outputFile: f.directory.file("open.out"))
        defer { web.signal(SIGTERM) }
        let p = try XCTUnwrap(servedPort(web, host: "0.0.0.0"), web.output)
        XCTAssertEqual(httpRequest(port: p, method: "GET", path: "/api/overview")?.status, 401)
        XCTAssertEqual(httpRequest(port: p, method: "GET", path: "/")?.status, 303, "pages send to the sign-in form")
        XCTAssertEqual(httpRequest(port: p, method: "GET", path: "/api/overview", headers: ["Authorization": "Bearer \(Self.secret)"])?.status, 200)
        let basic = Data("ops:\(Self.secret)".utf8).base64EncodedString()
        XCTAssertEqual(httpRequest(port: p, method: "GET", path: "/api/overview", headers: ["Authorization": "Basic \(basic)"])?.status, 200)
        XCTAssertEqual(
            httpRequest(port: p, method: "GET", path: "/api/overview", headers: ["Authorization": "Bearer wrong-wrong-wrong-wrong"])?.status, 401)
    }

    func testActionsNeedTheSecretAndTheFormsCSRFTokenAndReadOnlyTurnsThemOff() throws {
        let f = try WorkerFixture()
        try f.startWorker()
        try f.enqueue([#"{"id":"x","token":"abc","payload":{"aps":{"alert":"<script>alert(1)</script>"}}}"#])
        try f.waitForOutcomes(1)
        let (web, port) = try startWeb(f, [], env: ["APNSW_WEB_TOKEN": Self.secret])
        defer { web.signal(SIGTERM) }
        let dead = try XCTUnwrap(try getJSON(port, "/api/dead") as? [String: Any])
        let id = try XCTUnwrap((dead["dead_letters"] as? [[String: Any]])?.first?["id"] as? String)
        // Shown escaped, with a CSP on every answer.
        let page = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/dead/show?id=\(id)"))
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "escaped")
        XCTAssertFalse(page.body.contains("<script>alert"), "never as markup")
        XCTAssertTrue(page.headers["content-security-policy"]?.contains("script-src 'self'") == true, "\(page.headers)")
        let form = ["Content-Type": "application/x-www-form-urlencoded"]
        // No authentication: refused, and the letter is still there.
        XCTAssertEqual(httpRequest(port: port, method: "POST", path: "/dead/purge", headers: form, body: "id=\(id)&confirm=1")?.status, 401)
        XCTAssertEqual(httpRequest(port: port, method: "POST", path: "/api/dead/requeue", headers: form, body: "id=\(id)")?.status, 401)
        // Basic auth without the form's CSRF token: refused too (a browser sends basic auth by itself).
        let basic = "Basic " + Data("ops:\(Self.secret)".utf8).base64EncodedString()
        XCTAssertEqual(
            httpRequest(
                port: port, method: "POST", path: "/dead/purge", headers: form.merging(["Authorization": basic]) { a, _ in a }, body: "id=\(id)")?
                .status, 403)
        // A signed-in session from another site: refused.
        let signIn = try XCTUnwrap(httpRequest(port: port, method: "POST", path: "/login", headers: form, body: "secret=\(Self.secret)"))
        XCTAssertEqual(signIn.status, 303)
        let cookie = try XCTUnwrap(signIn.headers["set-cookie"]?.components(separatedBy: ";").first)
        XCTAssertTrue(signIn.headers["set-cookie"]?.contains("HttpOnly; SameSite=Strict") == true)
        let shown = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/dead/show?id=\(id)", headers: ["Cookie": cookie]))
        let csrf = try XCTUnwrap(shown.body.components(separatedBy: "name=\"csrf\" value=\"").dropFirst().first?.prefix { $0 != "\"" })
        let signed = form.merging(["Cookie": cookie]) { a, _ in a }
        XCTAssertEqual(httpRequest(port: port, method: "POST", path: "/dead/purge", headers: signed, body: "id=\(id)&csrf=wrong")?.status, 403)
        XCTAssertEqual(
            httpRequest(
                port: port, method: "POST", path: "/dead/purge", headers: signed.merging(["Origin": "http://evil.example"]) { a, _ in a },
                body: "id=\(id)&csrf=\(csrf)")?.status, 403)
        XCTAssertEqual(try f.connect().command(["XLEN", f.keys.deadLetters]).integer, 1, "nothing refused touched the letter")
        // With the token: a purge asks once with the count, then goes ahead.
        let ask = try XCTUnwrap(httpRequest(port: port, method: "POST", path: "/dead/purge", headers: signed, body: "id=\(id)&csrf=\(csrf)"))
        XCTAssertTrue(ask.body.contains("Purge 1 dead letter?"), ask.body)
        let until = try XCTUnwrap(ask.body.components(separatedBy: "name=\"until\" value=\"").dropFirst().first?.prefix { $0 != "\"" })
        let done = try XCTUnwrap(
            httpRequest(port: port, method: "POST", path: "/dead/purge", headers: signed, body: "id=\(id)&csrf=\(csrf)&confirm=1&until=\(until)"))
        XCTAssertEqual(done.status, 303)
        XCTAssertEqual(try f.connect().command(["XLEN", f.keys.deadLetters]).integer, 0)
        // --read-only: no action at all, even with the secret.
        let (ro, roPort) = try startWeb(f, ["--read-only"], env: ["APNSW_WEB_TOKEN": Self.secret])
        defer { ro.signal(SIGTERM) }
        let refused = try XCTUnwrap(
            httpRequest(port: roPort, method: "POST", path: "/api/dead/purge", headers: ["Authorization": "Bearer \(Self.secret)"], body: "all=1"))
        XCTAssertEqual(refused.status, 403)
        XCTAssertTrue(refused.body.contains("read-only"), refused.body)
    }

    /// A sign-in link cannot put a header of its own into the answer, nor send the browser off
    /// the dashboard: `next` is a page of the dashboard or `/`, and every header value the server
    /// writes is checked in one place (issue 45, item 1: `next=/\r\nX-Injected: yes` went raw
    /// into Location, and a crafted link planted a cookie in a real browser).
    func testASignInLinkCannotInjectAHeaderOrLeaveTheDashboard() throws {
        let f = try WorkerFixture()
        let (web, port) = try startWeb(f, [], env: ["APNSW_WEB_TOKEN": Self.secret])
        defer { web.signal(SIGTERM) }
        let form = ["Content-Type": "application/x-www-form-urlencoded"]
        for (next, expected) in [
            ("%2F%0D%0AX-Injected%3A%20yes", "/"), ("%2Fdead%0D%0ASet-Cookie%3A%20planted%3D1", "/"), ("%2F%2Fevil.example%2Fx", "/"),
            ("https%3A%2F%2Fevil.example", "/"), ("%2Fnowhere", "/"), ("%2Fdead%3Freason%3DBadDeviceToken", "/dead?reason=BadDeviceToken"),
        ] {
            let r = try XCTUnwrap(
                httpRequest(port: port, method: "POST", path: "/login", headers: form, body: "secret=\(Self.secret)&next=\(next)"))
            XCTAssertEqual(r.status, 303, next)
            XCTAssertEqual(r.headers["location"], expected, next)
            XCTAssertNil(r.headers["x-injected"], next)
            XCTAssertFalse(r.headers["set-cookie"]?.contains("planted") ?? false, next)
        }
        let page = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/login?next=%2F%0D%0ASet-Cookie%3A%20planted%3D1"))
        XCTAssertEqual(page.status, 200)
        XCTAssertNil(page.headers["x-injected"])
        XCTAssertTrue(page.body.contains(#"<input type="hidden" name="next" value="/">"#), "the form carries / instead: \(page.body)")
    }

    /// Wrong secrets are braked per client address by every method, without holding a
    /// connection, and an address that keeps guessing is locked out for a while, which is
    /// logged (issue 45, item 2: only the form waited 300 ms, holding a connection slot; Bearer
    /// and basic guesses were answered at once). HEAD answers carry no body (item 7).
    func testWrongSecretsAreBrakedByEveryMethodAndLockTheAddressOut() throws {
        let f = try WorkerFixture()
        let (web, port) = try startWeb(f, [], env: ["APNSW_WEB_TOKEN": Self.secret])
        defer { web.signal(SIGTERM) }
        let basic = "Basic " + Data("ops:wrong".utf8).base64EncodedString()
        var checked = 0, braked = 0
        let started = Date()
        for i in 0..<30 {
            let auth = i % 3 == 0 ? basic : "Bearer wrong-guess-\(i)"
            let r = try XCTUnwrap(httpRequest(port: port, method: "POST", path: "/api/dead/purge", headers: ["Authorization": auth], body: ""))
            if r.status == 401 { checked += 1 } else if r.status == 429 { braked += 1 }
            XCTAssertTrue([401, 429].contains(r.status), "\(r.status) \(r.body)")
            if r.status == 429 { XCTAssertNotNil(r.headers["retry-after"]) }
        }
        let form = try XCTUnwrap(
            httpRequest(
                port: port, method: "POST", path: "/login", headers: ["Content-Type": "application/x-www-form-urlencoded"], body: "secret=nope"))
        XCTAssertEqual(form.status, 429, "the form is braked with the rest")
        let elapsed = Date().timeIntervalSince(started)
        print("30 wrong secrets in \(Int(elapsed * 1000)) ms: \(checked) checked, \(braked) refused before checking")
        XCTAssertLessThanOrEqual(checked, 3, "a guess checked only after the address waited")
        XCTAssertLessThan(elapsed, 5, "refusals hold no connection for a wait")
        // Locked out now: even the right secret waits, and the log says so.
        let right = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/api/overview", headers: ["Authorization": "Bearer \(Self.secret)"]))
        XCTAssertEqual(right.status, 429)
        XCTAssertTrue(right.body.contains("too many wrong secrets"), right.body)
        XCTAssertTrue(waitUntil(timeout: 5) { web.output.contains("locked out for 15 minutes") }, web.output)
        // Reading without a secret on loopback is not braked; HEAD has the head alone.
        let head = try XCTUnwrap(httpRequest(port: port, method: "HEAD", path: "/api/overview"))
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.body, "", "no body for HEAD")
        XCTAssertGreaterThan(Int(head.headers["content-length"] ?? "0") ?? 0, 0)
    }

    func testAShardedQueueShowsEachKeySetAndChartsTheirSum() throws {
        let f = try WorkerFixture(settings: ["shards": 2])
        try f.startWorker("dash-shards")
        try f.enqueue((0..<10).map { WorkerFixture.job($0) }, to: f.keySets[1].jobs)
        try f.enqueue((10..<25).map { WorkerFixture.job($0) }, to: f.keySets[2].jobs)
        try f.waitForOutcomes(25)
        let (web, port) = try startWeb(f, ["--shards", "2"])
        defer { web.signal(SIGTERM) }
        var hour: [[String: Any]] = []
        XCTAssertTrue(
            waitUntil(timeout: 15) {
                let o = (try? getJSON(port, "/api/overview")) as? [String: Any]
                hour = o?["per_minute_last_hour"] as? [[String: Any]] ?? []
                return hour.reduce(0) { $0 + ($1["delivered"] as? Int ?? 0) } == 25
            }, "the chart sums both shards' deliveries: \(hour.filter { ($0["delivered"] as? Int ?? 0) > 0 })")
        let overview = try XCTUnwrap(try getJSON(port, "/api/overview") as? [String: Any])
        let sets = try XCTUnwrap(overview["key_sets"] as? [[String: Any]])
        XCTAssertEqual(sets.map { $0["keys"] as? String }, [f.queue, f.queue + ".0", f.queue + ".1"])
        XCTAssertEqual((overview["counters"] as? [String: Int])?["delivered"], 25)
        let page = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/"))
        XCTAssertTrue(page.body.contains("{\(f.queue).1}"), "each shard has its row")
    }

    func testTheChannelsPageListsAnAppsChannelsAtAPNs() throws {
        let f = try WorkerFixture()
        let redis = "\(f.redis.endpoint.host):\(f.redis.endpoint.port)"
        let made = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "--redis", redis, "channels", "create", "--json"],
            outputFile: f.directory.file("create.out"))
        XCTAssertEqual(made.wait(timeout: 30), 0, made.output)
        let channel = try XCTUnwrap(
            (try JSONSerialization.jsonObject(with: Data(made.output.utf8)) as? [String: Any])?["channel"] as? String)
        let (web, port) = try startWeb(f, ["--config", f.configFile])
        defer { web.signal(SIGTERM) }
        let page = try XCTUnwrap(httpRequest(port: port, method: "GET", path: "/channels?list=default"))
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.body.contains("id=\"channel-list\""), page.body)
        XCTAssertTrue(page.body.contains(channel), "the channel APNs lists")
    }
}
