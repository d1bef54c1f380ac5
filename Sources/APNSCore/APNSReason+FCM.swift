/// FCM's answers in the one reason table (fcm-protocol.md §4): the `errorCode` of the
/// `FcmError` detail, else the canonical `error.status`, else one named by the HTTP status.
extension APNSReason {
    public static let fcmUnspecified = APNSReason("UNSPECIFIED_ERROR")
    public static let fcmInvalidArgument = APNSReason("INVALID_ARGUMENT")
    /// Ours, not Google's: an `INVALID_ARGUMENT` about the registration token itself (its
    /// message says so, or a field violation names `message.token`): not a token FCM can read.
    public static let fcmInvalidRegistration = APNSReason("INVALID_REGISTRATION")
    public static let fcmUnregistered = APNSReason("UNREGISTERED")
    public static let fcmSenderIDMismatch = APNSReason("SENDER_ID_MISMATCH")
    public static let fcmQuotaExceeded = APNSReason("QUOTA_EXCEEDED")
    public static let fcmUnavailable = APNSReason("UNAVAILABLE")
    public static let fcmInternal = APNSReason("INTERNAL")
    public static let fcmThirdPartyAuthError = APNSReason("THIRD_PARTY_AUTH_ERROR")
    /// The older name of THIRD_PARTY_AUTH_ERROR.
    public static let fcmAPNSAuthError = APNSReason("APNS_AUTH_ERROR")
    public static let fcmUnauthenticated = APNSReason("UNAUTHENTICATED")
    public static let fcmPermissionDenied = APNSReason("PERMISSION_DENIED")
    public static let fcmNotFound = APNSReason("NOT_FOUND")
    public static let fcmResourceExhausted = APNSReason("RESOURCE_EXHAUSTED")

    /// An FCM reason, not an APNs one.
    public var isFCM: Bool { APNSReason.fcmTable[self] != nil }

    public static let fcmTable: [APNSReason: ReasonInfo] = [
        .fcmUnspecified: .init(status: 0, meaning: "FCM gave no further information", disposition: .deadLetter),
        .fcmInvalidArgument: .init(
            status: 400, meaning: "a field of the message is invalid (name, type, value, size or a reserved data key)", disposition: .deadLetter),
        .fcmInvalidRegistration: .init(status: 400, meaning: "the registration token is not a valid FCM token", disposition: .invalidToken),
        .fcmUnregistered: .init(
            status: 404, meaning: "the app instance is no longer registered (uninstalled, or the token expired)", disposition: .invalidToken),
        .fcmSenderIDMismatch: .init(status: 403, meaning: "the registration token belongs to another sender", disposition: .invalidToken),
        .fcmQuotaExceeded: .init(
            status: 429, meaning: "a sending quota was exceeded (project, device or topic)", disposition: .retry(.tooManyRequests)),
        .fcmUnavailable: .init(status: 503, meaning: "FCM is overloaded", disposition: .retry(.tooManyRequests)),
        .fcmInternal: .init(status: 500, meaning: "FCM had an internal error", disposition: .retry(.serverError)),
        .fcmThirdPartyAuthError: .init(
            status: 401, meaning: "the APNs or web-push credential in the Firebase project is missing or invalid", disposition: .pauseCredential),
        .fcmAPNSAuthError: .init(
            status: 401, meaning: "the APNs credential in the Firebase project is missing or invalid", disposition: .pauseCredential),
        .fcmUnauthenticated: .init(status: 401, meaning: "the OAuth access token is missing, invalid or expired", disposition: .refreshAuthAndRetry),
        .fcmPermissionDenied: .init(
            status: 403, meaning: "the service account may not send for this project (role, scope, or the API is off)", disposition: .pauseCredential),
        .fcmNotFound: .init(status: 404, meaning: "no such project or path", disposition: .deadLetter),
        .fcmResourceExhausted: .init(status: 429, meaning: "FCM is throttling this sender", disposition: .retry(.tooManyRequests)),
    ]
}

extension Rejection {
    /// Reads Google's error body (fcm-protocol.md §4.1): `error.status`, `error.message` and the
    /// `details` (FcmError's `errorCode`, BadRequest's `fieldViolations`); a body that is not
    /// JSON (a proxy's page) is named by its HTTP status. `retryAfterMs`: the answer's header.
    public static func parseFCM(status: Int, body: [UInt8], retryAfterMs: Int? = nil) -> Rejection {
        var canonical: String?
        var errorCode: String?
        var message: String?
        var violations: [String] = []
        if let json = try? JSONValue.parse(body), let error = json["error"] {
            canonical = error["status"]?.string
            message = error["message"]?.string
            for detail in error["details"]?.array ?? [] {
                let type = detail["@type"]?.string ?? ""
                if type.hasSuffix("google.firebase.fcm.v1.FcmError") { errorCode = detail["errorCode"]?.string }
                if type.hasSuffix("google.rpc.BadRequest") {
                    for v in detail["fieldViolations"]?.array ?? [] {
                        violations.append("\(v["field"]?.string ?? "?"): \(v["description"]?.string ?? "")")
                    }
                }
            }
        }
        var reason = APNSReason(errorCode ?? canonical ?? byStatus(status))
        if reason == .fcmInvalidArgument,
            message?.contains("registration token") == true || violations.contains(where: { $0.hasPrefix("message.token:") })
        {
            reason = .fcmInvalidRegistration
        }
        var detail = ([message].compactMap { $0 } + violations).joined(separator: "; ")
        if detail.isEmpty, !body.isEmpty, canonical == nil { detail = String(decoding: body.prefix(200), as: UTF8.self) }
        if detail.count > JobRejection.maxDetail { detail = String(detail.prefix(JobRejection.maxDetail)) + "… (cut)" }
        return Rejection(
            status: status, reason: reason, apnsID: nil, timestamp: nil, detail: detail.isEmpty ? nil : detail, retryAfterMs: retryAfterMs)
    }

    /// The canonical code Google's SDKs give an answer without one (fcm-protocol.md §4.1).
    static func byStatus(_ status: Int) -> String {
        switch status {
        case 400: "INVALID_ARGUMENT"
        case 401: "UNAUTHENTICATED"
        case 403: "PERMISSION_DENIED"
        case 404: "NOT_FOUND"
        case 429: "RESOURCE_EXHAUSTED"
        case 500: "INTERNAL"
        case 503: "UNAVAILABLE"
        default: "HTTP\(status)"
        }
    }

    /// `retry-after` as seconds (an HTTP date is not honoured: the backoff applies), in ms.
    public static func retryAfterMs(_ value: String) -> Int? {
        guard let seconds = Int(value.filter { $0 != " " }), seconds >= 0 else { return nil }
        return min(seconds, 3600) * 1000
    }
}
