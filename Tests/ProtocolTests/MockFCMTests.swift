import APNSCore
import APNSMock
import FCMTransport
import HTTP2
import TLS
import TestSupport
import XCTest

/// The mock FCM over real TLS and HTTP/2: its token endpoint checks the RS256 assertion and
/// its claims; its send call checks the bearer token, the project and the message as
/// fcm-protocol.md §7 proposes, and answers with Google's error bodies; and `FCMAccessToken`
/// gets, shares and renews tokens from it.
final class MockFCMTests: XCTestCase {
    private func send(
        _ fixture: FCMMockFixture, _ body: String, token: String?, project: String? = nil, contentType: String = "application/json"
    ) throws -> HTTP2Exchange.Answer {
        var headers = HeaderList()
        headers.add(":method", "POST")
        headers.add(":scheme", "https")
        headers.add(":path", "/v1/projects/\(project ?? fixture.account.projectID)/messages:send")
        headers.add(":authority", "127.0.0.1:\(fixture.port)")
        headers.add("content-type", contentType)
        if let token { headers.add("authorization", "Bearer " + token) }
        return try HTTP2Exchange.send(
            headers, body: Array(body.utf8), host: "127.0.0.1", port: fixture.port, serverName: "127.0.0.1",
            tls: try TLSContext(clientWithCAFile: fixture.files.caFile), timeoutMs: 5000)
    }

    private func reason(_ a: HTTP2Exchange.Answer) -> String {
        Rejection.parseFCM(status: a.status, body: a.body, retryAfterMs: a.header("retry-after").flatMap(Rejection.retryAfterMs)).reason.rawValue
    }

