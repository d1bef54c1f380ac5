import Buffers
import PointerTricks

/// One notification job as a producer wrote it (schema v1: README "Jobs", schema/job-v1.schema.json).
///
/// The job keeps its original bytes: a slice of the buffer its fetch read, shared by the
/// batch's jobs, so that taking a job copies and allocates nothing. A raw payload is a range of
/// them and is sent as is; structured and template jobs get their payload from `PayloadRenderer`.
/// A class, so that handing a job between threads and queues costs one reference count.
/// Immutable; its payload is lent from buffers the job holds (unchecked Sendable for it).
public final class Job: @unchecked Sendable {
    public static let schemaVersion: Int64 = 1

    public let raw: ArraySlice<UInt8>
    /// The producer's id. Parsed jobs keep a plain one as a range of `raw` (`withID`), written
    /// into records without a String made and escaped again.
    public var id: String? {
        switch idField {
        case .plain(let range)?: String(decoding: raw[range], as: UTF8.self)
        case .decoded(let text)?: text
        case nil: nil
        }
    }
    @usableFromInline let idField: JSONScanner.ScannedString?
    public let app: String?
    /// The job's token, or the first of a fan-out list (one outcome per token); the rest of the
    /// list apart, so that a job of one token (almost all) carries no array of tokens.
    public let token: DeviceToken
    public let otherTokens: [DeviceToken]
    /// A broadcast's channel id (base64), sent instead of a token (`token` is absent then).
    public let channel: String?
    /// What the producer says the channel keeps, for the broadcast rules (nil: not said).
    public let channelStorage: ChannelStorage?
    public let topic: String?
    public let pushType: PushType
    public let priority: Priority?
    public let expiration: Int64?
    public let collapseID: String?
    public let apnsID: String?
    /// The bytes that go to APNs: part of `raw` for raw payloads, the rendered bytes otherwise.
    public var payload: ArraySlice<UInt8> { rendered.map { $0[...] } ?? raw[payloadRange] }
    /// The same bytes, for the hot path (the I/O thread sends from them): valid while the job
    /// lives (it holds both buffers, and neither ever changes), so lent only through
    /// `withPayload`. A slice would count a reference on the buffer a batch's jobs share.
    @usableFromInline let payloadBytes: UnsafeRawBufferPointer
    /// The payload's size in bytes.
    public var payloadCount: Int { payloadBytes.count }

    /// Lends the payload's bytes to `body`, counting no reference; they must not escape it.
    @inlinable
    public func withPayload<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result { try body(payloadBytes) }
    private let payloadRange: Range<Int>
    private let rendered: [UInt8]?

    /// Where a job's payload is.
    public enum Payload {
        /// A range of `raw` (indices of the slice).
        case inRaw(Range<Int>)
        /// Bytes rendered from structured fields or a template.
        case rendered([UInt8])
    }
    /// What the job asked to send.
    public let content: Content
    /// Shorten the alert body to fit the size limit (nil: the app's setting).
    public let truncate: Bool?
    /// Send no earlier than this (UNIX seconds).
    public let sendAt: Int64?
    /// Overrides the retry policy's maximum number of attempts.
    public let maxAttempts: Int?

    /// The largest fan-out one job may carry.
    public static let maxTokens = 1000

    /// The producer's own `meta` object, copied into every record about the job and never read:
    /// its range in `raw`.
    public internal(set) var metaRange: Range<Int>?
    /// The producer's idempotency key: within the queue's window, one job per key is sent.
    public internal(set) var idempotencyKey: String?
    /// An FCM condition (`'a' in topics && 'b' in topics`), the target of a job without tokens.
    public internal(set) var condition: String?
    /// The largest `meta` a job may carry.
    public static let maxMetaBytes = 1024

