import Buffers

/// A device token: the lowercase hex that goes into `:path` (apns-protocol.md §2.1).
///
/// Today's tokens (64 hex digits) are kept inline, like `APNSID`: a job's token allocates
/// nothing and counts no reference on its way through fetching, sending and recording.
/// A longer one is kept as a String.
public struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    // Internal for the inlinable `withHex`: unspecialized, it went through a generic thunk
    // and a copy of the words for each use (a path per request, a record per job).
    @usableFromInline var words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    @usableFromInline var length = 0
    @usableFromInline var long: String?

    private static let inlineCapacity = 64

    /// Apple says not to assume a size; we accept 8 to 200 hex digits (today's are 64).
    public static let lengthRange = 8...200

    public init?(_ text: String) {
        guard let token = text.withUTF8Bytes({ DeviceToken(utf8: $0) }) else { return nil }
        self = token
    }

    /// No token, for a value that must be there: it has no digits.
    public static var absent: DeviceToken { DeviceToken() }
    public var isAbsent: Bool { length == 0 && long == nil }
    private init() {}

    /// Hex digits in either case; nil unless there is an even number of them, in `lengthRange`.
    public init?(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        guard Self.lengthRange.contains(bytes.count), bytes.count % 2 == 0 else { return nil }
        guard bytes.count <= Self.inlineCapacity else {
            guard bytes.allSatisfy({ hexValue($0) != nil }) else { return nil }
            long = String(decoding: bytes.lazy.map { $0 | 0x20 }, as: UTF8.self)
            return
        }
        // Checked and copied in one pass, eight digits at a time. Setting bit 5 lowercases A-F
        // and leaves digits as they are.
        let valid = withUnsafeMutableBytes(of: &words) { out in
            ByteWord.copy(
                bytes, to: out, word: { ByteWord.isHexDigits($0) ? $0 | 0x2020_2020_2020_2020 : nil },
                byte: { hexValue($0) != nil ? $0 | 0x20 : nil })
        }
        guard valid else { return nil }
        length = bytes.count
    }

    /// The hex digits' bytes, valid inside `body`.
    @inlinable
    public func withHex<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let long { return try long.withUTF8Bytes(body) }
        return try withUnsafeBytes(of: words) { raw in
            try body(UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: length))
        }
    }

    /// The token's text: lowercase hex, or a registration token as given.
    public var hex: String { long ?? withHex { String(decoding: $0, as: UTF8.self) } }
    public var utf8Count: Int { long?.utf8.count ?? length }
    public var description: String { hex }

    /// An FCM registration token (fcm-protocol.md §6): any 8 to 4096 visible ASCII characters,
    /// kept as they are. It is not hex, so an APNs app refuses it (`isHex`).
    public init?(registration bytes: UnsafeBufferPointer<UInt8>) {
        guard Self.registrationLengthRange.contains(bytes.count), bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        long = String(decoding: bytes, as: UTF8.self)
        length = -1
    }

    public static let registrationLengthRange = 8...4096

    /// Hex digits an APNs path can carry; false for a registration token.
    public var isHex: Bool { length >= 0 }

    public static func == (a: DeviceToken, b: DeviceToken) -> Bool {
        a.withHex { x in b.withHex { y in x.elementsEqual(y) } }
    }

    public func hash(into hasher: inout Hasher) {
        withHex { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

extension DeviceToken {
    /// Why a token of `n` characters cannot go to APNs.
    public static func hexProblem(characters n: Int) -> JobRejection {
        if n % 2 == 0 && lengthRange.contains(n) {
            return JobRejection(.badDeviceToken, "token must be hex digits (0-9, a-f): its \(n) characters include others")
        }
        return JobRejection(
            .badDeviceToken, "token must be an even number of hex digits (\(lengthRange.lowerBound)-\(lengthRange.upperBound)), got \(n) characters")
    }

    /// The job's tokens, checked for an APNs app: all hex.
    public static func requireHex(_ job: Job) throws(JobRejection) {
        guard job.token.isHex, job.otherTokens.allSatisfy(\.isHex) else {
            let bad = job.tokens.first { !$0.isHex }!
            throw hexProblem(characters: bad.utf8Count)
        }
    }
}
