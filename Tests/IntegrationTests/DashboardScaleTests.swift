import Foundation
import QueueContract
import RedisClient
import TestSupport
import XCTest

/// `apnsctl web` at production sizes (issue 45, items 4 and 5): every list pages with a
/// cursor, a count is the real count, the CSV export holds every row, and every page answers
/// without reading whole streams. The records are written straight into Redis, as workers
/// write them, across a 2-shard queue's three key sets.
final class DashboardScaleTests: XCTestCase {
    /// Writes `count` records into `stream` of each key set in turn (a script of 50,000 XADDs
    /// at a time): dead letters of six reasons, results, or invalid tokens.
    private func seed(_ r: TestRedis, _ sets: [QueueKeys], _ stream: KeyPath<QueueKeys, String>, count: Int, kind: String) throws {
        let script = RedisScript(
            """
            local reasons = {'BadDeviceToken', 'WrongFieldType', 'PayloadTooLarge', 'TimedOut', 'Expired', 'PoisonPill'}
            local first, n = tonumber(ARGV[1]), tonumber(ARGV[2])
            for i = first, first + n - 1 do
              local rec
              if ARGV[3] == 'd' then
                rec = '{"job_id":"job-' .. i .. '","status":"dead_letter","reason":"' .. reasons[i % 6 + 1] .. '","app":"default",'
                  .. '"token":"' .. string.format('%064d', i) .. '","detail":"the job was refused: see its reason","attempts":[],'
                  .. '"job":{"id":"job-' .. i .. '","token":"' .. string.format('%064d', i) .. '","payload":{"aps":{"alert":"Hello there, number ' .. i .. '"}}}}'
              elseif ARGV[3] == 'r' then
                rec = '{"job_id":"job-' .. i .. '","status":"ok","app":"default","apns_id":"00000000-0000-0000-0000-' .. string.format('%012d', i) .. '"}'
              else
                rec = '{"token":"' .. string.format('%064d', i) .. '","app":"default","topic":"com.example","reason":"'
                  .. (i % 3 == 0 and 'BadDeviceToken' or 'Unregistered') .. '","apns_timestamp":1764650000000}'
              end
              redis.call('XADD', KEYS[1], '*', 'record', rec)
            end
            return n
            """)
        let c = try r.connect()
        var written = 0
        while written < count {
            let n = min(50_000, count - written)
            let set = sets[(written / 50_000) % sets.count]
            _ = try c.run(script, keys: [set[keyPath: stream]], args: [String(written), String(n), kind].map { Array($0.utf8) })
            written += n
        }
    }

