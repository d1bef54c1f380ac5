import APNSCore
import APNSTransport
import Foundation
import HTTP2
import IOLoop
import TLS
import TestSupport
import XCTest

@testable import APNSMock
@testable import APNSWorker

/// The mock's checks in Apple's order: authentication first, then the request.
final class MockValidatorTests: XCTestCase {
    var dir: TemporaryDirectory!
    var files: MockCredentials.Files!
    var validator: MockValidator!
    var token = ""
    let now: Int64 = 1_800_000_000
    let device = String(repeating: "ab", count: 32)

    override func setUpWithError() throws {
        dir = try TemporaryDirectory("apnsw-validator")
        files = try MockCredentials.make(in: dir.path)
        var config = try MockConfiguration.load(path: files.mockConfigFile)
        // A second team's key, to check that a connection is pinned to one team.
        let other = try ES256PrivateKey()
        try other.publicKeyPEM().write(toFile: dir.file("other.pub.pem"), atomically: true, encoding: .utf8)
        try other.pkcs8PEM().write(toFile: dir.file("other.p8"), atomically: true, encoding: .utf8)
        config.keys.append(.init(keyID: "OTHERKEY01", teamID: "OTHERTEAM1", publicKey: dir.file("other.pub.pem"), topics: ["com.other.app"]))
        let fixedNow = now
        validator = try MockValidator(configuration: config, now: { fixedNow })
        token = try jwt(issuedAt: now)
    }

    /// XCTest keeps each test's case object to the end of the run: let go of the directory now,
    /// or every test leaves one in /tmp.
    override func tearDown() {
        dir = nil
        super.tearDown()
    }

    private func jwt(issuedAt: Int64, keyFile: String? = nil, team: String? = nil, kid: String? = nil) throws -> String {
        let pem = try XCTUnwrap(FileManager.default.contents(atPath: keyFile ?? files.p8File))
        let key = try ES256PrivateKey(pem: [UInt8](pem))
        return try JWTProvider(teamID: team ?? files.teamID, keyID: kid ?? files.keyID, key: key, clock: { issuedAt }).current.token
    }

    private func request(_ overrides: [String: String?] = [:], body: String = #"{"aps":{"alert":"x"}}"#) -> MockRequest {
        var fields: [(String, String?)] = [
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(device)"),
            ("authorization", "bearer \(token)"), ("apns-topic", "com.example.app"),
            ("apns-push-type", "alert"),
        ]
        for (k, v) in overrides {
            if let i = fields.firstIndex(where: { $0.0 == k }) { fields[i].1 = v } else { fields.append((k, v)) }
        }
        return MockRequest(stream: 1, headers: fields.compactMap { f in f.1.map { (f.0, $0) } }, body: Array(body.utf8))
    }

    /// "status reason", e.g. "405 MethodNotAllowed", or "200".
    private func decide(_ r: MockRequest) -> String {
        var auth = MockValidator.ConnectionAuth()
        let d = validator.decide(r, auth: &auth)
        return ([String(d.status)] + (d.reason.map { [$0.rawValue] } ?? [])).joined(separator: " ")
    }

    func testAcceptsAValidRequest() {
        XCTAssertEqual(decide(request()), "200")
    }

    func testAuthenticatesBeforeAnythingElse() throws {
        // Wrong method and path, but no token: the answer is about the token.
        XCTAssertEqual(decide(request([":method": "GET", ":path": "/x", "authorization": nil])), "403 MissingProviderToken")
        XCTAssertEqual(decide(request(["authorization": "bearer not.a.jwt"])), "403 InvalidProviderToken")
        let forged = try jwt(issuedAt: now, keyFile: dir.file("other.p8"))
        XCTAssertEqual(decide(request(["authorization": "bearer \(forged)", ":method": "GET"])), "403 InvalidProviderToken")
        let old = try jwt(issuedAt: now - 3601)
        XCTAssertEqual(decide(request(["authorization": "bearer \(old)", ":path": "/bad"])), "403 ExpiredProviderToken")
        XCTAssertEqual(decide(request(["apns-topic": "com.someone.else"])), "403 InvalidProviderToken")
        XCTAssertEqual(decide(request(["apns-topic": nil])), "400 MissingTopic")
    }

    func testPinsOneTeamPerConnection() throws {
        var auth = MockValidator.ConnectionAuth()
        XCTAssertEqual(validator.decide(request(), auth: &auth).status, 200)
        let otherTeam = try jwt(issuedAt: now, keyFile: dir.file("other.p8"), team: "OTHERTEAM1", kid: "OTHERKEY01")
        let d = validator.decide(request(["authorization": "bearer \(otherTeam)", "apns-topic": "com.other.app"]), auth: &auth)
        XCTAssertEqual(d.reason, .invalidProviderToken)
        var fresh = MockValidator.ConnectionAuth()
        XCTAssertEqual(validator.decide(request(["authorization": "bearer \(otherTeam)", "apns-topic": "com.other.app"]), auth: &fresh).status, 200)
    }

