/// An `apns-id` as APNs sent it. Up to 40 bytes that a JSON string holds as they are (ASCII, no
/// quote, backslash or control character: a UUID has 36) are kept inline, so the answer to a
/// notification allocates nothing for its id and its record copies it without an escape check;
/// anything else is kept as a String.
public struct APNSID: Sendable, Equatable, CustomStringConvertible, ExpressibleByStringInterpolation {
    // Internal for the inlinable `withBytes` (see DeviceToken).
    @usableFromInline var words: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)
    @usableFromInline var length = 0
    @usableFromInline var text: String?

    private static let inlineCapacity = 40

    /// No id: empty. Code on the hot path keeps this rather than an optional id, whose copies
    /// and destroys go through generic value witnesses.
    public init() {}

    /// The header value's bytes.
    public init(_ bytes: UnsafeBufferPointer<UInt8>) {
        // Copied, and checked, eight bytes at a time.
        let inline =
            bytes.count <= Self.inlineCapacity
            && withUnsafeMutableBytes(of: &words) { out in
                ByteWord.copy(
                    bytes, to: out, word: { ByteWord.firstSpecialOrNonASCII($0) == nil ? $0 : nil },
                    byte: { ByteWord.isPlainJSON($0) ? $0 : nil })
            }
        guard inline else {
            words = (0, 0, 0, 0, 0)
            text = String(decoding: bytes, as: UTF8.self)
            return
        }
        length = bytes.count
    }

    public init(_ text: String) {
        var text = text
        self = text.withUTF8 { APNSID($0) }
    }

    public init(stringLiteral value: String) { self.init(value) }

    public init(stringInterpolation: DefaultStringInterpolation) { self.init(String(stringInterpolation: stringInterpolation)) }

    /// The id's UTF-8 bytes, valid inside `body`.
    @inlinable
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if var text { return text.withUTF8(body) }
        return withUnsafeBytes(of: words) { raw in
            body(UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: length))
        }
    }

    /// The bytes are a JSON string's content as they are (kept inline), so a record copies them.
    public var isPlainJSON: Bool { text == nil }
    /// FCM's message name (`projects/<id>/messages/<id>`), not an APNs UUID.
    public var isFCMName: Bool { withBytes { $0.starts(with: "projects/".utf8) } }

    public var description: String { text ?? withBytes { String(decoding: $0, as: UTF8.self) } }
    public var isEmpty: Bool { text?.isEmpty ?? (length == 0) }

    public static func == (a: APNSID, b: APNSID) -> Bool {
        a.withBytes { x in b.withBytes { y in x.elementsEqual(y) } }
    }
}
