/// One notification job as a producer wrote it (schema v1; see docs/job-schema.md).
///
/// The job keeps its original bytes: the payload is a range into them and is sent as is.
public struct Job: Sendable {
    public static let schemaVersion: Int64 = 1

    public var raw: [UInt8]
    public var id: String?
    public var app: String?
    /// One token, or a fan-out list (one outcome per token).
    public var tokens: [DeviceToken]
    public var topic: String?
    public var pushType: PushType
    public var priority: Priority?
    public var expiration: Int64?
    public var collapseID: String?
    public var apnsID: String?
    public var payloadRange: Range<Int>
    /// Send no earlier than this (UNIX seconds).
    public var sendAt: Int64?
    /// Overrides the retry policy's maximum number of attempts.
    public var maxAttempts: Int?

    /// The largest fan-out one job may carry.
    public static let maxTokens = 1000

    public var payload: ArraySlice<UInt8> { raw[payloadRange] }
    public var effectivePriority: Priority { priority ?? pushType.defaultPriority }
}

/// Why a job cannot be sent. `reason` is a stable code (Apple's reason string where Apple has
/// one); `detail` tells a person what to fix.
public struct JobRejection: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String
    public let detail: String
    public init(_ reason: String, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
    public init(_ reason: APNSReason, _ detail: String) { self.init(reason.rawValue, detail) }
    public var description: String { "\(reason): \(detail)" }

    public static let malformedJSON = "MalformedJob"
    public static let unknownField = "UnknownField"
    public static let unsupportedVersion = "UnsupportedVersion"
    public static let wrongType = "WrongFieldType"
    public static let missingPayload = "MissingPayload"
    public static let unknownApp = "UnknownApp"
    public static let tooManyTokens = "TooManyTokens"
}
