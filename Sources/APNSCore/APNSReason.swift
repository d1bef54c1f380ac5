/// An APNs `reason` string. The set is open: unknown reasons keep their text.
/// See apns-protocol.md §5.2 and Apple's "Handling notification responses from APNs".
public struct APNSReason: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let badCollapseId = APNSReason("BadCollapseId")
    public static let badDeviceToken = APNSReason("BadDeviceToken")
    public static let badExpirationDate = APNSReason("BadExpirationDate")
    public static let badMessageId = APNSReason("BadMessageId")
    public static let badPriority = APNSReason("BadPriority")
    public static let badTopic = APNSReason("BadTopic")
    public static let deviceTokenNotForTopic = APNSReason("DeviceTokenNotForTopic")
    public static let duplicateHeaders = APNSReason("DuplicateHeaders")
    public static let idleTimeout = APNSReason("IdleTimeout")
    public static let invalidPushType = APNSReason("InvalidPushType")
    public static let missingDeviceToken = APNSReason("MissingDeviceToken")
    public static let missingTopic = APNSReason("MissingTopic")
    public static let payloadEmpty = APNSReason("PayloadEmpty")
    public static let topicDisallowed = APNSReason("TopicDisallowed")
    public static let badCertificate = APNSReason("BadCertificate")
    public static let badCertificateEnvironment = APNSReason("BadCertificateEnvironment")
    public static let expiredProviderToken = APNSReason("ExpiredProviderToken")
    public static let forbidden = APNSReason("Forbidden")
    public static let invalidProviderToken = APNSReason("InvalidProviderToken")
    public static let missingProviderToken = APNSReason("MissingProviderToken")
    public static let unrelatedKeyIdInToken = APNSReason("UnrelatedKeyIdInToken")
    public static let badEnvironmentKeyIdInToken = APNSReason("BadEnvironmentKeyIdInToken")
    public static let badEnvironmentKeyInToken = APNSReason("BadEnvironmentKeyInToken")
    public static let badPath = APNSReason("BadPath")
    public static let methodNotAllowed = APNSReason("MethodNotAllowed")
    public static let expiredToken = APNSReason("ExpiredToken")
    public static let unregistered = APNSReason("Unregistered")
    public static let payloadTooLarge = APNSReason("PayloadTooLarge")
    public static let tooManyProviderTokenUpdates = APNSReason("TooManyProviderTokenUpdates")
    public static let tooManyRequests = APNSReason("TooManyRequests")
    public static let internalServerError = APNSReason("InternalServerError")
    public static let serviceUnavailable = APNSReason("ServiceUnavailable")
    public static let shutdown = APNSReason("Shutdown")
    // Broadcast and channel management (apns-protocol.md §3.3).
    public static let featureNotEnabled = APNSReason("FeatureNotEnabled")
    public static let missingChannelId = APNSReason("MissingChannelId")
    public static let badChannelId = APNSReason("BadChannelId")
    public static let channelNotRegistered = APNSReason("ChannelNotRegistered")
    public static let badRequestParams = APNSReason("BadRequestParams")
    public static let badRequestPayload = APNSReason("BadRequestPayload")
    public static let missingPushType = APNSReason("MissingPushType")
    public static let cannotCreateChannelConfig = APNSReason("CannotCreateChannelConfig")
    public static let topicMismatch = APNSReason("TopicMismatch")
    public static let missingChannelQueueSize = APNSReason("MissingChannelQueueSize")
    /// As Apple's broadcast table spells it, with a space.
    public static let serviceUnavailableSpaced = APNSReason("Service Unavailable")

    /// What Apple's table says, its status, and what we do about it; `unknown` for anything else.
    public var info: ReasonInfo { APNSReason.table[self] ?? ReasonInfo(status: 0, meaning: "unknown reason", disposition: .deadLetter) }
    public var isKnown: Bool { APNSReason.table[self] != nil }

    /// The one table (DESIGN.md §4): status, meaning and disposition of every documented reason.
    public static let table: [APNSReason: ReasonInfo] = apnsTable.merging(fcmTable) { apns, _ in apns }

    /// Apple's reasons (apns-protocol.md §5.2).
    public static let apnsTable: [APNSReason: ReasonInfo] = [
        .badCollapseId: .init(status: 400, meaning: "apns-collapse-id is longer than 64 bytes", disposition: .deadLetter),
        .badDeviceToken: .init(status: 400, meaning: "the device token is malformed or belongs to the other environment", disposition: .invalidToken),
        .badExpirationDate: .init(status: 400, meaning: "apns-expiration is not a valid epoch time", disposition: .deadLetter),
        .badMessageId: .init(status: 400, meaning: "apns-id is not a canonical UUID", disposition: .deadLetter),
        .badPriority: .init(status: 400, meaning: "apns-priority is not allowed for this push type", disposition: .deadLetter),
        .badTopic: .init(status: 400, meaning: "apns-topic is invalid for this push type or credential", disposition: .deadLetter),
        .deviceTokenNotForTopic: .init(status: 400, meaning: "the device token does not belong to this topic", disposition: .invalidToken),
        .duplicateHeaders: .init(status: 400, meaning: "a header was sent twice", disposition: .deadLetter),
        .idleTimeout: .init(status: 400, meaning: "the connection timed out while idle", disposition: .reconnectAndRetry),
        .invalidPushType: .init(status: 400, meaning: "apns-push-type is not a known push type", disposition: .deadLetter),
        .missingDeviceToken: .init(status: 400, meaning: "the request path has no device token", disposition: .deadLetter),
        .missingTopic: .init(status: 400, meaning: "apns-topic is required but absent", disposition: .deadLetter),
        .payloadEmpty: .init(status: 400, meaning: "the payload is empty", disposition: .deadLetter),
        .topicDisallowed: .init(status: 400, meaning: "pushing to this topic is not allowed", disposition: .deadLetter),
        .badCertificate: .init(status: 403, meaning: "the client certificate is invalid", disposition: .pauseCredential),
        .badCertificateEnvironment: .init(status: 403, meaning: "the client certificate is for the other environment", disposition: .pauseCredential),
        .expiredProviderToken: .init(status: 403, meaning: "the provider JWT is older than one hour", disposition: .refreshAuthAndRetry),
        .forbidden: .init(status: 403, meaning: "the action is not allowed", disposition: .deadLetter),
        .invalidProviderToken: .init(
            status: 403, meaning: "the provider JWT is invalid (signature, key id, team or topic)", disposition: .pauseCredential),
        .missingProviderToken: .init(status: 403, meaning: "no provider JWT and no client certificate", disposition: .pauseCredential),
        .unrelatedKeyIdInToken: .init(
            status: 403, meaning: "the key id is unrelated to the key this connection started with", disposition: .reconnectAndRetry),
        .badEnvironmentKeyIdInToken: .init(status: 403, meaning: "the key id belongs to the other environment", disposition: .pauseCredential),
        .badEnvironmentKeyInToken: .init(status: 403, meaning: "the key belongs to the other environment", disposition: .pauseCredential),
        .badPath: .init(status: 404, meaning: "the request path is invalid", disposition: .deadLetter),
        .methodNotAllowed: .init(status: 405, meaning: "only POST is allowed", disposition: .deadLetter),
        .expiredToken: .init(status: 410, meaning: "the device token has expired", disposition: .invalidToken),
        .unregistered: .init(status: 410, meaning: "the device token is no longer active for the topic", disposition: .invalidToken),
        .payloadTooLarge: .init(status: 413, meaning: "the payload is over the size limit", disposition: .deadLetter),
        .tooManyProviderTokenUpdates: .init(
            status: 429, meaning: "the provider JWT changed too often on this connection", disposition: .pauseCredential),
        .tooManyRequests: .init(status: 429, meaning: "too many requests to this device token in a row", disposition: .retry(.tooManyRequests)),
        .internalServerError: .init(status: 500, meaning: "APNs had an internal error", disposition: .retry(.serverError)),
        .serviceUnavailable: .init(status: 503, meaning: "APNs is unavailable", disposition: .retry(.serverError)),
        .shutdown: .init(status: 503, meaning: "the APNs server is shutting down", disposition: .reconnectAndRetry),
        .featureNotEnabled: .init(
            status: 400, meaning: "broadcast push is not enabled for this app (developer.apple.com)", disposition: .deadLetter),
        .missingChannelId: .init(status: 400, meaning: "the broadcast has no apns-channel-id", disposition: .deadLetter),
        .badChannelId: .init(status: 400, meaning: "apns-channel-id is not a valid channel id", disposition: .deadLetter),
        .channelNotRegistered: .init(
            status: 400, meaning: "no such channel in this environment (deleted, or never created)", disposition: .invalidChannel),
        .badRequestParams: .init(status: 400, meaning: "the request has a field APNs does not know", disposition: .deadLetter),
        .badRequestPayload: .init(status: 400, meaning: "the body is not JSON APNs can read", disposition: .deadLetter),
        .missingPushType: .init(status: 400, meaning: "apns-push-type is required but absent", disposition: .deadLetter),
        .cannotCreateChannelConfig: .init(
            status: 400, meaning: "the app has reached its limit of channels (10,000 per environment)", disposition: .deadLetter),
        .topicMismatch: .init(
            status: 403, meaning: "the credential's bundle ids do not include the app in the path", disposition: .deadLetter),
        .missingChannelQueueSize: .init(
            status: 400, meaning: "message-storage-policy is missing or invalid", disposition: .deadLetter),
        .serviceUnavailableSpaced: .init(status: 503, meaning: "APNs is unavailable", disposition: .retry(.serverError)),
    ]
}

