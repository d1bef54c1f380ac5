import APNSCore
import Foundation
import Synchronization
import TLS

/// The mock FCM: Google's OAuth token endpoint for service accounts and the HTTP v1 send call,
/// checked as strictly as fcm-protocol.md §7 proposes, answering with Google's error bodies.
/// Shared by the server's loops; its state sits behind one lock.
final class MockFCM: Sendable {
    let settings: MockFCMSettings
    private let keys: [String: (account: MockFCMSettings.Account, key: RS256PublicKey)]
    private let state = Mutex(State())
    private let now: @Sendable () -> Int64

    private struct State {
        var issued: [String: Issued] = [:]
        var revoked: Set<String> = []
        /// The token endpoint answers this status while set (a Google outage).
        var tokenFailure: Int?
        var sentInWindow: [String: (startS: Int64, count: Int)] = [:]
        var tokensIssued = 0
        var nextID: UInt64 = 1
    }

    struct Issued {
        let email: String
        let project: String
        let scope: String
        let expiresAt: Int64
    }

    init(settings: MockFCMSettings, now: @escaping @Sendable () -> Int64) throws {
        self.settings = settings
        self.now = now
        var keys: [String: (MockFCMSettings.Account, RS256PublicKey)] = [:]
        for a in settings.accounts {
            guard let pem = FileManager.default.contents(atPath: a.publicKey) else { throw MockError("cannot read \(a.publicKey)") }
            keys[a.clientEmail] = (a, try RS256PublicKey(pem: [UInt8](pem)))
        }
        self.keys = keys
    }

    /// Access tokens issued so far (tests count refreshes with it).
    var tokensIssued: Int { state.withLock { $0.tokensIssued } }
    func revoke(email: String, _ isRevoked: Bool) { state.withLock { if isRevoked { $0.revoked.insert(email) } else { $0.revoked.remove(email) } } }
    func failTokenRequests(status: Int?) { state.withLock { $0.tokenFailure = status } }
    /// Every access token issued so far expires now, as when Google rotates them early.
    func expireAccessTokens() {
        state.withLock { s in s.issued = s.issued.mapValues { Issued(email: $0.email, project: $0.project, scope: $0.scope, expiresAt: 0) } }
    }