    /// Lends `meta`'s JSON bytes, if the job has one.
    public func withMeta<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R? {
        guard let metaRange else { return nil }
        return raw.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[Self.offsets(of: metaRange, in: raw)])) }
    }

    /// The three ways a job says what to send.
    public enum Content: Sendable, Equatable {
        /// `payload`: an APNs payload object, sent byte for byte.
        case raw
        /// `notification`: structured fields (the object's range in `raw`).
        case notification(Range<Int>)
        /// `template`: a named template filled with `data` (its object's range in `raw`) for a locale.
        case template(name: String, locale: String?, data: Range<Int>?)
    }

    public convenience init(
        raw: ArraySlice<UInt8>, id: String?, app: String?, token: DeviceToken, otherTokens: [DeviceToken] = [], topic: String?,
        pushType: PushType, priority: Priority?, expiration: Int64?, collapseID: String?, apnsID: String?,
        payload: Payload, content: Content = .raw, truncate: Bool? = nil, sendAt: Int64?, maxAttempts: Int?,
        channel: String? = nil, channelStorage: ChannelStorage? = nil
    ) {
        self.init(
            raw: raw, idField: id.map { .decoded($0) }, app: app, token: token, otherTokens: otherTokens, topic: topic, pushType: pushType,
            priority: priority, expiration: expiration, collapseID: collapseID, apnsID: apnsID, payload: payload, content: content,
            truncate: truncate, sendAt: sendAt, maxAttempts: maxAttempts, channel: channel, channelStorage: channelStorage)
    }

    /// `idField`: a plain id's range is of `raw`'s indices.
    init(
        raw: ArraySlice<UInt8>, idField: JSONScanner.ScannedString?, app: String?, token: DeviceToken, otherTokens: [DeviceToken], topic: String?,
        pushType: PushType, priority: Priority?, expiration: Int64?, collapseID: String?, apnsID: String?,
        payload: Payload, content: Content, truncate: Bool?, sendAt: Int64?, maxAttempts: Int?,
        channel: String?, channelStorage: ChannelStorage?
    ) {
        self.channel = channel
        self.channelStorage = channelStorage
        switch payload {
        case .inRaw(let range):
            payloadRange = range
            rendered = nil
            payloadBytes = StableBytes.of(raw, offsets: Self.offsets(of: range, in: raw))
        case .rendered(let bytes):
            payloadRange = raw.startIndex..<raw.startIndex
            rendered = bytes
            payloadBytes = UnsafeRawBufferPointer(StableBytes.of(bytes))
        }
        self.content = content
        self.truncate = truncate
        self.raw = raw
        self.idField = idField
        self.app = app
        self.token = token
        self.otherTokens = otherTokens
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.sendAt = sendAt
        self.maxAttempts = maxAttempts
    }

    /// The id's UTF-8, and whether it is its JSON too (plain ASCII, no escapes); nil with no id.
    @inlinable
    public func withID<R>(_ body: (UnsafeBufferPointer<UInt8>, _ isPlainJSON: Bool) -> R) -> R? {
        switch idField {
        case .plain(let range)?:
            // Through the whole slice: a slice of it would count a reference on the buffer.
            raw.withUnsafeBufferPointer { body(UnsafeBufferPointer(rebasing: $0[Self.offsets(of: range, in: raw)]), true) }
        case .decoded(let text)?: text.withUTF8Bytes { body($0, false) }
        case nil: nil
        }
    }

    /// `range` of `raw`'s indices as offsets into its bytes (a slice need not start at 0).
    @usableFromInline
    static func offsets(of range: Range<Int>, in raw: ArraySlice<UInt8>) -> Range<Int> {
        (range.lowerBound - raw.startIndex)..<(range.upperBound - raw.startIndex)
    }

    /// Bytes of the id's UTF-8.
    @inlinable
    public var idCount: Int? {
        switch idField {
        case .plain(let range)?: range.count
        case .decoded(let text)?: text.utf8.count
        case nil: nil
        }
    }

    /// Every token of the job, in order.
    public var tokens: [DeviceToken] { [token] + otherTokens }
    public var tokenCount: Int { 1 + otherTokens.count }

    /// The same job with a rendered payload.
    public func rendered(_ payload: [UInt8]) -> Job {
        let job = Job(
            raw: raw, idField: idField, app: app, token: token, otherTokens: otherTokens, topic: topic, pushType: pushType, priority: priority,
            expiration: expiration, collapseID: collapseID, apnsID: apnsID, payload: .rendered(payload), content: content,
            truncate: truncate, sendAt: sendAt, maxAttempts: maxAttempts, channel: channel, channelStorage: channelStorage)
        job.idempotencyKey = idempotencyKey
        job.condition = condition
        return job
    }

    /// The longest idempotency key, in bytes.
    public static let maxIdempotencyKeyBytes = 128

    /// 1 to 128 visible ASCII characters (no space): a UUID, a hash, `order-1234:shipped`.
    static func checkIdempotencyKey(_ key: String) throws(JobRejection) {
        guard !key.isEmpty, key.utf8.count <= maxIdempotencyKeyBytes else {
            throw JobRejection(
                JobRejection.badIdempotencyKey, "\"idempotency_key\" must have 1 to \(maxIdempotencyKeyBytes) characters, not \(key.utf8.count)")
        }
        guard key.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw JobRejection(
                JobRejection.badIdempotencyKey, "\"idempotency_key\" takes visible ASCII characters only (no spaces, control or non-ASCII characters)"
            )
        }
    }
    public var effectivePriority: Priority { priority ?? pushType.defaultPriority }
    /// A broadcast to a channel, not a push to device tokens.
    public var isBroadcast: Bool { channel != nil }
    /// The payload limit of apns-protocol.md §4.1: a broadcast's is 5 KB whatever its push type.
    public var maxPayloadBytes: Int { isBroadcast ? BroadcastRules.maxPayloadBytes : pushType.maxPayloadBytes }
    /// What a job's records call its kind of payload limit, in errors.
    public var limitName: String { isBroadcast ? "a broadcast" : pushType.rawValue }
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

    /// The longest detail a record keeps: a job's own values in it (an app name of a megabyte)
    /// must not make its records large.
    public static let maxDetail = 1024

    /// This rejection with its detail cut to `maxDetail` characters.
    public var bounded: JobRejection {
        detail.count <= Self.maxDetail ? self : JobRejection(reason, String(detail.prefix(Self.maxDetail)) + "… (cut)")
    }

    public static let malformedJSON = "MalformedJob"
    public static let metaTooLarge = "MetaTooLarge"
    public static let unknownField = "UnknownField"
    public static let unsupportedVersion = "UnsupportedVersion"
    public static let wrongType = "WrongFieldType"
    public static let missingPayload = "MissingPayload"
    public static let unknownApp = "UnknownApp"
    public static let tooManyTokens = "TooManyTokens"
    public static let unknownTemplate = "UnknownTemplate"
    public static let missingPlaceholder = "MissingPlaceholder"
    public static let badPayloadForPushType = "BadPayloadForPushType"
    public static let noKeyForTopic = "NoKeyForTopic"
    public static let badIdempotencyKey = "BadIdempotencyKey"
}