    /// A connection remembers its last JWT and topic between requests; each request is still
    /// judged on its own headers.
    func testWhatAConnectionRemembersDoesNotLeakIntoTheNextRequest() throws {
        var auth = MockValidator.ConnectionAuth()
        func status(_ overrides: [String: String?]) -> String {
            let d = validator.decide(request(overrides), auth: &auth)
            return ([String(d.status)] + (d.reason.map { [$0.rawValue] } ?? [])).joined(separator: " ")
        }
        XCTAssertEqual(status([:]), "200")
        XCTAssertEqual(status(["apns-topic": "com.someone.else"]), "403 InvalidProviderToken")
        XCTAssertEqual(status(["apns-topic": "com.example.app.voip", "apns-push-type": "voip"]), "200")
        XCTAssertEqual(status([:]), "200")
        XCTAssertEqual(status(["apns-topic": nil]), "400 MissingTopic")
        XCTAssertEqual(status(["authorization": nil]), "403 MissingProviderToken")
        XCTAssertEqual(status([":path": "/3/device/"]), "400 MissingDeviceToken")
        XCTAssertEqual(status([":path": "/3/device/\(device.dropLast(2))"]), "400 BadDeviceToken")
        XCTAssertEqual(status([":path": "/3/devices/\(device)"]), "404 BadPath")
        XCTAssertEqual(status([:]), "200")
        // Another team's key on the same connection is refused, whatever its topic.
        let otherTeam = try jwt(issuedAt: now, keyFile: dir.file("other.p8"), team: "OTHERTEAM1", kid: "OTHERKEY01")
        XCTAssertEqual(status(["authorization": "bearer \(otherTeam)", "apns-topic": "com.other.app"]), "403 InvalidProviderToken")
    }

    func testAJWTChangingTwiceWithinTheWindowIsRefused() throws {
        var auth = MockValidator.ConnectionAuth()
        XCTAssertEqual(validator.decide(request(), auth: &auth).status, 200)
        let second = try jwt(issuedAt: now - 10)
        XCTAssertEqual(validator.decide(request(["authorization": "bearer \(second)"]), auth: &auth).status, 200, "one change is fine")
        let third = try jwt(issuedAt: now - 20)
        let d = validator.decide(request(["authorization": "bearer \(third)"]), auth: &auth)
        XCTAssertEqual(d.status, 429)
        XCTAssertEqual(d.reason, .tooManyProviderTokenUpdates)
    }

    func testRequestChecksInOrderWithApplesReasons() {
        XCTAssertEqual(decide(request([":method": "GET", ":path": "/nope"])), "405 MethodNotAllowed")
        XCTAssertEqual(decide(request([":path": "/nope"])), "404 BadPath")
        XCTAssertEqual(decide(request([":path": "/3/device/"])), "400 MissingDeviceToken")
        XCTAssertEqual(decide(request([":path": "/3/device/xyz"])), "400 BadDeviceToken")
        XCTAssertEqual(decide(request(["apns-push-type": "voip"])), "400 BadTopic")
        XCTAssertEqual(decide(request(["apns-push-type": "shout"])), "400 InvalidPushType")
        XCTAssertEqual(decide(request(["apns-priority": "7"])), "400 BadPriority")
        XCTAssertEqual(decide(request(["apns-push-type": "background", "apns-priority": "10"])), "400 BadPriority")
        // A missing apns-priority means 10 to APNs, and 10 is an error for background.
        XCTAssertEqual(decide(request(["apns-push-type": "background"])), "400 BadPriority")
        XCTAssertEqual(decide(request(["apns-push-type": "background", "apns-priority": "5"])), "200")
        XCTAssertEqual(decide(request(["apns-expiration": "soon"])), "400 BadExpirationDate")
        XCTAssertEqual(decide(request(["apns-collapse-id": String(repeating: "c", count: 65)])), "400 BadCollapseId")
        XCTAssertEqual(decide(request(["apns-id": "123"])), "400 BadMessageId")
        XCTAssertEqual(decide(request(body: "")), "400 PayloadEmpty")
        XCTAssertEqual(decide(request(body: "[1]")), "400 BadRequestPayload")
        let big = #"{"a":""# + String(repeating: "x", count: 4090) + #""}"#
        XCTAssertEqual(decide(request(body: big)), "413 PayloadTooLarge")
        XCTAssertEqual(decide(request(["apns-push-type": "voip", "apns-topic": "com.example.app.voip"], body: big)), "200")
        let twice = request()
        twice.add("apns-topic", "com.example.app")
        XCTAssertEqual(decide(twice), "400 DuplicateHeaders")
    }
}

/// TLS: the client verifies the server's chain and name, and speaks HTTP/2 via ALPN.
final class TLSVerificationTests: XCTestCase {
    final class Probe: ConnectionProbe {
        var ready = false
        var closedError: Error?
        var closed = false
        /// Set when the probe owns its connection, as the worker's connections do.
        var connection: HTTP2Connection?
        func connectionReady(_ c: HTTP2Connection) { ready = true; c.shutdown(error: nil) }
        func connectionClosed(_ c: HTTP2Connection, error: Error?) { closed = true; closedError = error; connection = nil }
    }

