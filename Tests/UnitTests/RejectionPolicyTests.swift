import APNSCore
import XCTest

/// Every row of apns-protocol.md §5.2 and fcm-protocol.md §4.2, and the lack of an answer, through `RejectionPolicy`.
final class RejectionPolicyTests: XCTestCase {
    private enum Expected: Equatable {
        case resend, reconnect, refreshToken, pause(closing: Bool), retry, invalidToken, invalidChannel, deadLetter
    }

    /// (status, reason, what becomes of a first try).
    private let table: [(Int, String, Expected)] = [
        (400, "BadCollapseId", .deadLetter),
        (400, "BadDeviceToken", .invalidToken),
        (400, "BadExpirationDate", .deadLetter),
        (400, "BadMessageId", .deadLetter),
        (400, "BadPriority", .deadLetter),
        (400, "BadTopic", .deadLetter),
        (400, "DeviceTokenNotForTopic", .invalidToken),
        (400, "DuplicateHeaders", .deadLetter),
        (400, "IdleTimeout", .reconnect),
        (400, "InvalidPushType", .deadLetter),
        (400, "MissingDeviceToken", .deadLetter),
        (400, "MissingTopic", .deadLetter),
        (400, "PayloadEmpty", .deadLetter),
        (400, "TopicDisallowed", .deadLetter),
        (403, "BadCertificate", .pause(closing: false)),
        (403, "BadCertificateEnvironment", .pause(closing: false)),
        (403, "ExpiredProviderToken", .refreshToken),
        (403, "Forbidden", .deadLetter),
        (403, "InvalidProviderToken", .pause(closing: false)),
        (403, "MissingProviderToken", .pause(closing: false)),
        (403, "UnrelatedKeyIdInToken", .reconnect),
        (403, "BadEnvironmentKeyIdInToken", .pause(closing: false)),
        (403, "BadEnvironmentKeyInToken", .pause(closing: false)),
        (404, "BadPath", .deadLetter),
        (405, "MethodNotAllowed", .deadLetter),
        (410, "ExpiredToken", .invalidToken),
        (410, "Unregistered", .invalidToken),
        (413, "PayloadTooLarge", .deadLetter),
        (429, "TooManyProviderTokenUpdates", .pause(closing: true)),
        (429, "TooManyRequests", .retry),
        (500, "InternalServerError", .retry),
        (503, "ServiceUnavailable", .retry),
        (503, "Shutdown", .reconnect),
        (400, "FeatureNotEnabled", .deadLetter),
        (400, "MissingChannelId", .deadLetter),
        (400, "BadChannelId", .deadLetter),
        (400, "ChannelNotRegistered", .invalidChannel),
        (400, "BadRequestParams", .deadLetter),
        (400, "BadRequestPayload", .deadLetter),
        (400, "MissingPushType", .deadLetter),
        (400, "CannotCreateChannelConfig", .deadLetter),
        (403, "TopicMismatch", .deadLetter),
        (400, "MissingChannelQueueSize", .deadLetter),
        (503, "Service Unavailable", .retry),
        // FCM's rows (fcm-protocol.md §4.2-4.3).
        (0, "UNSPECIFIED_ERROR", .deadLetter),
        (400, "INVALID_ARGUMENT", .deadLetter),
        (400, "INVALID_REGISTRATION", .invalidToken),
        (404, "UNREGISTERED", .invalidToken),
        (403, "SENDER_ID_MISMATCH", .invalidToken),
        (429, "QUOTA_EXCEEDED", .retry),
        (503, "UNAVAILABLE", .retry),
        (500, "INTERNAL", .retry),
        (401, "THIRD_PARTY_AUTH_ERROR", .pause(closing: false)),
        (401, "APNS_AUTH_ERROR", .pause(closing: false)),
        (401, "UNAUTHENTICATED", .refreshToken),
        (403, "PERMISSION_DENIED", .pause(closing: false)),
        (404, "NOT_FOUND", .deadLetter),
        (429, "RESOURCE_EXHAUSTED", .retry),
        (400, "SomethingNew", .deadLetter),
    ]

    private func decide(
        _ answer: RejectionPolicy.Answer, attempts: Int = 1, jobMaxAttempts: Int? = nil,
        policy: RejectionPolicy = RejectionPolicy()
    ) -> RejectionPolicy.Action {
        var rng = SystemRandomNumberGenerator()
        return policy.decide(answer, attempts: attempts, jobMaxAttempts: jobMaxAttempts, using: &rng)
    }

    private func kind(_ action: RejectionPolicy.Action) -> Expected {
        switch action {
        case .resend: .resend
        case .reconnectAndResend: .reconnect
        case .refreshTokenAndResend: .refreshToken
        case .pauseCredential(let closing): .pause(closing: closing)
        case .finish(.retry): .retry
        case .finish(.invalidToken): .invalidToken
        case .finish(.invalidChannel): .invalidChannel
        case .finish(.deadLetter): .deadLetter
        }
    }

    func testEveryDocumentedReasonHasItsAction() {
        let documented = Set(APNSReason.table.keys.map(\.rawValue))
        XCTAssertEqual(Set(table.map(\.1)).subtracting(["SomethingNew"]), documented, "the table above covers the reason table")
        for (status, reason, expected) in table {
            let rejection = Rejection(status: status, reason: APNSReason(reason), apnsID: nil, timestamp: nil)
            XCTAssertEqual(kind(decide(.rejected(rejection))), expected, reason)
        }
    }

