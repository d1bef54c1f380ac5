import APNSCore
import Configuration
import XCTest

@testable import APNSWorker

/// The fetcher's routing rules as values (issue 46, item 3): which app and key a job goes
/// with, its topic, and which of its tokens a fetch sends.
final class AppRouterTests: XCTestCase {
    private let endpoint = APNSEndpoint(host: "127.0.0.1", port: 1, caFile: nil)
    private static let token = String(repeating: "ab", count: 32)
    private static let other = String(repeating: "cd", count: 32)

    /// An app's runtime; `scope`: a key given its scope, as apps with several keys have (a
    /// team key's topics are nil).
    private func app(_ name: String, bundle: String = "com.example.app", key: String = "KEY1", scope: KeyScope? = nil) -> AppConfiguration {
        var a = AppConfiguration(
            name: name, bundleID: bundle, endpoint: endpoint, auth: .token(teamID: "TEAM123456", keyID: key, keyFile: "/dev/null"))
        a.keyScope = scope
        return a
    }

    private func job(_ fields: String) throws -> Job {
        try Job.parse(Array(#"{"token":"\#(Self.token)",\#(fields)"payload":{"aps":{"alert":"hi"}}}"#.utf8))
    }

    private func reason(_ body: () throws -> Void) -> String? {
        do { try body() } catch let e as JobRejection { return e.reason } catch { return "\(error)" }
        return nil
    }

    func testOneAppTakesJobsThatNameNoneAndSeveralNeedDefault() throws {
        let one = AppRouter(apps: [app("shop")])
        XCTAssertEqual(try one.resolve(try job("")).app, 0)
        XCTAssertEqual(try one.resolve(try job("")).topic, "com.example.app")
        XCTAssertEqual(one.defaultApp, "shop")

        let two = AppRouter(apps: [app("shop"), app("news", bundle: "com.example.news")])
        XCTAssertEqual(reason { _ = try two.resolve(try job("")) }, JobRejection.unknownApp)
        XCTAssertNil(two.defaultApp)
        XCTAssertEqual(try two.resolve(try job(#""app":"news","#)).app, 1)
        XCTAssertEqual(reason { _ = try two.resolve(try job(#""app":"nope","#)) }, JobRejection.unknownApp)

        let withDefault = AppRouter(apps: [app("shop"), app("default", bundle: "com.example.news")])
        XCTAssertEqual(try withDefault.resolve(try job("")).app, 1)
        XCTAssertEqual(withDefault.knownApps, "shop, default")
    }

    func testATopicIsTheBundlesOrDerivedFromItsPushType() throws {
        let router = AppRouter(apps: [app("shop")])
        XCTAssertEqual(try router.resolve(try job(#""push_type":"voip","#)).topic, "com.example.app.voip")
        XCTAssertEqual(try router.resolve(try job(#""topic":"com.example.app.voip","push_type":"voip","#)).topic, "com.example.app.voip")
        XCTAssertEqual(reason { _ = try router.resolve(try job(#""topic":"com.other.app","#)) }, APNSReason.topicDisallowed.rawValue)
    }

    /// Apps by key: a topic key for the topic before the team key; none that covers it is a
    /// dead letter naming the fix.
    func testATopicKeyGoesBeforeTheTeamKeyAndAMissingOneIsNamed() throws {
        let router = AppRouter(apps: [
            app("shop", key: "TEAM1", scope: KeyScope()), app("shop", key: "TOPIC1", scope: KeyScope(topics: ["com.example.app"])),
        ])
        XCTAssertEqual(try router.resolve(try job("")).app, 1, "the topic key")
        let topicOnly = AppRouter(apps: [app("shop", key: "TOPIC1", scope: KeyScope(topics: ["com.example.app"]))])
        XCTAssertEqual(reason { _ = try topicOnly.resolve(try job(#""topic":"com.example.app.clip","#)) }, JobRejection.noKeyForTopic)
    }

    /// A removed app's jobs go to its last runtime, to wait in the schedule; a retired runtime
    /// takes no new job.
    func testARemovedAppsJobsWaitUnderItsLastRuntime() throws {
        let router = AppRouter(apps: [app("shop"), app("news", bundle: "com.example.news")], active: [true, false], removed: ["news"])
        let routed = try router.resolve(try job(#""app":"news","#))
        XCTAssertEqual(routed.app, 1)
        XCTAssertFalse(router.active[routed.app], "parked: it waits")
        XCTAssertTrue(router.isOneApp, "one app takes jobs")
        XCTAssertNil(router.firstActive(named: "news"))
    }

    func testAFetchSendsEveryTokenOrWhatATakeBackLeft() throws {
        let one = try job("")
        XCTAssertEqual(FanOut.plan(one, retried: nil, done: []), .one(one.token))
        let many = try Job.parse(Array(#"{"tokens":["\#(Self.token)","\#(Self.other)"],"payload":{"aps":{}}}"#.utf8))
        XCTAssertEqual(FanOut.plan(many, retried: nil, done: []), .every(count: 2))
        let retried = try XCTUnwrap(DeviceToken(Self.other))
        XCTAssertEqual(FanOut.plan(many, retried: retried, done: []), .one(retried), "a retried piece sends its own token")
        XCTAssertEqual(FanOut.plan(many, retried: nil, done: [Self.token]), .left([retried]), "the token with a result is not sent again")
        XCTAssertEqual(
            FanOut.plan(many, retried: nil, done: [Self.token, Self.other]), .left([many.token]), "all recorded, its ack lost: one send acks it")
    }
}
