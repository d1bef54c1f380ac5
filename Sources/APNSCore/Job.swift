/// One notification job as a producer wrote it (schema v1; see docs/job-schema.md).
///
/// The job keeps its original bytes: the payload is a range into them and is sent as is.
/// A class, so that handing a job between threads and queues costs one reference count.
public final class Job: Sendable {
    public static let schemaVersion: Int64 = 1

    public let raw: [UInt8]
    public let id: String?
    public let app: String?
    /// One token, or a fan-out list (one outcome per token).
    public let tokens: [DeviceToken]
    public let topic: String?
    public let pushType: PushType
    public let priority: Priority?
    public let expiration: Int64?
    public let collapseID: String?
    public let apnsID: String?
    public let payloadRange: Range<Int>
    /// Send no earlier than this (UNIX seconds).
    public let sendAt: Int64?
    /// Overrides the retry policy's maximum number of attempts.
    public let maxAttempts: Int?

    /// The largest fan-out one job may carry.
    public static let maxTokens = 1000

    public init(raw: [UInt8], id: String?, app: String?, tokens: [DeviceToken], topic: String?, pushType: PushType,
                priority: Priority?, expiration: Int64?, collapseID: String?, apnsID: String?, payloadRange: Range<Int>,
                sendAt: Int64?, maxAttempts: Int?) {
        self.raw = raw
        self.id = id
        self.app = app
        self.tokens = tokens
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payloadRange = payloadRange
        self.sendAt = sendAt
        self.maxAttempts = maxAttempts
    }

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
