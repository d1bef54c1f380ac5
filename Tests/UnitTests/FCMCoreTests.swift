import APNSCore
import TLS
import XCTest

/// FCM's pure parts: the service account, the OAuth assertion and its RS256 signature, the
/// reason table's FCM rows with Google's error bodies, and the message a job becomes.
final class FCMCoreTests: XCTestCase {
    static let key = try! RS256PrivateKey()
    static let account = FCMServiceAccount(
        projectID: "demo-project", clientEmail: "sender@demo-project.iam.gserviceaccount.com", privateKeyID: "k1",
        privateKeyPEM: try! key.pkcs8PEM(), tokenURI: "https://127.0.0.1:8443/token")

    func testServiceAccountFileReadsAndNamesWhatIsWrong() throws {
        let read = try FCMServiceAccount.parse(Self.account.json, source: "sa.json")
        XCTAssertEqual(read, Self.account)
        XCTAssertFalse(read.description.contains("BEGIN"), "the key never shows")
        XCTAssertNoThrow(try RS256PrivateKey(pem: Array(read.privateKeyPEM.utf8)))
        func refusal(_ edit: (inout [String: JSONValue]) -> Void) -> String {
            guard case .object(var o) = try! JSONValue.parse(Self.account.json) else { return "" }
            edit(&o)
            var w = JSONWriter()
            JSONValue.object(o).write(to: &w)
            do {
                _ = try FCMServiceAccount.parse(w.bytes, source: "sa.json")
                return "accepted"
            } catch { return error.description }
        }
        XCTAssertEqual(
            refusal { $0["client_email"] = nil }, #"sa.json: "client_email" is missing or not a string (a service-account key file has it)"#)
        XCTAssertTrue(refusal { $0["type"] = .string("authorized_user") }.contains(#""type" is not "service_account""#))
        XCTAssertTrue(refusal { $0["token_uri"] = .string("http://x/token") }.contains("not an https:// URL"))
        XCTAssertTrue(refusal { $0["private_key"] = .string("secret-material") }.contains("not a PEM key"))
        XCTAssertFalse(refusal { $0["private_key"] = .string("secret-material") }.contains("secret-material"))
        XCTAssertThrowsError(try FCMServiceAccount.parse(Array("[1]".utf8), source: "sa.json"))
        // A key too weak or of the wrong kind is refused by the TLS edge.
        XCTAssertThrowsError(try RS256PrivateKey(pem: Array(try ES256PrivateKey().pkcs8PEM().utf8)))
    }

    func testAssertionIsSignedWithRS256AndDecodes() throws {
        let assertion = FCMAssertion(account: Self.account, issuedAt: 1_700_000_000)
        let input = assertion.signingInput
        let jwt = input + "." + Base64URL.encode(try Self.key.sign(Array(input.utf8)))
        let decoded = try XCTUnwrap(FCMAssertion.decode(jwt[...]))
        XCTAssertEqual(decoded.assertion, assertion)
        XCTAssertEqual(decoded.assertion.expiresAt - decoded.assertion.issuedAt, 3600)
        XCTAssertEqual(decoded.assertion.scope, FCMAssertion.messagingScope)
        XCTAssertEqual(decoded.assertion.audience, "https://127.0.0.1:8443/token")
        let publicKey = try RS256PublicKey(pem: Array(try Self.key.publicKeyPEM().utf8))
        XCTAssertTrue(publicKey.verify(signature: decoded.signature, message: Array(decoded.signingInput.utf8)))
        XCTAssertFalse(publicKey.verify(signature: decoded.signature, message: Array((input + "x").utf8)))
        let other = try RS256PublicKey(pem: Array(try RS256PrivateKey().publicKeyPEM().utf8))
        XCTAssertFalse(other.verify(signature: decoded.signature, message: Array(decoded.signingInput.utf8)))
        XCTAssertEqual(
            String(decoding: FCMAssertion.formBody(assertion: "a.b.c"), as: UTF8.self),
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c")
        XCTAssertEqual(HTTPSURL("https://oauth2.googleapis.com/token")?.port, 443)
        XCTAssertEqual(HTTPSURL("https://127.0.0.1:9443/t")?.path, "/t")
        XCTAssertNil(HTTPSURL("https://h:0/t"))
    }

    /// Google's bodies as captured in fcm-protocol.md §4.1, each to its row and action.
    func testErrorBodiesMapToTheirReasonsAndActions() {
        func parse(_ status: Int, _ body: String, retryAfter: Int? = nil) -> Rejection {
            Rejection.parseFCM(status: status, body: Array(body.utf8), retryAfterMs: retryAfter)
        }
        let unregistered = parse(
            404,
            #"{"error":{"code":404,"message":"Requested entity was not found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#
        )
        XCTAssertEqual(unregistered.reason, .fcmUnregistered)
        XCTAssertEqual(unregistered.reason.info.disposition, .invalidToken)
        XCTAssertEqual(unregistered.detail, "Requested entity was not found.")
        let badToken = parse(
            400,
            #"{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}"#
        )
        XCTAssertEqual(badToken.reason, .fcmInvalidRegistration)
        XCTAssertEqual(badToken.reason.info.disposition, .invalidToken)
        let badField = parse(
            400,
            #"{"error":{"code":400,"message":"Invalid value","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.android.ttl","description":"Invalid TTL"}]}]}}"#
        )
        XCTAssertEqual(badField.reason, .fcmInvalidArgument)
        XCTAssertEqual(badField.detail, "Invalid value; message.android.ttl: Invalid TTL")
        XCTAssertEqual(
            parse(
                403,
                #"{"error":{"code":403,"status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"SENDER_ID_MISMATCH"}]}}"#
            ).reason, .fcmSenderIDMismatch)
        XCTAssertEqual(
            parse(401, #"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#).reason,
            .fcmUnauthenticated)
        XCTAssertEqual(
            parse(403, #"{"error":{"code":403,"message":"Permission 'cloudmessaging.messages.create' denied","status":"PERMISSION_DENIED"}}"#).reason,
            .fcmPermissionDenied)
        XCTAssertEqual(
            parse(
                401,
                #"{"error":{"code":401,"status":"UNAUTHENTICATED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"THIRD_PARTY_AUTH_ERROR"}]}}"#
            ).reason, .fcmThirdPartyAuthError)
        // Without a body Google's SDKs name the answer by its status; a proxy's page likewise.
        XCTAssertEqual(parse(503, "").reason, .fcmUnavailable)
        XCTAssertEqual(parse(500, "").reason, .fcmInternal)
        let gateway = parse(502, "<html>bad gateway</html>")
        XCTAssertEqual(gateway.reason.rawValue, "HTTP502")
        XCTAssertEqual(gateway.detail, "<html>bad gateway</html>")

        var rng = SystemRandomNumberGenerator()
        let policy = RejectionPolicy()
        func act(_ r: Rejection, attempts: Int = 1) -> RejectionPolicy.Action {
            policy.decide(.rejected(r), attempts: attempts, jobMaxAttempts: nil, using: &rng)
        }
        XCTAssertEqual(act(unregistered), .finish(.invalidToken))
        XCTAssertEqual(act(parse(401, #"{"error":{"status":"UNAUTHENTICATED"}}"#)), .refreshTokenAndResend)
        XCTAssertEqual(act(parse(403, #"{"error":{"status":"PERMISSION_DENIED"}}"#)), .pauseCredential(closeConnection: false))
        guard case .finish(.retry(let gatewayDelay)) = act(gateway) else { return XCTFail("a gateway's 502 is a server error") }
        XCTAssertTrue((1000...5000).contains(gatewayDelay))
        // QUOTA_EXCEEDED and UNAVAILABLE back off, at least as long as retry-after asks.
        let quota = parse(
            429,
            #"{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}"#,
            retryAfter: Rejection.retryAfterMs("60"))
        XCTAssertEqual(quota.reason, .fcmQuotaExceeded)
        XCTAssertEqual(act(quota), .finish(.retry(afterMs: 60_000)))
        // Without retry-after, a quota's first delay is a minute at least (Google's ErrorCode page).
        let quotaOnly = parse(
            429,
            #"{"error":{"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}"#
        )
        guard case .finish(.retry(let quotaDelay)) = act(quotaOnly) else { return XCTFail("QUOTA_EXCEEDED backs off") }
        XCTAssertTrue((60_000...61_000).contains(quotaDelay), "\(quotaDelay)")
        guard case .finish(.retry(let unavailableDelay)) = act(parse(503, "")) else { return XCTFail("UNAVAILABLE backs off") }
        XCTAssertLessThanOrEqual(unavailableDelay, 1000)
        guard case .finish(.deadLetter(let detail)) = act(badField) else { return XCTFail("INVALID_ARGUMENT is a dead letter") }
        XCTAssertTrue(detail.contains("FCM answered 400"), detail)
        XCTAssertTrue(detail.contains("message.android.ttl: Invalid TTL"), detail)
    }

    private func request(payload: String, _ target: FCMTarget = .token("tok:en-1")) throws(JobRejection) -> String {
        let bytes = Array(payload.utf8)
        return try bytes.withUnsafeBufferPointer { (b) throws(JobRejection) in
            String(decoding: try FCMMessage.request(payload: b, target: target), as: UTF8.self)
        }
    }

    private func reason(_ body: () throws -> String) -> String {
        do {
            _ = try body()
            return "accepted"
        } catch let error as JobRejection { return error.reason + ": " + error.detail } catch { return "\(error)" }
    }

    func testPayloadGoesByteForByteWithTheTargetFilledIn() throws {
        let payload = #"{ "data" : {"k":"v\u00e9"},"android":{"ttl":"30s"} }"#
        XCTAssertEqual(try request(payload: payload), #"{"message":{"token":"tok:en-1", "data" : {"k":"v\u00e9"},"android":{"ttl":"30s"} }}"#)
        XCTAssertEqual(try request(payload: "{}", .topic("news")), #"{"message":{"topic":"news"}}"#)
        XCTAssertTrue(reason { try request(payload: #"{"token":"x"}"#) }.hasPrefix("UnknownField: payload.token: the job names the target"))
        XCTAssertTrue(reason { try request(payload: #"{"aps":{}}"#) }.hasPrefix("UnknownField: payload.aps is not a field of an FCM message"))
        XCTAssertEqual(
            reason { try request(payload: #"{"data":{"google.x":"1"}}"#) },
            "ReservedDataKey: payload.data.google.x is a key FCM reserves (from, message_type, gcm, google…, gcm.notification.…)")
        XCTAssertTrue(reason { try request(payload: #"{"android":{"data":{"from":"1"}}}"#) }.hasPrefix("ReservedDataKey: payload.android.data.from"))
        XCTAssertTrue(reason { try request(payload: #"{"data":{"n":1}}"#) }.hasPrefix("WrongFieldType: payload.data.n must be a string"))
        let big = #"{"data":{"k":""# + String(repeating: "x", count: 3000) + #""}}"#
        XCTAssertEqual(reason { try request(payload: big) }, "accepted")
        XCTAssertTrue(
            reason { try request(payload: big, .topic("news")) }.hasPrefix(
                "PayloadTooLarge: the message's data and notification text take 3001 bytes, over FCM's 2048"))
        XCTAssertTrue(reason { try request(payload: "[1]") }.hasPrefix("WrongFieldType"))
    }

    func testNotificationFieldsBecomeAnAndroidMessage() throws {
        let fields =
            #"{"title":"Hi","body":"There","image":"https://x/i.png","channel_id":"news","sound":"ping","click_action":"OPEN","data":{"a":"1"}}"#
        var options = FCMMessage.Options(priority: 10, expiration: 1_700_000_600, collapseID: "score", nowSeconds: 1_700_000_000)
        func render(_ text: String) throws(JobRejection) -> String {
            try Array(text.utf8).withUnsafeBufferPointer { (b) throws(JobRejection) in
                String(decoding: try FCMMessage.request(notification: b, target: .token("t1"), options: options), as: UTF8.self)
            }
        }
        let json = try JSONValue.parse(Array(try render(fields).utf8))
        XCTAssertEqual(
            json,
            try JSONValue.parse(
                Array(
                    #"{"message":{"token":"t1","notification":{"title":"Hi","body":"There","image":"https://x/i.png"},"data":{"a":"1"},"android":{"priority":"high","ttl":"600s","collapse_key":"score","notification":{"channel_id":"news","sound":"ping","click_action":"OPEN"}}}}"#
                        .utf8)))
        options = FCMMessage.Options(priority: 5, expiration: 0, collapseID: nil, nowSeconds: 1_700_000_000)
        XCTAssertEqual(
            try render(#"{"alert":{"title":"T","body":"B"}}"#),
            #"{"message":{"token":"t1","notification":{"title":"T","body":"B"},"android":{"priority":"normal","ttl":"0s"}}}"#)
        options = FCMMessage.Options(priority: nil, expiration: nil, collapseID: nil, nowSeconds: 0)
        XCTAssertEqual(try render(#"{"alert":"B"}"#), #"{"message":{"token":"t1","notification":{"body":"B"}}}"#)
        XCTAssertTrue(reason { try render(#"{"badge":1}"#) }.hasPrefix("UnknownField: notification.badge is not a field of an FCM notification"))
        XCTAssertTrue(reason { try render(#"{"title":1}"#) }.hasPrefix("WrongFieldType: notification.title must be a string"))
        XCTAssertTrue(reason { try render(#"{"data":{"gcm":"x"}}"#) }.hasPrefix("ReservedDataKey: notification.data.gcm"))
    }

    /// A template job for an FCM app: the template for its locale, filled, is the FCM message
    /// object, sent with the send's token; a topic job sends to the topic with its smaller limit.
    func testTemplatesAndTopicsRenderForFCM() throws {
        var lib = TemplateLibrary()
        try lib.set("offer", source: Array(#"{"notification":{"title":"Offer","body":"Hi {{name}}"},"data":{"code":"{{code}}"}}"#.utf8))
        try lib.set("offer.pt", source: Array(#"{"notification":{"title":"Oferta","body":"Olá {{name}}"},"data":{"code":"{{code}}"}}"#.utf8))
        let job = try Job.parse(
            Array(#"{"app":"android","token":"tok:en-1","template":{"name":"offer","locale":"pt-BR","data":{"name":"Ana","code":"X1"}}}"#.utf8))
        let other = try XCTUnwrap(Array("tok:en-2".utf8).withUnsafeBufferPointer { DeviceToken(registration: $0) })
        let sent = try FCMMessage.render(job, token: other, templates: lib, nowSeconds: 0)
        XCTAssertEqual(
            try JSONValue.parse(sent.payload),
            try JSONValue.parse(
                Array(#"{"message":{"token":"tok:en-2","notification":{"title":"Oferta","body":"Olá Ana"},"data":{"code":"X1"}}}"#.utf8)))
        let topic = try Job.parse(Array(#"{"app":"android","topic":"news","payload":{"data":{"k":"v"}}}"#.utf8))
        XCTAssertTrue(topic.token.isAbsent)
        let toTopic = try FCMMessage.render(topic, token: topic.token, templates: lib, nowSeconds: 0)
        XCTAssertEqual(String(decoding: toTopic.payload, as: UTF8.self), #"{"message":{"topic":"news","data":{"k":"v"}}}"#)
        let condition = try Job.parse(Array(#"{"app":"android","condition":"'a' in topics","payload":{"data":{"k":"v"}}}"#.utf8))
        let toCondition = try FCMMessage.render(condition, token: condition.token, templates: lib, nowSeconds: 0)
        XCTAssertEqual(String(decoding: toCondition.payload, as: UTF8.self), #"{"message":{"condition":"'a' in topics","data":{"k":"v"}}}"#)
    }
}
