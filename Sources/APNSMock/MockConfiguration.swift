import Foundation

/// Settings of the mock APNs, read from JSON (snake_case keys). See README "Mock APNs".
public struct MockConfiguration: Codable, Sendable {
    public var listen: String = "127.0.0.1"
    public var port: Int = 0
    public var tls: TLSFiles
    /// Provider keys the mock accepts, each with its team and allowed bundle ids.
    public var keys: [ProviderKey] = []
    /// The SETTINGS_MAX_CONCURRENT_STREAMS a connection gets after its first accepted request.
    public var maxConcurrentStreams: Int = 1000
    /// Token connections start at one stream until a request succeeds, as APNs does.
    public var oneStreamUntilAuthenticated: Bool = true
    public var tokenMaxAgeSeconds: Int = 3600
    /// After a rejection a connection's stream limit drops to 1 until the next success (as seen from APNs).
    public var throttleAfterRejection: Bool = true
    /// A connection whose JWT changes twice within this window gets 429 TooManyProviderTokenUpdates.
    public var tokenUpdateWindowSeconds: Int = 1200
    public var faults: Faults = Faults()
    /// Where to write one JSON line per request; nil for no log.
    public var log: String?
    /// Only requests whose device token starts with this go in the log (a run of a million
    /// jobs logs the few it measures); nil: every request.
    public var logTokenPrefix: String?
    /// Event-loop threads serving connections (each connection on one, taken in turn).
    public var threads: Int = 1
    /// "production", or "development": as APNs's sandbox, every answer then carries an
    /// `apns-unique-id`.
    public var environment = "production"
    public var isDevelopment: Bool { environment == "development" }
    /// The channel-management listener (`/1/apps/…`, apns-protocol.md §3.2), on its own port as
    /// Apple's is (2196, 2195 in development); 0 picks a free one.
    public var managePort: Int = 0
    /// Channels one app may have (Apple: 10,000 per environment).
    public var channelLimit: Int = 10_000
    /// Bundle ids whose broadcasts get FeatureNotEnabled, as when the capability is off.
    public var broadcastDisabled: [String] = []
    /// Speak FCM instead of APNs (`MockFCMSettings`).
    public var fcm: MockFCMSettings?

    enum CodingKeys: String, CodingKey {
        case listen, port, tls, keys, faults, log, threads, environment, fcm
        case logTokenPrefix = "log_token_prefix"
        case managePort = "manage_port", channelLimit = "channel_limit", broadcastDisabled = "broadcast_disabled"
        case maxConcurrentStreams = "max_concurrent_streams"
        case oneStreamUntilAuthenticated = "one_stream_until_authenticated"
        case tokenMaxAgeSeconds = "token_max_age_seconds"
        case throttleAfterRejection = "throttle_after_rejection"
        case tokenUpdateWindowSeconds = "token_update_window_seconds"
    }

    public struct TLSFiles: Codable, Sendable {
        public var certificate: String
        public var key: String
        /// CA for client certificates; when set, certificate-auth connections are accepted.
        public var clientCA: String?
        enum CodingKeys: String, CodingKey { case certificate, key, clientCA = "client_ca" }
        public init(certificate: String, key: String, clientCA: String? = nil) {
            self.certificate = certificate
            self.key = key
            self.clientCA = clientCA
        }
    }

