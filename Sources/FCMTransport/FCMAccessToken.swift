import APNSCore
import Delivery
import FoundationEssentials
import Glibc
import HTTP2
import IOLoop
import Synchronization
import TLS

/// The OAuth 2.0 access token of one service account (fcm-protocol.md §3), shared by every
/// connection of the process: minted by signing an RS256 assertion and trading it at the
/// account's `token_uri`; renewed five minutes before it expires, and after a 401 that says it
/// is not valid, at most once per `minimumAgeSeconds` (a storm of 401s mints one token).
/// Minting blocks: the control plane calls it, never an I/O thread.
public final class FCMAccessToken: Sendable {
    public let account: FCMServiceAccount
    private let key: RS256PrivateKey
    private let endpoint: HTTPSURL
    private let tls: TLSContext
    private let timeoutMs: Int
    private let clock: @Sendable () -> Int64
    private let state = Mutex(State())

    private struct State {
        var token: String?
        var expiresAt: Int64 = 0
        var mintedAt: Int64 = 0
        var generation = 0
        var renewing = false
        var failure: String?

        /// A mint is due: when there is no token or it expires within `refreshBeforeSeconds`
        /// (`refused` nil), or after FCM refused the current generation and it is no younger
        /// than `minimumAge`.
        func isDue(refused generation: Int?, now: Int64, minimumAge: Int64) -> Bool {
            guard let generation else { return token == nil || expiresAt - now <= FCMAccessToken.refreshBeforeSeconds }
            return self.generation == generation && now - mintedAt >= minimumAge
        }
    }

    /// Renew this long before the token expires (google-auth: 3 min 45 s).
    public static let refreshBeforeSeconds: Int64 = 300
    /// The youngest token a 401 may replace.
    public let minimumAgeSeconds: Int64

    /// `caFile`: the token endpoint's CA (the mock's); nil: the system's.
    public init(
        account: FCMServiceAccount, caFile: String?, timeoutMs: Int = 10_000, minimumAgeSeconds: Int64 = 10,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) throws(FCMSetupError) {
        self.account = account
        do { key = try RS256PrivateKey(pem: Array(account.privateKeyPEM.utf8)) } catch {
            throw FCMSetupError("the service account \(account.clientEmail): its private_key is not an RSA key FCM can use (\(error))")
        }
        guard let endpoint = HTTPSURL(account.tokenURI) else { throw FCMSetupError("the service account's token_uri is not an https:// URL") }
        self.endpoint = endpoint
        do { tls = try TLSContext(clientWithCAFile: caFile) } catch {
            throw FCMSetupError("the token endpoint's TLS set-up failed: \(error)")
        }
        self.timeoutMs = timeoutMs
        self.minimumAgeSeconds = minimumAgeSeconds
        self.clock = clock
    }

    /// The token and its generation (bumped at each mint); nil before the first mint.
    public var current: (token: String, generation: Int)? {
        state.withLock { s in s.token.map { ($0, s.generation) } }
    }

    /// Seconds until the token expires (negative: expired); nil before the first mint.
    public var secondsLeft: Int64? { state.withLock { s in s.token == nil ? nil : s.expiresAt - clock() } }

    /// Mints when there is no token or it expires within `refreshBeforeSeconds`. Returns true if it minted.
    @discardableResult
    public func refreshIfDue() throws(FCMSetupError) -> Bool {
        try refresh(refused: nil)
    }

    /// After FCM refused a token of `generation` as invalid: mint again unless another connection
    /// already did, or the token is younger than `minimumAgeSeconds`.
    @discardableResult
    public func refreshAfterRejection(of generation: Int) throws(FCMSetupError) -> Bool {
        try refresh(refused: generation)
    }

    private func refresh(refused generation: Int?) throws(FCMSetupError) -> Bool {
        let now = clock()
        guard state.withLock({ $0.isDue(refused: generation, now: now, minimumAge: minimumAgeSeconds) }) else { return false }
        try mint(replacing: generation)
        return true
    }

