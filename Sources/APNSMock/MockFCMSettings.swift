/// The mock's FCM side (`fcm` in its configuration): with it, the listener speaks FCM's HTTP v1
/// API and its OAuth token endpoint instead of APNs (fcm-protocol.md §7).
public struct MockFCMSettings: Codable, Sendable {
    /// Service accounts whose assertions the token endpoint accepts.
    public var accounts: [Account] = []
    /// The token endpoint's path: a service account's `token_uri` is `https://<host>:<port><path>`.
    public var tokenPath = "/token"
    /// `expires_in` of the access tokens it issues (Google: 3600); short, to test refreshes.
    public var tokenLifetimeSeconds = 3600
    /// Messages a project may send in a rolling minute (Google's default 600,000); nil: no quota.
    public var quotaPerMinute: Int?
    /// The `retry-after` (seconds) of a 429 QUOTA_EXCEEDED; nil: none.
    public var quotaRetryAfterSeconds: Int?
    /// Registration tokens starting with these answer 404 UNREGISTERED, 403 SENDER_ID_MISMATCH
    /// and 401 THIRD_PARTY_AUTH_ERROR (an iOS token whose project has no APNs key).
    public var unregisteredPrefix = "unregistered"
    public var otherSenderPrefix = "othersender"
    public var noAPNSKeyPrefix = "noapnskey"
    /// The Android package every registration token belongs to: a message whose
    /// `restricted_package_name` names another is refused (check 18).
    public var tokenPackage = "com.example.app"
    /// Messages one registration token may get in a rolling minute (Google: 240); nil: no limit.
    public var perTokenPerMinute: Int? = 240

    enum CodingKeys: String, CodingKey {
        case accounts
        case tokenPath = "token_path", tokenLifetimeSeconds = "token_lifetime_s", quotaPerMinute = "quota_per_minute"
        case quotaRetryAfterSeconds = "quota_retry_after_s", unregisteredPrefix = "unregistered_prefix"
        case otherSenderPrefix = "other_sender_prefix", noAPNSKeyPrefix = "no_apns_key_prefix"
        case tokenPackage = "token_package", perTokenPerMinute = "per_token_per_minute"
    }

    public struct Account: Codable, Sendable {
        public var clientEmail: String
        public var projectID: String
        public var keyID: String
        /// PEM file of the account key's public half.
        public var publicKey: String
        enum CodingKeys: String, CodingKey {
            case clientEmail = "client_email", projectID = "project_id", keyID = "key_id", publicKey = "public_key"
        }
        public init(clientEmail: String, projectID: String, keyID: String, publicKey: String) {
            self.clientEmail = clientEmail
            self.projectID = projectID
            self.keyID = keyID
            self.publicKey = publicKey
        }
    }

    public init(accounts: [Account]) { self.accounts = accounts }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        accounts = try c.decodeIfPresent([Account].self, forKey: .accounts) ?? []
        tokenPath = try c.decodeIfPresent(String.self, forKey: .tokenPath) ?? tokenPath
        tokenLifetimeSeconds = try c.decodeIfPresent(Int.self, forKey: .tokenLifetimeSeconds) ?? tokenLifetimeSeconds
        quotaPerMinute = try c.decodeIfPresent(Int.self, forKey: .quotaPerMinute)
        quotaRetryAfterSeconds = try c.decodeIfPresent(Int.self, forKey: .quotaRetryAfterSeconds)
        unregisteredPrefix = try c.decodeIfPresent(String.self, forKey: .unregisteredPrefix) ?? unregisteredPrefix
        otherSenderPrefix = try c.decodeIfPresent(String.self, forKey: .otherSenderPrefix) ?? otherSenderPrefix
        noAPNSKeyPrefix = try c.decodeIfPresent(String.self, forKey: .noAPNSKeyPrefix) ?? noAPNSKeyPrefix
        tokenPackage = try c.decodeIfPresent(String.self, forKey: .tokenPackage) ?? tokenPackage
        if c.contains(.perTokenPerMinute) { perTokenPerMinute = try c.decodeIfPresent(Int.self, forKey: .perTokenPerMinute) }
    }
}
