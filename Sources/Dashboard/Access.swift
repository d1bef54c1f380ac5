import APNSCore
import FoundationEssentials
import Glibc
import IOLoop
import Synchronization

/// Who is looking, and whether they may act.
struct Viewer {
    enum Mode { case readOnly, signedIn, anonymous }
    let mode: Mode
    /// The token a form that changes data must carry (nil: this viewer cannot act).
    let csrf: String?

    var canAct: Bool { mode == .signedIn && csrf != nil }
    var csrfField: String { HTML.hidden("csrf", csrf) }
}

/// Authentication and CSRF. One secret (a token) signs in through the login form (a session
/// cookie), as a Bearer token, or as a basic-auth password; every POST from a browser must carry
/// its session's CSRF token too. Without a secret, or with `readOnly`, nothing can change data.
final class Access: Sendable {
    private let secret: [UInt8]?
    let readOnly: Bool
    /// Whether pages and the API may be read without signing in (on loopback).
    let openReads: Bool
    private let sessions = Mutex<[String: (csrf: String, expiresMs: Int64)]>([:])
    /// The CSRF token of browsers that sign every request with basic auth.
    private let basicCSRF = Access.randomHex()
    /// Wrong secrets, per client address.
    let brake = SecretBrake()
    static let cookie = "apnsw_session"
    static let sessionMs: Int64 = 12 * 3_600_000

    init(secret: String?, readOnly: Bool, openReads: Bool) {
        self.secret = secret.map { Array($0.utf8) }
        self.readOnly = readOnly
        self.openReads = openReads
    }

    var canSignIn: Bool { secret != nil && !readOnly }

    static func randomHex() -> String {
        var g = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let n = g.next() as UInt64
            let s = String(n, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }.joined()
    }

    /// Compares in time that does not depend on where the texts differ.
    private func matches(_ candidate: String) -> Bool {
        guard let secret else { return false }
        let given = Array(candidate.utf8)
        var diff = UInt8(given.count == secret.count ? 0 : 1)
        for i in 0..<max(given.count, secret.count) {
            diff |= (i < given.count ? given[i] : 0) ^ (i < secret.count ? secret[i] : 0)
        }
        return diff == 0
    }

    /// The secret in an Authorization header (Bearer, or basic auth's password).
    func headerAuthenticated(_ request: HTTPRequest) -> Bool {
        guard let value = request.header("authorization") else { return false }
        if value.hasPrefix("Bearer ") { return matches(String(value.dropFirst(7))) }
        if value.hasPrefix("Basic "), let decoded = Base64URL.decode(value.dropFirst(6), standardAlphabet: true) {
            let text = String(decoding: decoded, as: UTF8.self)
            return text.firstIndex(of: ":").map { matches(String(text[text.index(after: $0)...])) } ?? false
        }
        return false
    }

    private func session(_ request: HTTPRequest) -> String? {
        guard let id = request.cookie(Access.cookie) else { return nil }
        let now = WallClock.nowMilliseconds()
        return sessions.withLock { s in
            guard let found = s[id], found.expiresMs > now else { return nil }
            return found.csrf
        }
    }

    func viewer(_ request: HTTPRequest) -> Viewer {
        if readOnly { return Viewer(mode: .readOnly, csrf: nil) }
        if let csrf = session(request) { return Viewer(mode: .signedIn, csrf: csrf) }
        if headerAuthenticated(request) { return Viewer(mode: .signedIn, csrf: basicCSRF) }
        return Viewer(mode: .anonymous, csrf: nil)
    }

    /// Whether the request may read: on loopback anyone may; elsewhere only the signed in.
    func mayRead(_ request: HTTPRequest) -> Bool { openReads || viewer(request).mode == .signedIn }

    /// Why an action may not go ahead (status and message), or nil when it may. A request signed
    /// with a Bearer token needs no CSRF token: a browser never adds that header by itself.
    func refusal(_ request: HTTPRequest, csrf given: String?) -> (Int, String)? {
        if readOnly { return (403, "this dashboard is read-only (--read-only)") }
        guard secret != nil else {
            return (403, "this dashboard has no secret, so nothing may change data: start apnsctl web with --auth-file or APNSW_WEB_TOKEN")
        }
        if request.header("authorization")?.hasPrefix("Bearer ") == true, headerAuthenticated(request) { return nil }
        let viewer = viewer(request)
        guard viewer.mode == .signedIn, let csrf = viewer.csrf else { return (401, "sign in first: this action needs the dashboard's secret") }
        if let site = request.header("sec-fetch-site"), site == "cross-site" { return (403, "a cross-site request may not change data") }
        if let origin = request.header("origin"), let host = request.header("host"), origin != "http://\(host)", origin != "https://\(host)" {
            return (403, "the request comes from \(origin), not this dashboard")
        }
        guard let given, given == csrf else { return (403, "the form's CSRF token is missing or stale: reload the page and try again") }
        return nil
    }

    /// Signs in with the secret: the Set-Cookie header of a new session, or nil (the brake
    /// notes a wrong one; `DashboardServer.braked` refused an early try before this).
    func signIn(_ candidate: String, peer: String) -> String? {
        guard canSignIn, matches(candidate) else {
            brake.failed(peer, nowMs: WallClock.nowMilliseconds())
            return nil
        }
        brake.succeeded(peer)
        let id = Access.randomHex()
        let now = WallClock.nowMilliseconds()
        sessions.withLock { s in
            s = s.filter { $0.value.expiresMs > now }
            if s.count >= 1000, let oldest = s.min(by: { $0.value.expiresMs < $1.value.expiresMs })?.key { s[oldest] = nil }
            s[id] = (Access.randomHex(), now + Access.sessionMs)
        }
        return "\(Access.cookie)=\(id); HttpOnly; SameSite=Strict; Path=/; Max-Age=\(Access.sessionMs / 1000)"
    }

    func signOut(_ request: HTTPRequest) -> String {
        if let id = request.cookie(Access.cookie) { _ = sessions.withLock { $0.removeValue(forKey: id) } }
        return "\(Access.cookie)=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
    }
}
