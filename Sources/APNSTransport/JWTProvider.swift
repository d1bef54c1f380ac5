import APNSCore
import Delivery
import FoundationEssentials
import Synchronization
import TLS

/// The provider token for one (team, key), shared by every connection of the process.
/// Re-minted every 50 minutes, and never more often than every 20 (apns-protocol.md §6.1).
public final class JWTProvider: Sendable {
    public let teamID: String
    public let keyID: String
    private let key: ES256PrivateKey
    private let state: Mutex<(token: String, issuedAt: Int64, generation: Int)>
    private let clock: @Sendable () -> Int64

    public static let defaultRefreshSeconds: Int64 = 50 * 60
    public static let defaultMinimumAgeSeconds: Int64 = 20 * 60
    /// Routine re-mint age, and the youngest token an ExpiredProviderToken may replace.
    public let refreshAfterSeconds: Int64
    public let minimumAgeSeconds: Int64

    public init(
        teamID: String, keyID: String, key: ES256PrivateKey, refreshAfterSeconds: Int64 = JWTProvider.defaultRefreshSeconds,
        minimumAgeSeconds: Int64 = JWTProvider.defaultMinimumAgeSeconds,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }
    ) throws {
        self.teamID = teamID
        self.keyID = keyID
        self.key = key
        self.clock = clock
        self.refreshAfterSeconds = refreshAfterSeconds
        self.minimumAgeSeconds = minimumAgeSeconds
        let now = clock()
        state = Mutex((try JWTProvider.mint(key: key, teamID: teamID, keyID: keyID, at: now), now, 1))
    }

    /// Loads a `.p8` file. Errors name the file, never its contents.
    public convenience init(
        teamID: String, keyID: String, p8File: String, refreshAfterSeconds: Int64 = JWTProvider.defaultRefreshSeconds,
        minimumAgeSeconds: Int64 = JWTProvider.defaultMinimumAgeSeconds
    ) throws {
        guard let pem = FileManager.default.contents(atPath: p8File) else {
            throw TransportSetupError("cannot read the .p8 key file \(p8File)")
        }
        let key: ES256PrivateKey
        do { key = try ES256PrivateKey(pem: [UInt8](pem)) } catch {
            throw TransportSetupError("\(p8File) is not a valid APNs .p8 key (PKCS#8 EC P-256): \(error)")
        }
        try self.init(teamID: teamID, keyID: keyID, key: key, refreshAfterSeconds: refreshAfterSeconds, minimumAgeSeconds: minimumAgeSeconds)
    }

    /// The current token and its generation (bumped at each mint).
    public var current: (token: String, generation: Int) {
        state.withLock { ($0.token, $0.generation) }
    }

    public var issuedAt: Int64 { state.withLock { $0.issuedAt } }

    /// The routine refresh: mints when the token is 50 minutes old. Returns true if it minted.
    @discardableResult
    public func refreshIfDue() throws -> Bool {
        try refresh(ifOlderThan: refreshAfterSeconds, generation: nil)
    }

    /// After `ExpiredProviderToken` on a token of `generation`: mint again unless another
    /// connection already did, or the token is younger than 20 minutes.
    @discardableResult
    public func refreshAfterExpiry(of generation: Int) throws -> Bool {
        try refresh(ifOlderThan: minimumAgeSeconds, generation: generation)
    }

    private func refresh(ifOlderThan age: Int64, generation: Int?) throws -> Bool {
        let now = clock()
        let due = state.withLock { s in now - s.issuedAt >= age && (generation == nil || generation == s.generation) }
        guard due else { return false }
        let token = try JWTProvider.mint(key: key, teamID: teamID, keyID: keyID, at: now)
        state.withLock { s in
            if generation == nil || generation == s.generation { s = (token, now, s.generation + 1) }
        }
        return true
    }

    static func mint(key: ES256PrivateKey, teamID: String, keyID: String, at time: Int64) throws -> String {
        let claims = JWTClaims(keyID: keyID, teamID: teamID, issuedAt: time)
        let input = claims.signingInput
        let signature = try key.sign(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }
}

extension JWTProvider: BearerCredential {
    public var bearer: (token: String, generation: Int)? { current }
    /// Signing is local and quick: done at once, on the caller's thread.
    @discardableResult
    public func renew(refusedGeneration generation: Int) -> Bool { (try? refreshAfterExpiry(of: generation)) == true }
    public var renewalFailure: String? { nil }
}