    private func mint(replacing generation: Int?) throws(FCMSetupError) {
        let now = clock()
        let token: String, expiresIn: Int64
        do { (token, expiresIn) = try exchange(at: now) } catch {
            state.withLock { $0.failure = error.description }
            throw error
        }
        state.withLock { s in
            s.failure = nil
            guard generation == nil || generation == s.generation else { return }
            s = State(token: token, expiresAt: now + expiresIn, mintedAt: now, generation: s.generation + 1)
        }
    }

    /// Mints on a thread of its own, unless a mint is under way; `generation` nil: when due.
    @discardableResult
    public func renewInBackground(refusedGeneration generation: Int?) -> Bool {
        let now = clock()
        let start = state.withLock { s -> Bool in
            guard s.isDue(refused: generation, now: now, minimumAge: minimumAgeSeconds), !s.renewing else { return false }
            s.renewing = true
            return true
        }
        guard start else { return false }
        OSThread.start(name: "fcm-token") { [self] in
            if let generation {
                _ = try? refreshAfterRejection(of: generation)
            } else {
                // A token endpoint that fails is asked again after 1 s, doubling to 30 s, until it answers.
                var delay: UInt32 = 1
                while (try? refreshIfDue()) == nil {
                    sleep(delay)
                    delay = min(delay * 2, 30)
                }
            }
            state.withLock { $0.renewing = false }
        }
        return true
    }

    /// One assertion traded for an access token (fcm-protocol.md §3.3). Errors say what the
    /// endpoint answered, never the assertion or the token.
    private func exchange(at now: Int64) throws(FCMSetupError) -> (String, Int64) {
        let input = FCMAssertion(account: account, issuedAt: now).signingInput
        let signature: [UInt8]
        do { signature = try key.sign(Array(input.utf8)) } catch { throw FCMSetupError("signing the OAuth assertion failed: \(error)") }
        let body = FCMAssertion.formBody(assertion: input + "." + Base64URL.encode(signature))
        var headers = HeaderList()
        headers.add(":method", "POST")
        headers.add(":scheme", "https")
        headers.add(":path", endpoint.path)
        headers.add(":authority", endpoint.port == 443 ? endpoint.host : "\(endpoint.host):\(endpoint.port)")
        headers.add("content-type", "application/x-www-form-urlencoded")
        let answer: HTTP2Exchange.Answer
        do {
            answer = try HTTP2Exchange.send(
                headers, body: body, host: endpoint.host, port: endpoint.port, serverName: endpoint.host, tls: tls, timeoutMs: timeoutMs)
        } catch { throw FCMSetupError("the token endpoint \(endpoint.text) did not answer: \(error)") }
        let json = try? JSONValue.parse(answer.body)
        guard answer.status == 200 else {
            let said = [json?["error"]?.string, json?["error_description"]?.string].compactMap { $0 }.joined(separator: ": ")
            throw FCMSetupError(
                "the token endpoint \(endpoint.text) refused the service account \(account.clientEmail): \(answer.status)\(said.isEmpty ? "" : " " + said)"
            )
        }
        guard let token = json?["access_token"]?.string, !token.isEmpty else {
            throw FCMSetupError("the token endpoint \(endpoint.text) answered 200 without an access_token")
        }
        // google-auth also takes expires_in as a string.
        let expiresIn = json?["expires_in"]?.integer ?? json?["expires_in"]?.string.flatMap { Int64($0) } ?? 3600
        return (token, max(1, expiresIn))
    }
}

extension FCMAccessToken: BearerCredential {
    public var bearer: (token: String, generation: Int)? { current }
    @discardableResult
    public func renew(refusedGeneration generation: Int) -> Bool { renewInBackground(refusedGeneration: generation) }
    public var renewalFailure: String? { state.withLock { $0.failure } }
}