public struct ReasonInfo: Sendable, Equatable {
    public let status: Int
    public let meaning: String
    public let disposition: Disposition
}

/// What the worker does with a job after an APNs answer.
public enum Disposition: Sendable, Equatable {
    /// Fix the request; sending it again cannot succeed.
    case deadLetter
    /// The token is dead for this topic: record it in the invalid-token feed.
    case invalidToken
    /// The broadcast channel is gone: record it in the invalid-channel feed.
    case invalidChannel
    /// Try again later under a retry policy.
    case retry(RetryPolicyKind)
    /// Mint a new JWT, open a new connection, retry without counting an attempt.
    case refreshAuthAndRetry
    /// The credential is broken: stop sending with it until a probe succeeds.
    case pauseCredential
    /// Open a new connection and send again, counting no attempt.
    case reconnectAndRetry

    /// The label used in logs, records and metrics.
    public var label: String {
        switch self {
        case .deadLetter: return "dead_letter"
        case .invalidToken: return "invalid_token"
        case .invalidChannel: return "invalid_channel"
        case .retry(let kind): return "retry_\(kind.rawValue)"
        case .refreshAuthAndRetry: return "refresh_auth"
        case .pauseCredential: return "pause_credential"
        case .reconnectAndRetry: return "reconnect"
        }
    }
}

public enum RetryPolicyKind: String, Sendable {
    /// 429 TooManyRequests: exponential backoff with jitter, capped.
    case tooManyRequests = "backoff"
    /// 500/503: at most 3 tries, 1-5 s apart.
    case serverError = "server_error"
}
