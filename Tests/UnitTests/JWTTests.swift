import APNSCore
import APNSTransport
import APNSWorker
import Foundation
import TLS
import XCTest

final class JWTTests: XCTestCase {
    func testTokenHasAPNsHeaderAndClaims() throws {
        let jwt = try JWTProvider(teamID: "TEAM123456", keyID: "KEY1234567", key: ES256PrivateKey(), clock: { 1_700_000_000 })
        let token = jwt.current.token
        let decoded = try XCTUnwrap(JWTClaims.decode(token))
        XCTAssertEqual(decoded.claims, JWTClaims(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: 1_700_000_000))
        XCTAssertEqual(decoded.signature.count, 64)
        let header = try XCTUnwrap(Base64URL.decode(token.split(separator: ".")[0]))
        XCTAssertEqual(try JSONSerialization.jsonObject(with: Data(header)) as? [String: String], ["alg": "ES256", "kid": "KEY1234567"])
    }

    /// An independent verifier: Debian's python3-jwt (PyJWT) checks our ES256 signature.
    func testPyJWTVerifiesOurToken() throws {
        let dir = NSTemporaryDirectory() + "jwt-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let key = try ES256PrivateKey()
        try key.publicKeyPEM().write(toFile: dir + "/pub.pem", atomically: true, encoding: .utf8)
        let now = Int64(Date().timeIntervalSince1970)
        let token = try JWTProvider(teamID: "TEAM123456", keyID: "KEY1234567", key: key, clock: { now }).current.token
        let script = """
            import jwt, sys, json
            claims = jwt.decode(sys.argv[1], open(sys.argv[2]).read(), algorithms=["ES256"])
            header = jwt.get_unverified_header(sys.argv[1])
            print(json.dumps({"iss": claims["iss"], "iat": claims["iat"], "kid": header["kid"]}))
            """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-c", script, token, dir + "/pub.pem"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        p.waitUntilExit()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(p.terminationStatus, 0, "PyJWT rejected the token (is python3-jwt installed?): \(text)")
        let parsed = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        XCTAssertEqual(parsed?["iss"] as? String, "TEAM123456")
        XCTAssertEqual(parsed?["kid"] as? String, "KEY1234567")
        XCTAssertEqual((parsed?["iat"] as? NSNumber)?.int64Value, now)
    }

    func testRefreshRulesFiftyMinutesAndNeverUnderTwenty() throws {
        final class Clock: @unchecked Sendable { var now: Int64 = 1_000_000 }
        let clock = Clock()
        let jwt = try JWTProvider(teamID: "T", keyID: "K", key: ES256PrivateKey(), clock: { clock.now })
        let first = jwt.current
        clock.now += 49 * 60
        XCTAssertFalse(try jwt.refreshIfDue())
        XCTAssertEqual(jwt.current.generation, first.generation)
        clock.now += 60
        XCTAssertTrue(try jwt.refreshIfDue())
        let second = jwt.current
        XCTAssertEqual(second.generation, first.generation + 1)
        XCTAssertNotEqual(second.token, first.token)
        // ExpiredProviderToken 10 minutes after a mint: too soon, keep the token.
        clock.now += 10 * 60
        XCTAssertFalse(try jwt.refreshAfterExpiry(of: second.generation))
        clock.now += 11 * 60
        XCTAssertTrue(try jwt.refreshAfterExpiry(of: second.generation))
        // A second connection reporting the same stale generation does not mint again.
        XCTAssertFalse(try jwt.refreshAfterExpiry(of: second.generation))
    }
}
