import APNSCore
import Foundation
import TestSupport
import XCTest

/// `apnsctl channels` (issue 31, item 2) against the mock's channel-management listener over
/// TLS and HTTP/2, with the app's credentials; and broadcast jobs to the channels it makes.
final class ChannelCommandTests: XCTestCase {
    private func ctl(_ f: WorkerFixture, _ args: [String]) throws -> (code: Int32, out: String) {
        let redis = "\(f.redis.endpoint.host):\(f.redis.endpoint.port)"
        let p = try ChildProcess(
            ChildProcess.productsDirectory + "/apnsctl", ["--config", f.configFile, "--redis", redis, "--queue", f.queue] + args,
            outputFile: f.directory.file("ctl-\(UInt32.random(in: 0...UInt32.max)).out"))
        return (p.wait(timeout: 30) ?? -1, p.output)
    }

    private func json(_ text: String) throws -> Any {
        let line = text.split(separator: "\n").first { $0.hasPrefix("{") || $0.hasPrefix("[") } ?? ""
        return try JSONSerialization.jsonObject(with: Data(line.utf8))
    }

    func testChannelsRoundTripAndTheLimitIsAClearError() throws {
        let f = try WorkerFixture { $0.channelLimit = 2 }
        let made = try ctl(f, ["channels", "create", "--storage", "most-recent", "--json"])
        XCTAssertEqual(made.code, 0, made.out)
        let created = try XCTUnwrap(try json(made.out) as? [String: Any])
        let first = try XCTUnwrap(created["channel"] as? String)
        XCTAssertEqual(created["storage"] as? String, "most-recent")
        XCTAssertEqual(created["app"] as? String, "default")
        let plain = try ctl(f, ["channels", "create"])
        XCTAssertEqual(plain.code, 0, plain.out)
        XCTAssertTrue(plain.out.contains("(storage none)"), plain.out)
        let second = try XCTUnwrap(plain.out.split(separator: " ").dropFirst(2).first.map(String.init))

        let full = try ctl(f, ["channels", "create"])
        XCTAssertEqual(full.code, 1, full.out)
        XCTAssertTrue(full.out.contains("CannotCreateChannelConfig"), full.out)
        XCTAssertTrue(full.out.contains("10,000") && full.out.contains("channels delete"), "says what the limit is and what to do: \(full.out)")

        let list = try ctl(f, ["channels", "list", "--json"])
        XCTAssertEqual(list.code, 0, list.out)
        let rows = try XCTUnwrap(try json(list.out) as? [[String: Any]])
        XCTAssertEqual(Set(rows.compactMap { $0["channel"] as? String }), [first, second])
        let table = try ctl(f, ["channels", "list"])
        XCTAssertTrue(table.out.hasPrefix("CHANNEL"), table.out)
        XCTAssertTrue(table.out.contains(first) && table.out.contains(second), table.out)

        let show = try ctl(f, ["channels", "show", first, "--json"])
        XCTAssertEqual(show.code, 0, show.out)
        let shown = try XCTUnwrap((try json(show.out) as? [[String: Any]])?.first)
        XCTAssertEqual(shown["storage"] as? String, "most-recent")
        XCTAssertEqual(shown["push_type"] as? String, "LiveActivity")
        XCTAssertTrue(try ctl(f, ["channels", "show", second]).out.contains("none"))

        let deleted = try ctl(f, ["channels", "delete", first])
        XCTAssertEqual(deleted.code, 0, deleted.out)
        XCTAssertTrue(deleted.out.contains("deleted channel \(first)"), deleted.out)
        let again = try ctl(f, ["channels", "show", first])
        XCTAssertEqual(again.code, 1, again.out)
        XCTAssertTrue(again.out.contains("ChannelNotRegistered"), again.out)
        XCTAssertEqual(try ctl(f, ["channels", "delete", "not an id"]).code, 1)
        XCTAssertEqual(try ctl(f, ["channels", "create", "--storage", "forever"]).code, 2)
        XCTAssertEqual(try ctl(f, ["channels", "create", "--app", "nope"]).code, 1)
        XCTAssertEqual(
            Set(((try json(try ctl(f, ["channels", "list", "--json"]).out)) as? [[String: Any]] ?? []).compactMap { $0["channel"] as? String }),
            [second])
    }

    /// A broadcast job goes out to a channel apnsctl made; once apnsctl deleted it, a job to it
    /// ends in the channel feed, which `channels invalid` reads.
    func testABroadcastToAMadeChannelAndToADeletedOne() throws {
        let f = try WorkerFixture()
        func make() throws -> String {
            let out = try ctl(f, ["channels", "create", "--json"])
            XCTAssertEqual(out.code, 0, out.out)
            return try XCTUnwrap((try json(out.out) as? [String: Any])?["channel"] as? String)
        }
        let live = try make(), gone = try make()
        XCTAssertEqual(try ctl(f, ["channels", "delete", gone]).code, 0)
        try f.startWorker()
        try f.enqueue([BroadcastTests.job("live", live), BroadcastTests.job("gone", gone)])
        try f.waitForOutcomes(2)
        XCTAssertEqual(try f.finalStats(), ["delivered": 1, "invalid_channel": 1])
        let feed = try ctl(f, ["channels", "invalid", "--json"])
        XCTAssertEqual(feed.code, 0, feed.out)
        let rows = try XCTUnwrap(try json(feed.out) as? [[String: Any]])
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual((rows.first?["record"] as? [String: Any])?["channel"] as? String, gone)
        XCTAssertTrue(try ctl(f, ["channels", "invalid"]).out.contains(gone))
        XCTAssertEqual(try ctl(f, ["stats", "--json"]).code, 0)
    }

    func testAnUnreachableManagementAPIExitsFour() throws {
        let f = try WorkerFixture()
        let config = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: f.configFile))) as! [String: Any]
        var apps = config["apps"] as! [[String: Any]]
        var endpoint = apps[0]["endpoint"] as! [String: Any]
        endpoint["manage_port"] = f.mock.port + 0  // the push listener answers no /1/apps path: BadPath, not a hang
        apps[0]["endpoint"] = endpoint
        _ = try WorkerFixture.reconfigure(f, ["apps": apps])
        let wrongPort = try ctl(f, ["channels", "list"])
        XCTAssertEqual(wrongPort.code, 1, wrongPort.out)
        endpoint["manage_port"] = freePort()
        apps[0]["endpoint"] = endpoint
        _ = try WorkerFixture.reconfigure(f, ["apps": apps])
        let closed = try ctl(f, ["channels", "list"])
        XCTAssertEqual(closed.code, 4, closed.out)
        XCTAssertTrue(closed.out.contains("127.0.0.1:\(endpoint["manage_port"]!)"), "names the address: \(closed.out)")
    }
}