    private func connect(caFile: String?, serverName: String, port: Int) throws -> Probe {
        let loop = try EventLoop()
        let probe = Probe()
        let tls = try TLSContext(clientWithCAFile: caFile)
        let c = try HTTP2Connection(
            connectingTo: Socket.addresses(of: "127.0.0.1", port: port), tls: tls, serverName: serverName, loop: loop, delegate: probe)
        loop.schedule(afterMilliseconds: 5000) { loop.stop() }
        loop.afterEvents = { if probe.closed { loop.stop() } }
        loop.run()
        _ = c
        return probe
    }

    /// A session holds its delegate, and a delegate that owns its connection (as the worker's
    /// does) lets go of it when told it closed: after that turn, neither is left alive.
    func testAClosedConnectionAndItsDelegateAreFreed() throws {
        let mock = try MockFixture()
        let loop = try EventLoop()
        weak var owner: Probe?
        weak var connection: HTTP2Connection?
        var closed = false
        do {
            let o = Probe()
            o.connection = try HTTP2Connection(
                connectingTo: Socket.addresses(of: "127.0.0.1", port: mock.port), tls: try TLSContext(clientWithCAFile: mock.files.caFile),
                serverName: "localhost", loop: loop, delegate: o)
            owner = o
            connection = o.connection
            loop.afterEvents = { if owner?.closed ?? true { closed = true; loop.stop() } }
        }
        loop.schedule(afterMilliseconds: 5000) { loop.stop() }
        loop.run()  // its last turn lets go of what it kept alive for the closing turn
        XCTAssertTrue(closed, "the connection closed")
        XCTAssertNil(connection, "the closed connection was freed")
        XCTAssertNil(owner, "its delegate was freed")
    }

    func testConnectsWithTheRightCAAndName() throws {
        let mock = try MockFixture()
        let p = try connect(caFile: mock.files.caFile, serverName: "localhost", port: mock.port)
        XCTAssertTrue(p.ready)
        XCTAssertNil(p.closedError)
    }

    func testRejectsAWrongHostName() throws {
        let mock = try MockFixture()
        let p = try connect(caFile: mock.files.caFile, serverName: "api.push.apple.com", port: mock.port)
        XCTAssertFalse(p.ready)
        XCTAssertTrue("\(p.closedError.map { "\($0)" } ?? "")".contains("certificate verification"), "\(String(describing: p.closedError))")
    }

    func testRejectsAnUntrustedCA() throws {
        let mock = try MockFixture()
        let other = try MockFixture()
        let p = try connect(caFile: other.files.caFile, serverName: "localhost", port: mock.port)
        XCTAssertFalse(p.ready)
        XCTAssertNotNil(p.closedError)
    }

    /// A client context keeps its connections' latest TLS session, and the next connection
    /// resumes it while the first is still open (no certificate chain checked again), as the
    /// worker opens a pool's connections; another context starts afresh.
    func testALaterConnectionResumesTheContextsSession() throws {
        final class SettledProbe: ConnectionProbe {
            var resumed: Bool?
            var settled = false
            func connectionReady(_ c: HTTP2Connection) { resumed = c.resumedTLSSession }
            func connectionClosed(_ c: HTTP2Connection, error: Error?) {}
            // The session ticket arrives before the server's SETTINGS.
            func http2RemoteSettings(maxConcurrentStreams: Int) { settled = true }
        }
        let mock = try MockFixture()
        let loop = try EventLoop()
        let tls = try TLSContext(clientWithCAFile: mock.files.caFile)
        // Each connection opens once the one before it has settled, on one loop run.
        let contexts = [tls, tls, try TLSContext(clientWithCAFile: mock.files.caFile)]
        var probes: [SettledProbe] = [], open: [HTTP2Connection] = []
        var failure: Error?
        func next() {
            guard probes.count < contexts.count else { return loop.stop() }
            let probe = SettledProbe()
            probes.append(probe)
            do {
                open.append(
                    try HTTP2Connection(
                        connectingTo: Socket.addresses(of: "127.0.0.1", port: mock.port), tls: contexts[probes.count - 1], serverName: "localhost",
                        loop: loop, delegate: probe))
            } catch {
                failure = error
                loop.stop()
            }
        }
        loop.afterEvents = { if probes.last?.settled == true { next() } }
        loop.schedule(afterMilliseconds: 10_000) { loop.stop() }
        next()
        loop.run()
        loop.afterEvents = nil  // it holds `next`, which holds the loop and the mock: let both go
        for c in open { c.shutdown(error: nil) }
        XCTAssertNil(failure)
        XCTAssertEqual(probes.map(\.settled), [true, true, true], "each connection got the server's SETTINGS")
        XCTAssertEqual(
            probes.map(\.resumed), [false, true, false],
            "the first has no session to resume, the second resumes it, another context has none")
    }
}