    private func startWeb(_ redis: TestRedis, queue: String, directory: TemporaryDirectory) throws -> (ChildProcess, Int) {
        let web = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl",
            ["--redis", "\(redis.endpoint.host):\(redis.endpoint.port)", "--queue", queue, "--shards", "2", "web", "--listen", "127.0.0.1:0"],
            outputFile: directory.file("web.out"))
        let port = servedPort(web)
        XCTAssertNotNil(port, "apnsctl web did not start: \(web.output)")
        return (web, port ?? 0)
    }

    private func get(_ port: Int, _ path: String) throws -> (status: Int, headers: [String: String], body: String) {
        let r = try XCTUnwrap(httpRequest(port: port, method: "GET", path: path, timeout: 60), path)
        XCTAssertEqual(r.status, 200, "\(path): \(r.body.prefix(300))")
        return r
    }

    private func ids(_ body: String) throws -> [String] {
        let rows = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] ?? []
        return rows.compactMap { $0["id"] as? String }
    }

    /// 13,012 invalid tokens (the page said 10,000, the CSV held 10,000 and the API answered
    /// 500 on `46f7dad`) and 1,234 dead letters: each list and API pages through all of them
    /// with `before`, each record once, and says how many there are.
    func testEveryListPagesWithACursorAndCountsEverything() throws {
        let redis = try TestRedis()
        let queue = "scale\(UInt32.random(in: 0...UInt32.max))"
        let sets = QueueKeys.served(queue: queue, shards: 2)
        defer { for s in sets { _ = try? redis.connect().command(["UNLINK", s.invalidTokens, s.deadLetters]) } }
        let directory = try TemporaryDirectory("apnsw-scale")
        for (n, set) in sets.enumerated() {
            try seed(redis, [set], \.invalidTokens, count: [5000, 5000, 3012][n], kind: "t")
            try seed(redis, [set], \.deadLetters, count: [500, 500, 234][n], kind: "d")
        }
        let (web, port) = try startWeb(redis, queue: queue, directory: directory)
        defer { web.signal(SIGTERM) }

        XCTAssertTrue(try get(port, "/tokens").body.contains("13,012</b> invalid tokens"), "the page counts them all")
        var seen: [String] = []
        var path: String? = "/api/tokens?limit=1000"
        while let next = path {
            let r = try get(port, next)
            XCTAssertEqual(r.headers["x-total-count"], "13012")
            seen += try ids(r.body)
            path = r.headers["link"].flatMap { $0.split(separator: ">").first.map { String($0.dropFirst()) } }
        }
        XCTAssertEqual(seen.count, 13_012, "every token, each once, through the API's pages")
        XCTAssertEqual(Set(seen).count, 13_012)
        let csv = try get(port, "/tokens.csv").body
        XCTAssertEqual(csv.split(separator: "\r\n").count, 13_013, "the CSV holds a header and every token")
        let filtered = try get(port, "/api/tokens?reason=BadDeviceToken&limit=1000")
        XCTAssertEqual(try ids(filtered.body).count, 1000)
        XCTAssertNotNil(filtered.headers["link"], "a filtered list pages too")

        var letters: [String] = []
        var before: String?
        repeat {
            let r = try get(port, "/api/dead?limit=500" + (before.map { "&before=" + $0 } ?? ""))
            let page = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any])
            XCTAssertEqual(page["matched"] as? Int, 1234)
            letters += (page["dead_letters"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            before = page["next"] as? String
        } while before != nil
        XCTAssertEqual(letters.count, 1234, "every letter, each once, newest first")
        XCTAssertEqual(Set(letters).count, 1234)
        let html = try get(port, "/dead").body
        XCTAssertTrue(html.contains("id=\"older\""), "the page links to the older letters")
        XCTAssertTrue(html.contains("1,234</b> dead letters match"))
        let wrongType = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(try get(port, "/api/dead?reason=WrongFieldType&limit=1000").body.utf8)) as? [String: Any])
        XCTAssertEqual(wrongType["matched"] as? Int, 207, "a filter's count is exact when its search reached the oldest")
        XCTAssertEqual(httpRequest(port: port, method: "GET", path: "/api/dead?before=x%0d%0a")?.status, 400)
    }

    /// The sizes of issue 45's item 4: 1,000,000 dead letters, 1,000,000 results and 100,000
    /// invalid tokens. Prints each page's and API's time (a benchmark, not a timed assertion).
    func testEveryPageAtAMillionRecordsPrintsItsTime() throws {
        let redis = try TestRedis()
        let queue = "million\(UInt32.random(in: 0...UInt32.max))"
        let sets = QueueKeys.served(queue: queue, shards: 2)
        defer { for s in sets { _ = try? redis.connect().command(["UNLINK", s.invalidTokens, s.deadLetters, s.results]) } }
        let directory = try TemporaryDirectory("apnsw-million")
        let seeding = Date()
        try seed(redis, sets, \.deadLetters, count: 1_000_000, kind: "d")
        try seed(redis, sets, \.results, count: 1_000_000, kind: "r")
        try seed(redis, sets, \.invalidTokens, count: 100_000, kind: "t")
        print("Dashboard at a million: seeded in \(Int(Date().timeIntervalSince(seeding) * 1000)) ms")
        let (web, port) = try startWeb(redis, queue: queue, directory: directory)
        defer { web.signal(SIGTERM) }
        let first = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try get(port, "/api/dead?limit=1").body.utf8)) as? [String: Any])
        XCTAssertEqual(first["matched"] as? Int, 1_000_000)
        let next = try XCTUnwrap(first["next"] as? String)
        let id = try XCTUnwrap((first["dead_letters"] as? [[String: Any]])?.first?["id"] as? String)
        let paths = [
            "/", "/api/overview", "/workers", "/apps", "/dead", "/api/dead", "/api/dead?limit=1", "/dead?before=\(next)",
            "/dead?reason=TimedOut", "/api/dead?reason=PoisonPill&app=default", "/dead?reason=NoSuchReason", "/dead/show?id=\(id)",
            "/tokens", "/api/tokens", "/tokens?reason=BadDeviceToken", "/channels", "/tokens.csv",
        ]
        var times: [String] = []
        for path in paths {
            _ = try get(port, path)  // once to warm up, then the best of three
            var best = Double.infinity
            for _ in 0..<3 {
                let start = Date()
                let r = try get(port, path)
                best = min(best, Date().timeIntervalSince(start) * 1000)
                if path == "/tokens.csv" { XCTAssertEqual(r.body.split(separator: "\r\n").count, 100_001) }
            }
            times.append("\(path) \(String(format: "%.1f", best)) ms")
        }
        print("Dashboard at 1,000,000 dead letters, 1,000,000 results, 100,000 invalid tokens (best of 3):\n  " + times.joined(separator: "\n  "))
    }
}
