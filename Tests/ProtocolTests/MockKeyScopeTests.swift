import APNSCore
import APNSTransport
import Foundation
import TLS
import TestSupport
import XCTest

@testable import APNSMock

/// The mock scopes keys as Apple does since February 2025 (apns-protocol.md §6.1): a team key of
/// the other environment is refused, a topic key signs only for its topics, and a connection's
/// first key decides which others may follow on it.
final class MockKeyScopeTests: XCTestCase {
    var dir: TemporaryDirectory!
    var validator: MockValidator!
    var files: MockCredentials.Files!
    let now = Int64(Date().timeIntervalSince1970)

    override func setUpWithError() throws {
        dir = try TemporaryDirectory("apnsw-keyscope")
        files = try MockCredentials.make(in: dir.path)
        var config = try MockConfiguration.load(path: files.mockConfigFile)
        let team = files.teamID, app = files.topic
        for (id, env, scope, topics, related) in [
            ("SANDBOX001", "development", "team", [app], nil), ("PRODTEAM01", "production", "team", [app], nil),
            ("TOPICKEY01", "production", "topic", [app + ".clip"], "TOPICKEY02"), ("TOPICKEY02", nil, "topic", [app + ".clip"], nil),
            ("TOPICKEY03", "production", "topic", [app + ".clip"], nil),
        ] as [(String, String?, String, [String], String?)] {
            let key = try ES256PrivateKey()
            try key.publicKeyPEM().write(toFile: dir.file("\(id).pub"), atomically: true, encoding: .utf8)
            try key.pkcs8PEM().write(toFile: dir.file("\(id).p8"), atomically: true, encoding: .utf8)
            config.keys.append(
                .init(keyID: id, teamID: team, publicKey: dir.file("\(id).pub"), topics: topics, environment: env, scope: scope, related: related))
        }
        let fixed = now
        validator = try MockValidator(configuration: config, now: { fixed })
    }

    override func tearDown() {
        dir = nil
        super.tearDown()
    }

    private func send(_ kid: String, topic: String, on auth: inout MockValidator.ConnectionAuth) throws -> String {
        let pem = try XCTUnwrap(FileManager.default.contents(atPath: kid == files.keyID ? files.p8File : dir.file("\(kid).p8")))
        let jwt = try JWTProvider(teamID: files.teamID, keyID: kid, key: try ES256PrivateKey(pem: [UInt8](pem)), clock: { [now] in now }).current
            .token
        let request = MockRequest(
            stream: 1,
            headers: [
                (":method", "POST"), (":scheme", "https"), (":path", "/3/device/" + String(repeating: "ab", count: 32)),
                ("authorization", "bearer \(jwt)"), ("apns-topic", topic), ("apns-push-type", "alert"),
            ], body: Array(#"{"aps":{"alert":"x"}}"#.utf8))
        let d = validator.decide(request, auth: &auth)
        return ([String(d.status)] + (d.reason.map { [$0.rawValue] } ?? [])).joined(separator: " ")
    }

    func testKeysAreScopedByEnvironmentTopicAndConnection() throws {
        let app = files.topic
        var a = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("SANDBOX001", topic: app, on: &a), "403 BadEnvironmentKeyIdInToken", "a sandbox key at production")
        var b = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("TOPICKEY01", topic: app, on: &b), "403 InvalidProviderToken", "a topic key outside its topics")
        var c = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("PRODTEAM01", topic: app, on: &c), "200")
        XCTAssertEqual(try send(files.keyID, topic: app, on: &c), "200", "two team keys may share a connection")
        var d = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("PRODTEAM01", topic: app + ".clip", on: &d), "200")
        XCTAssertEqual(try send("TOPICKEY01", topic: app + ".clip", on: &d), "403 UnrelatedKeyIdInToken", "a team key's connection")
        var e = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("TOPICKEY01", topic: app + ".clip", on: &e), "200")
        XCTAssertEqual(try send("TOPICKEY03", topic: app + ".clip", on: &e), "403 UnrelatedKeyIdInToken", "an unrelated topic key")
        var g = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("TOPICKEY01", topic: app + ".clip", on: &g), "200")
        XCTAssertEqual(try send("PRODTEAM01", topic: app, on: &g), "403 UnrelatedKeyIdInToken", "a team key after a topic key")
        // A topic key serves its bundle's push-type topics, not a bundle under it (issue 43, item 3).
        var h = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("TOPICKEY01", topic: app + ".clip.extension", on: &h), "403 InvalidProviderToken", "a bundle of its own")
    }

    func testATopicKeyAndItsRelatedKeyShareAConnection() throws {
        let app = files.topic
        var a = MockValidator.ConnectionAuth()
        XCTAssertEqual(try send("TOPICKEY01", topic: app + ".clip", on: &a), "200")
        XCTAssertEqual(try send("TOPICKEY02", topic: app + ".clip", on: &a), "200")
    }
}