    func testTokensAreMintedSharedAndRenewedOnce() throws {
        let fixture = try FCMMockFixture()
        let tokens = try FCMAccessToken(account: fixture.account, caFile: fixture.files.caFile, minimumAgeSeconds: 0)
        XCTAssertNil(tokens.current)
        XCTAssertTrue(try tokens.refreshIfDue())
        XCTAssertFalse(try tokens.refreshIfDue(), "an hour left: nothing to do")
        let first = try XCTUnwrap(tokens.current)
        XCTAssertEqual(first.generation, 1)
        XCTAssertGreaterThan(try XCTUnwrap(tokens.secondsLeft), 3500)
        XCTAssertEqual(try send(fixture, #"{"message":{"token":"device-token-1"}}"#, token: first.token).status, 200)
        // A 401 on generation 1 mints once; a second 401 about the same generation mints nothing.
        XCTAssertTrue(try tokens.refreshAfterRejection(of: 1))
        XCTAssertFalse(try tokens.refreshAfterRejection(of: 1))
        XCTAssertEqual(tokens.current?.generation, 2)
        XCTAssertEqual(fixture.server.fcmTokensIssued, 2)
        // The floor: a young token is not replaced however many 401s come.
        let floored = try FCMAccessToken(account: fixture.account, caFile: fixture.files.caFile, minimumAgeSeconds: 60)
        try floored.refreshIfDue()
        for _ in 0..<50 { XCTAssertFalse(try floored.refreshAfterRejection(of: 1)) }
        XCTAssertEqual(fixture.server.fcmTokensIssued, 3)
    }

    func testTokenEndpointRefusesWhatGoogleRefuses() throws {
        let fixture = try FCMMockFixture()
        func refusal(_ account: FCMServiceAccount) -> String {
            do {
                try FCMAccessToken(account: account, caFile: fixture.files.caFile).refreshIfDue()
                return "minted"
            } catch { return error.description }
        }
        var forged = fixture.account
        forged.privateKeyPEM = try RS256PrivateKey().pkcs8PEM()
        XCTAssertTrue(refusal(forged).hasSuffix("400 invalid_grant: Invalid JWT Signature."), refusal(forged))
        XCTAssertFalse(refusal(forged).contains("BEGIN"))
        var stranger = fixture.account
        stranger.clientEmail = "nobody@demo-project.iam.gserviceaccount.com"
        XCTAssertTrue(refusal(stranger).hasSuffix("invalid_grant: Invalid grant: account not found"), refusal(stranger))
        var elsewhere = fixture.account
        elsewhere.tokenURI = "https://127.0.0.1:\(fixture.port)/other"
        XCTAssertTrue(refusal(elsewhere).contains("404"), refusal(elsewhere))
        fixture.server.revokeFCM(clientEmail: fixture.account.clientEmail)
        XCTAssertTrue(refusal(fixture.account).hasSuffix("Invalid JWT Signature."))
        fixture.server.revokeFCM(clientEmail: fixture.account.clientEmail, false)
        fixture.server.failFCMTokenRequests(status: 503)
        XCTAssertTrue(refusal(fixture.account).contains(": 503 internal_failure"), refusal(fixture.account))
        fixture.server.failFCMTokenRequests(status: nil)
        XCTAssertEqual(refusal(fixture.account), "minted")
        let log = try fixture.logEntries()
        XCTAssertEqual(log.count, 7, "\(log.map { "\($0["path"] ?? "") \($0["status"] ?? "")" })")
        for entry in log {
            XCTAssertNil(entry["payload_text"], "the assertion stays out of the log")
            XCTAssertNil(entry["payload"])
        }
    }

    func testSendChecksAuthProjectAndMessage() throws {
        let fixture = try FCMMockFixture {
            $0.fcm!.quotaPerMinute = 3; $0.fcm!.quotaRetryAfterSeconds = 30
        }
        let tokens = try FCMAccessToken(account: fixture.account, caFile: fixture.files.caFile)
        try tokens.refreshIfDue()
        let bearer = try XCTUnwrap(tokens.current?.token)
        let ok = try send(
            fixture, #"{"message":{"token":"device-token-1","data":{"k":"v"},"android":{"ttl":"30s","priority":"high"}}}"#, token: bearer)
        XCTAssertEqual(ok.status, 200)
        let name = try XCTUnwrap(JSONValue.parse(ok.body)["name"]?.string)
        XCTAssertTrue(name.hasPrefix("projects/demo-project/messages/"), name)
        XCTAssertEqual(reason(try send(fixture, "{}", token: nil)), "UNAUTHENTICATED")
        XCTAssertEqual(reason(try send(fixture, "{}", token: "ya29.forged")), "UNAUTHENTICATED")
        XCTAssertEqual(reason(try send(fixture, #"{"message":{"token":"device-token-1"}}"#, token: bearer, project: "other")), "PERMISSION_DENIED")
        let reserved = try send(fixture, #"{"message":{"token":"device-token-1","data":{"from":"x"}}}"#, token: bearer)
        XCTAssertEqual(reserved.status, 400)
        let parsed = Rejection.parseFCM(status: reserved.status, body: reserved.body)
        XCTAssertEqual(parsed.reason, .fcmInvalidArgument)
        XCTAssertEqual(parsed.detail, "Invalid data payload key: from; message.data.from: Invalid data payload key: from")
        XCTAssertEqual(reason(try send(fixture, #"{"message":{"token":"unregistered-1"}}"#, token: bearer)), "UNREGISTERED")
        // The quota: three messages a minute (client errors count), the fourth is refused with retry-after.
        let quota = try send(fixture, #"{"message":{"token":"device-token-2"}}"#, token: bearer)
        XCTAssertEqual(quota.status, 429)
        XCTAssertEqual(reason(quota), "QUOTA_EXCEEDED")
        XCTAssertEqual(quota.header("retry-after"), "30")
        fixture.server.expireFCMAccessTokens()
        XCTAssertEqual(reason(try send(fixture, "{}", token: bearer)), "UNAUTHENTICATED")
    }

    /// Check 19: a device's own rate (Google: 240 a minute), as QUOTA_EXCEEDED.
    func testOneDevicesRateIsLimited() throws {
        let fixture = try FCMMockFixture { $0.fcm!.perTokenPerMinute = 3 }
        let tokens = try FCMAccessToken(account: fixture.account, caFile: fixture.files.caFile)
        try tokens.refreshIfDue()
        let bearer = try XCTUnwrap(tokens.current?.token)
        let statuses = try (0..<4).map { _ in try send(fixture, #"{"message":{"token":"device-token-9"}}"#, token: bearer).status }
        XCTAssertEqual(statuses, [200, 200, 200, 429])
        let other = try send(fixture, #"{"message":{"token":"device-token-10"}}"#, token: bearer)
        XCTAssertEqual(other.status, 200, "another device is not held back")
    }

    /// A token is renewed once it has five minutes or less left, not before.
    func testATokenIsRenewedFiveMinutesBeforeItExpires() throws {
        let fixture = try FCMMockFixture { $0.fcm!.tokenLifetimeSeconds = 302 }
        let tokens = try FCMAccessToken(account: fixture.account, caFile: fixture.files.caFile)
        XCTAssertTrue(try tokens.refreshIfDue())
        XCTAssertFalse(try tokens.refreshIfDue(), "302 s left")
        sleep(3)
        XCTAssertTrue(try tokens.refreshIfDue(), "299 s left")
        XCTAssertEqual(tokens.current?.generation, 2)
        XCTAssertEqual(fixture.server.fcmTokensIssued, 2)
    }

    func testMessageRulesAndTokenFates() throws {
        let fixture = try FCMMockFixture()
        let tokens = try FCMAccessToken(account: fixture.account, caFile: fixture.files.caFile)
        try tokens.refreshIfDue()
        let bearer = try XCTUnwrap(tokens.current?.token)
        func check(_ message: String) throws -> String {
            let a = try send(fixture, #"{"message":"# + message + "}", token: bearer)
            return a.status == 200 ? "200" : reason(a) + " " + (Rejection.parseFCM(status: a.status, body: a.body).detail ?? "")
        }
        XCTAssertEqual(try check(#"{"topic":"news","notification":{"title":"t"}}"#), "200")
        XCTAssertEqual(try check(#"{"condition":"'a' in topics","data":{"k":"v"}}"#), "200")
        XCTAssertTrue(try check(#"{"token":"device-token-1","topic":"news"}"#).hasPrefix("INVALID_ARGUMENT Exactly one of"))
        XCTAssertTrue(try check(#"{"topic":"/topics/news"}"#).hasPrefix("INVALID_ARGUMENT Invalid topic name"))
        XCTAssertTrue(try check(#"{"token":"device-token-1","android":{"ttl":"3 days"}}"#).hasPrefix("INVALID_ARGUMENT Invalid TTL"))
        XCTAssertTrue(try check(#"{"token":"device-token-1","android":{"ttl":"2419201s"}}"#).hasPrefix("INVALID_ARGUMENT Invalid TTL"))
        XCTAssertEqual(try check(#"{"token":"device-token-1","android":{"ttl":"3.5s"}}"#), "200")
        XCTAssertTrue(try check(#"{"token":"device-token-1","android":{"priority":"urgent"}}"#).hasPrefix("INVALID_ARGUMENT"))
        XCTAssertTrue(try check(#"{"token":"device-token-1","data":{"n":1}}"#).hasPrefix("INVALID_ARGUMENT"))
        XCTAssertTrue(try check(#"{"token":"device-token-1","badge":1}"#).hasPrefix("INVALID_ARGUMENT"))
        let big = String(repeating: "x", count: 2100)
        XCTAssertTrue(try check(#"{"topic":"news","data":{"k":"\#(big)"}}"#).hasPrefix("INVALID_ARGUMENT Message is too big"))
        XCTAssertEqual(try check(#"{"token":"device-token-1","data":{"k":"\#(big)"}}"#), "200")
        XCTAssertTrue(
            try check(#"{"token":"bad token!"}"#).hasPrefix("INVALID_REGISTRATION The registration token is not a valid FCM registration token"))
        XCTAssertTrue(try check(#"{"token":"othersender-1"}"#).hasPrefix("SENDER_ID_MISMATCH"))
        XCTAssertTrue(try check(#"{"token":"noapnskey-1"}"#).hasPrefix("THIRD_PARTY_AUTH_ERROR"))
        // Checks 14 and 18: APNs headers through FCM, and the token's package.
        XCTAssertTrue(try check(#"{"token":"device-token-1","android":{"restricted_package_name":"com.other"}}"#).contains("invalid package name"))
        XCTAssertEqual(try check(#"{"token":"device-token-1","android":{"restricted_package_name":"com.example.app"}}"#), "200")
        XCTAssertTrue(try check(#"{"token":"device-token-1","apns":{"headers":{"apns-priority":10}}}"#).hasPrefix("INVALID_ARGUMENT"))
        XCTAssertTrue(
            try check(#"{"token":"device-token-1","data":{"k":"v"},"apns":{"headers":{"apns-priority":"10"}}}"#)
                .contains("Data-only messages to iOS must use apns-priority 5"))
        XCTAssertEqual(try check(#"{"token":"device-token-1","notification":{"title":"t"},"apns":{"headers":{"apns-priority":"10"}}}"#), "200")
        let wrongType = try send(fixture, #"{"message":{"token":"device-token-1"}}"#, token: bearer, contentType: "text/plain")
        XCTAssertEqual(wrongType.status, 400)
        let log = try fixture.logEntries()
        let delivered = log.filter { ($0["status"] as? Int) == 200 && $0["name"] != nil }
        XCTAssertEqual(delivered.count, 6)
        XCTAssertTrue(log.allSatisfy { (($0["headers"] as? [String: String])?["authorization"] ?? "bearer <redacted>") == "bearer <redacted>" })
    }
}