    public struct ProviderKey: Codable, Sendable {
        public var keyID: String
        public var teamID: String
        /// PEM file of the key's public half.
        public var publicKey: String
        public var topics: [String]
        /// "production" or "development": a team key limited to one (nil: both, an older key).
        public var environment: String?
        /// "topic" for a topic-specific key, else a team key (apns-protocol.md §6.1).
        public var scope: String?
        /// A topic key's one related key, whose tokens may share its connections.
        public var related: String?
        enum CodingKeys: String, CodingKey {
            case keyID = "key_id", teamID = "team_id", publicKey = "public_key", topics, environment, scope, related
        }
        public init(
            keyID: String, teamID: String, publicKey: String, topics: [String], environment: String? = nil, scope: String? = nil,
            related: String? = nil
        ) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKey = publicKey
            self.topics = topics
            self.environment = environment
            self.scope = scope
            self.related = related
        }
    }

    public struct Faults: Codable, Sendable {
        public var tokens: [TokenFault] = []
        /// Every Nth request the server receives, send GOAWAY (reason Shutdown) on its connection; 0 = never.
        public var goawayAfter: Int = 0
        /// Every Nth request the server receives, drop its TCP connection without answering; 0 = never.
        public var dropAfter: Int = 0
        /// false: PINGs go unanswered, as on a connection that died silently.
        public var answerPings: Bool = true
        /// The first N connections answer every request with RST_STREAM REFUSED_STREAM, as a bad
        /// front-end node does; later ones land on a good one. 0 = none.
        public var refuseFirstConnections: Int = 0
        /// Misbehave this way from the mock's start for a while, then behave (`MockServer.startStorm`).
        public var storm: Storm?
        enum CodingKeys: String, CodingKey {
            case tokens, storm, goawayAfter = "goaway_after", dropAfter = "drop_after", answerPings = "answer_pings"
            case refuseFirstConnections = "refuse_first_connections"
        }
        public init() {}
        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            tokens = try c.decodeIfPresent([TokenFault].self, forKey: .tokens) ?? []
            goawayAfter = try c.decodeIfPresent(Int.self, forKey: .goawayAfter) ?? 0
            dropAfter = try c.decodeIfPresent(Int.self, forKey: .dropAfter) ?? 0
            answerPings = try c.decodeIfPresent(Bool.self, forKey: .answerPings) ?? true
            refuseFirstConnections = try c.decodeIfPresent(Int.self, forKey: .refuseFirstConnections) ?? 0
            storm = try c.decodeIfPresent(Storm.self, forKey: .storm)
        }
    }

    /// A fault on every connection or request, for `forMs`.
    public struct Storm: Codable, Sendable, Equatable {
        public enum Kind: String, Codable, Sendable, CaseIterable {
            /// GOAWAY (last stream 0) as soon as a connection is up; `goaway_close` also closes it.
            case goaway, goawayClose = "goaway_close"
            /// RST_STREAM REFUSED_STREAM for every request.
            case refuse
            /// No answer to any request.
            case timeout
            /// TLS close_notify (and a close) instead of an answer.
            case closeNotify = "close_notify"
            /// A PING before SETTINGS: the first frame breaks the protocol.
            case noSettings = "no_settings"
            /// A PUSH_PROMISE on the request's stream, which the client's SETTINGS refused.
            case pushPromise = "push_promise"
            /// 5,000 PINGs as soon as a connection is up, more answers than a client should queue.
            case pingFlood = "ping_flood"
        }
        public var kind: Kind
        public var forMs: Int
        enum CodingKeys: String, CodingKey { case kind, forMs = "for_ms" }
        public init(kind: Kind, forMs: Int) {
            self.kind = kind
            self.forMs = forMs
        }
    }

    /// A fault for tokens equal to `token` or starting with `tokenPrefix`.
    public struct TokenFault: Codable, Sendable {
        public var token: String?
        public var tokenPrefix: String?
        /// Answer with this status (410, 429, 500, 503, …); nil for no error, only a delay.
        public var status: Int?
        /// The reason sent with `status`; defaults to Apple's reason for it.
        public var reason: String?
        /// Fail only the first N attempts for each token; nil = always.
        public var attempts: Int?
        /// Answer after this many milliseconds.
        public var delayMs: Int?
        /// Send this body, as a proxy in front of APNs would (an HTML page, or "" for none),
        /// instead of `{"reason":…}`.
        public var body: String?
        /// Make up a reason of the token's own (`Odd<token>`): a server with reasons beyond count.
        public var reasonPerToken: Bool?
        enum CodingKeys: String, CodingKey {
            case token, status, reason, attempts, body
            case tokenPrefix = "token_prefix", delayMs = "delay_ms", reasonPerToken = "reason_per_token"
        }
        public init(
            token: String? = nil, tokenPrefix: String? = nil, status: Int? = nil, reason: String? = nil, attempts: Int? = nil, delayMs: Int? = nil,
            body: String? = nil, reasonPerToken: Bool? = nil
        ) {
            self.token = token
            self.tokenPrefix = tokenPrefix
            self.status = status
            self.reason = reason
            self.attempts = attempts
            self.delayMs = delayMs
            self.body = body
            self.reasonPerToken = reasonPerToken
        }

        func matches(_ tokenHex: String) -> Bool {
            if let token, token.lowercased() == tokenHex { return true }
            if let tokenPrefix, tokenHex.hasPrefix(tokenPrefix.lowercased()) { return true }
            return false
        }
    }

    public init(tls: TLSFiles) { self.tls = tls }

    /// Every field but `tls` may be left out and takes its default.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        tls = try c.decode(TLSFiles.self, forKey: .tls)
        listen = try c.decodeIfPresent(String.self, forKey: .listen) ?? listen
        port = try c.decodeIfPresent(Int.self, forKey: .port) ?? port
        keys = try c.decodeIfPresent([ProviderKey].self, forKey: .keys) ?? keys
        maxConcurrentStreams = try c.decodeIfPresent(Int.self, forKey: .maxConcurrentStreams) ?? maxConcurrentStreams
        oneStreamUntilAuthenticated = try c.decodeIfPresent(Bool.self, forKey: .oneStreamUntilAuthenticated) ?? oneStreamUntilAuthenticated
        tokenMaxAgeSeconds = try c.decodeIfPresent(Int.self, forKey: .tokenMaxAgeSeconds) ?? tokenMaxAgeSeconds
        throttleAfterRejection = try c.decodeIfPresent(Bool.self, forKey: .throttleAfterRejection) ?? throttleAfterRejection
        tokenUpdateWindowSeconds = try c.decodeIfPresent(Int.self, forKey: .tokenUpdateWindowSeconds) ?? tokenUpdateWindowSeconds
        faults = try c.decodeIfPresent(Faults.self, forKey: .faults) ?? faults
        log = try c.decodeIfPresent(String.self, forKey: .log)
        logTokenPrefix = try c.decodeIfPresent(String.self, forKey: .logTokenPrefix)
        threads = try c.decodeIfPresent(Int.self, forKey: .threads) ?? threads
        environment = try c.decodeIfPresent(String.self, forKey: .environment) ?? environment
        managePort = try c.decodeIfPresent(Int.self, forKey: .managePort) ?? managePort
        channelLimit = try c.decodeIfPresent(Int.self, forKey: .channelLimit) ?? channelLimit
        broadcastDisabled = try c.decodeIfPresent([String].self, forKey: .broadcastDisabled) ?? broadcastDisabled
        fcm = try c.decodeIfPresent(MockFCMSettings.self, forKey: .fcm)
        guard ["production", "development"].contains(environment) else {
            throw DecodingError.dataCorruptedError(
                forKey: .environment, in: c, debugDescription: "environment must be production or development, not \(environment)")
        }
    }

    public static func load(path: String) throws -> MockConfiguration {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let decoder = JSONDecoder()
        return try decoder.decode(MockConfiguration.self, from: data)
    }

    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return try encoder.encode(self)
    }
}

extension MockConfiguration: Equatable {
    public static func == (a: Self, b: Self) -> Bool { (try? a.encoded()) == (try? b.encoded()) }
}