    func decide(_ request: MockRequest) -> MockDecision {
        var d = route(request)
        // Google's answers carry no apns-id. A token request's signed assertion stays out of the
        // log, and so does any form's, wherever it went.
        d.idHeader = .none
        if request.value(":path") == settings.tokenPath
            || request.value("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true
        {
            d.hideBody = true
        }
        return d
    }

    private func route(_ request: MockRequest) -> MockDecision {
        guard request.value(":method", is: "POST") else { return Self.error(405, "METHOD_NOT_ALLOWED", "Only POST is allowed.") }
        let path = request.value(":path") ?? ""
        if path == settings.tokenPath { return token(request) }
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "v1", parts[2] == "projects", !parts[3].isEmpty, parts[4] == "messages:send" else {
            return Self.error(404, "NOT_FOUND", "The requested URL \(path.prefix(100)) was not found on this server.")
        }
        return send(request, project: String(parts[3]))
    }

    // MARK: The token endpoint (fcm-protocol.md §3.3, §7)

    private func token(_ request: MockRequest) -> MockDecision {
        if let status = state.withLock({ $0.tokenFailure }) {
            return Self.grantError(status, "internal_failure", "The token endpoint is unavailable (mock fault).")
        }
        guard request.value("content-type")?.hasPrefix("application/x-www-form-urlencoded") == true else {
            return Self.grantError(400, "invalid_request", "Content-Type must be application/x-www-form-urlencoded")
        }
        var form: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            form[String(kv[0])] = kv.count == 2 ? String(kv[1]).removingPercentEncoding : ""
        }
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return Self.grantError(400, "unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")")
        }
        guard let assertion = form["assertion"], let jwt = FCMAssertion.decode(assertion[...]) else {
            return Self.grantError(400, "invalid_request", "Invalid JWT: the assertion is not an RS256 JWT with iss, scope, aud, iat and exp")
        }
        let a = jwt.assertion
        guard let (account, key) = keys[a.issuer], account.keyID == a.keyID else {
            return Self.grantError(400, "invalid_grant", "Invalid grant: account not found")
        }
        guard !state.withLock({ $0.revoked.contains(a.issuer) }), key.verify(signature: jwt.signature, message: Array(jwt.signingInput.utf8)) else {
            return Self.grantError(400, "invalid_grant", "Invalid JWT Signature.")
        }
        let t = now()
        guard a.issuedAt <= t + 60, a.expiresAt > t, a.expiresAt - a.issuedAt <= 3600 else {
            return Self.grantError(400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        let audience = "https://\(request.value(":authority") ?? "")\(settings.tokenPath)"
        guard a.audience == audience || a.audience == FCMServiceAccount.googleTokenURI else {
            return Self.grantError(400, "invalid_grant", "Invalid JWT: aud must be \(audience)")
        }
        guard !a.scope.isEmpty else { return Self.grantError(400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.") }
        let token = "ya29.mock-" + UUID().uuidString.lowercased()
        state.withLock {
            $0.issued[token] = Issued(
                email: a.issuer, project: account.projectID, scope: a.scope, expiresAt: t + Int64(settings.tokenLifetimeSeconds))
            $0.tokensIssued += 1
        }
        var w = JSONWriter(capacity: 128)
        w.beginObject()
        w.field("access_token", token)
        w.field("expires_in", settings.tokenLifetimeSeconds)
        w.field("token_type", "Bearer")
        w.endObject()
        var d = MockDecision(status: 200)
        d.rawBody = w.bytes
        d.rawIsJSON = true
        d.keyID = a.keyID
        return d
    }

    // MARK: The send call (fcm-protocol.md §7, checks 2-22)

    private func send(_ request: MockRequest, project: String) -> MockDecision {
        let unauthenticated = Self.error(
            401, "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
        guard let header = request.value("authorization"), header.hasPrefix("Bearer ") else { return unauthenticated }
        let t = now()
        let issued = state.withLock { $0.issued[String(header.dropFirst(7))] }
        guard let issued, issued.expiresAt > t, !state.withLock({ $0.revoked.contains(issued.email) }) else { return unauthenticated }
        guard issued.scope.split(separator: " ").contains(where: { $0 == FCMAssertion.messagingScope || $0 == FCMAssertion.cloudPlatformScope })
        else {
            return Self.error(403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.")
        }
        guard issued.project == project else {
            return Self.error(
                403, "PERMISSION_DENIED",
                "Permission 'cloudmessaging.messages.create' denied on resource '//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist)."
            )
        }
        if let quota = settings.quotaPerMinute, !take(quota: quota, of: "project:" + project, now: t) {
            var d = Self.error(
                429, "RESOURCE_EXHAUSTED", "Quota exceeded for quota metric 'Messages' of service 'fcm.googleapis.com'.",
                errorCode: "QUOTA_EXCEEDED")
            d.retryAfterSeconds = settings.quotaRetryAfterSeconds
            return d
        }
        guard request.value("content-type")?.hasPrefix("application/json") == true else {
            return Self.error(400, "INVALID_ARGUMENT", "Invalid JSON payload received. Content-Type must be application/json.")
        }
        let checked = MockFCMMessage.check(request.body)
        var d: MockDecision
        switch checked {
        case .invalid(let message, let field):
            d = Self.error(400, "INVALID_ARGUMENT", message, errorCode: "INVALID_ARGUMENT", field: field)
        case .valid(let target, let validateOnly, let package):
            if let package, package != settings.tokenPackage {
                d = Self.error(
                    400, "INVALID_ARGUMENT", "Request contains an invalid argument: invalid package name", errorCode: "INVALID_ARGUMENT",
                    field: "message.android.restricted_package_name")
            } else {
                d = answer(target: target, project: project, now: t)
            }
            if validateOnly, d.status == 200 { d.fcmNote = "validate_only" }
            if case .token(let token) = target { d.fcmToken = token }
        }
        return d
    }

    private func answer(target: FCMTarget, project: String, now t: Int64) -> MockDecision {
        if case .token(let token) = target {
            if !MockFCMMessage.isTokenShaped(token) {
                return Self.error(
                    400, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token", errorCode: "INVALID_ARGUMENT")
            }
            if token.hasPrefix(settings.unregisteredPrefix) {
                return Self.error(404, "NOT_FOUND", "Requested entity was not found.", errorCode: "UNREGISTERED")
            }
            if token.hasPrefix(settings.otherSenderPrefix) {
                return Self.error(403, "PERMISSION_DENIED", "SenderId mismatch", errorCode: "SENDER_ID_MISMATCH")
            }
            if token.hasPrefix(settings.noAPNSKeyPrefix) {
                return Self.error(401, "UNAUTHENTICATED", "Auth error from APNS or Web Push Service", errorCode: "THIRD_PARTY_AUTH_ERROR")
            }
            if let limit = settings.perTokenPerMinute, !take(quota: limit, of: "token:" + token, now: t) {
                return Self.error(
                    429, "RESOURCE_EXHAUSTED", "Quota exceeded: too many messages to this device", errorCode: "QUOTA_EXCEEDED")
            }
        }
        let id = state.withLock { s -> UInt64 in
            defer { s.nextID += 1 }
            return s.nextID
        }
        let name = "projects/\(project)/messages/0:\(now())\(String(id, radix: 16))"
        var w = JSONWriter(capacity: 96)
        w.beginObject()
        w.field("name", name)
        w.endObject()
        var d = MockDecision(status: 200)
        d.rawBody = w.bytes
        d.rawIsJSON = true
        d.messageName = name
        return d
    }

    /// A rolling minute per project, not aligned to the clock (fcm-protocol.md §5).
    /// `key`: a project, or a device's token.
    private func take(quota: Int, of key: String, now t: Int64) -> Bool {
        state.withLock { s in
            var w = s.sentInWindow[key] ?? (t, 0)
            if t - w.startS >= 60 { w = (t, 0) }
            guard w.count < quota else { return false }
            w.count += 1
            s.sentInWindow[key] = w
            return true
        }
    }

    /// Google's error body (fcm-protocol.md §4.1), with an FcmError and a BadRequest detail when given.
    static func error(_ code: Int, _ status: String, _ message: String, errorCode: String? = nil, field: String? = nil) -> MockDecision {
        var w = JSONWriter(capacity: 256)
        w.beginObject()
        w.key("error")
        w.beginObject()
        w.field("code", code)
        w.field("message", message)
        w.field("status", status)
        if errorCode != nil || field != nil {
            w.key("details")
            w.beginArray()
            if let errorCode {
                w.beginObject(); w.field("@type", "type.googleapis.com/google.firebase.fcm.v1.FcmError"); w.field("errorCode", errorCode);
                w.endObject()
            }
            if let field {
                w.beginObject()
                w.field("@type", "type.googleapis.com/google.rpc.BadRequest")
                w.key("fieldViolations")
                w.beginArray(); w.beginObject(); w.field("field", field); w.field("description", message); w.endObject(); w.endArray()
                w.endObject()
            }
            w.endArray()
        }
        w.endObject()
        w.endObject()
        var d = MockDecision(status: code, reason: APNSReason(errorCode ?? status))
        d.rawBody = w.bytes
        d.rawIsJSON = true
        return d
    }

    /// The OAuth endpoint's `{"error", "error_description"}`.
    static func grantError(_ status: Int, _ error: String, _ description: String) -> MockDecision {
        var w = JSONWriter(capacity: 128)
        w.beginObject(); w.field("error", error); w.field("error_description", description); w.endObject()
        var d = MockDecision(status: status, reason: APNSReason(error))
        d.rawBody = w.bytes
        d.rawIsJSON = true
        return d
    }
}

extension MockFCM {
    /// A token fault's answer in FCM's words: `reason` is the FcmError code (by default the one
    /// Google gives the status); `body` replaces the JSON, as a proxy's page would ("" for none).
    static func fault(status: Int, reason: String?, body: String?, delayMs: Int, token: String) -> MockDecision {
        let (canonical, code, message): (String, String?, String) =
            switch status {
            case 404: ("NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")
            case 429: ("RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", "Quota exceeded.")
            case 500: ("INTERNAL", "INTERNAL", "Internal error encountered.")
            case 503: ("UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable.")
            case 401: ("UNAUTHENTICATED", nil, "Request had invalid authentication credentials.")
            case 403: ("PERMISSION_DENIED", nil, "The caller does not have permission")
            default: ("INVALID_ARGUMENT", "INVALID_ARGUMENT", "Request contains an invalid argument.")
            }
        var d = error(status, canonical, message, errorCode: reason ?? code)
        if let body {
            d.rawBody = Array(body.utf8)
            d.rawIsJSON = false
        }
        d.delayMs = delayMs
        d.idHeader = .none
        d.fcmToken = token
        return d
    }
}