    func testADeadLetterSaysWhatAPNsMeantAndAfterHowManyTries() {
        let rejection = Rejection(status: 400, reason: .badTopic, apnsID: nil, timestamp: nil)
        XCTAssertEqual(
            decide(.rejected(rejection), attempts: 2),
            .finish(.deadLetter(detail: "APNs answered 400: apns-topic is invalid for this push type or credential (after 2 attempts)")))
        let unknown = Rejection(status: 418, reason: APNSReason("Teapot"), apnsID: nil, timestamp: nil)
        XCTAssertEqual(decide(.rejected(unknown)), .finish(.deadLetter(detail: "APNs answered 418: unknown reason (after 1 attempts)")))
    }

    func testServerErrorsRetryThreeTimesOneToFiveSecondsApart() {
        let rejection = Rejection(status: 503, reason: .serviceUnavailable, apnsID: nil, timestamp: nil)
        for attempts in 1...2 {
            guard case .finish(.retry(let ms)) = decide(.rejected(rejection), attempts: attempts) else { return XCTFail("try \(attempts)") }
            XCTAssertTrue((1000...5000).contains(ms), "\(ms)")
        }
        XCTAssertEqual(kind(decide(.rejected(rejection), attempts: 3)), .deadLetter)
        XCTAssertEqual(kind(decide(.rejected(rejection), attempts: 3, jobMaxAttempts: 4)), .retry, "the job's own limit wins")
    }

    func testTooManyRequestsBacksOffExponentiallyWithJitter() {
        let rejection = Rejection(status: 429, reason: .tooManyRequests, apnsID: nil, timestamp: nil)
        var previous = 0
        for attempts in 1...7 {
            guard case .finish(.retry(let ms)) = decide(.rejected(rejection), attempts: attempts) else { return XCTFail("try \(attempts)") }
            let step = min(60_000, 1000 << (attempts - 1))  // the cap holds the last
            XCTAssertTrue((step - step / 5...step).contains(ms), "try \(attempts): \(ms)")
            XCTAssertGreaterThan(ms, previous)
            previous = ms
        }
        XCTAssertEqual(kind(decide(.rejected(rejection), attempts: 8)), .deadLetter)
    }

    /// Refused, cut or timed-out streams are never the job's fault, however often (issue 26,
    /// item 3: after 10 they became ConnectionFailures dead letters).
    func testNoAnswerAlwaysResendsAndCountsNoAttempt() {
        for attempts in [0, 1, 100] { XCTAssertEqual(decide(.unanswered, attempts: attempts), .resend) }
    }

    /// A stream the server resets on its own while it answers others is the job's doing.
    func testAStreamResetAloneBecomesADeadLetterAfterTheBound() {
        let policy = RejectionPolicy(maxStreamResets: 3)
        for n in 1...2 { XCTAssertEqual(decide(.resetAlone(code: "PROTOCOL_ERROR", times: n), policy: policy), .resend) }
        XCTAssertEqual(
            decide(.resetAlone(code: "PROTOCOL_ERROR", times: 3), attempts: 0, policy: policy),
            .finish(
                .deadLetter(
                    detail: "APNs reset this notification's stream with PROTOCOL_ERROR 3 times, while it answered others on the connection")))
        XCTAssertEqual(RejectionPolicy.streamReset.reason.rawValue, "StreamReset")
    }

    /// A send that times out while its connection answers others is the job's doing too, after
    /// `maxTimeoutsAlone` (3) of them (issue 43, item 4).
    func testATimeoutAloneBecomesADeadLetterAfterTheBound() {
        for n in 1...2 { XCTAssertEqual(decide(.timedOutAlone(times: n)), .resend) }
        guard case .finish(.deadLetter(let detail)) = decide(.timedOutAlone(times: 3)) else { return XCTFail("a dead letter at 3") }
        XCTAssertTrue(detail.contains("answered none of 3 sends"), detail)
        XCTAssertEqual(RejectionPolicy.timedOut.reason.rawValue, "TimedOut")
    }

    /// A proxy in front of APNs answers 5xx with an HTML page or nothing: the status decides.
    func testAnAnswerWithoutAKnownReasonIsDecidedByItsStatus() {
        for (status, body) in [(500, ""), (503, "<html><body>503 Service Unavailable</body></html>"), (502, "Bad Gateway"), (504, "")] {
            let r = Rejection.parse(status: status, body: Array(body.utf8), apnsID: nil)
            guard case .finish(.retry(let ms)) = decide(.rejected(r)) else { return XCTFail("\(status) \(r.reason)") }
            XCTAssertTrue((1000...5000).contains(ms), "\(status): the server-error policy, \(ms)")
            XCTAssertEqual(kind(decide(.rejected(r), attempts: 3)), .deadLetter, "\(status): three tries at most")
        }
        let throttled = Rejection.parse(status: 429, body: [], apnsID: nil)
        guard case .finish(.retry(let ms)) = decide(.rejected(throttled)) else { return XCTFail("429") }
        XCTAssertTrue((800...1000).contains(ms), "429: the backoff policy, \(ms)")
        XCTAssertEqual(kind(decide(.rejected(throttled), attempts: 7)), .retry)
        let teapot = Rejection.parse(status: 418, body: Array("short and stout".utf8), apnsID: nil)
        XCTAssertEqual(kind(decide(.rejected(teapot))), .deadLetter)
    }
}
