/// What a job's JSON says about itself (id, app, token, topic, meta), read leniently from a job
/// that failed its checks, so that its records still name it for the producer's backend. Each
/// value is bounded: a hostile job cannot make its records large.
public struct JobNames: Sendable, Equatable {
    public var id: String?
    public var app: String?
    /// As given (the first of `tokens`), even when it is not a valid token.
    public var token: String?
    public var topic: String?
    /// A broadcast's channel id, as given.
    public var channel: String?
    /// The job's `meta` object, byte for byte, when it is one within `Job.maxMetaBytes`.
    public var meta: [UInt8]?

    /// Longer values are cut, with "…".
    public static let maxValue = 256

    public init() {}

    /// Reads what it can of `bytes`; what follows a syntax error is left out.
    public init(scanning bytes: ArraySlice<UInt8>) {
        bytes.withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            try? s.forEachMember { (key, s) throws(JSONSyntaxError) in
                let (kind, range) = try s.skipValue()
                let value = UnsafeBufferPointer(rebasing: buf[range])
                switch (key, kind) {
                case ("id", .string): id = Self.string(value)
                case ("app", .string): app = Self.string(value)
                case ("topic", .string): topic = Self.string(value)
                case ("channel", .string): channel = Self.string(value)
                case ("token", .string): token = Self.string(value)
                case ("tokens", .array) where token == nil: token = Self.firstString(value)
                case ("meta", .object) where range.count <= Job.maxMetaBytes: meta = Array(value)
                default: break
                }
            }
        }
    }

    private static func string(_ json: UnsafeBufferPointer<UInt8>) -> String? {
        var s = JSONScanner(json)
        guard let text = try? s.readString() else { return nil }
        return text.count > maxValue ? String(text.prefix(maxValue)) + "…" : text
    }

    private static func firstString(_ json: UnsafeBufferPointer<UInt8>) -> String? {
        var s = JSONScanner(json)
        guard (try? s.expect(UInt8(ascii: "["))) != nil, (try? s.peek()) == UInt8(ascii: "\""), let (_, range) = try? s.skipValue() else {
            return nil
        }
        return string(UnsafeBufferPointer(rebasing: json[range]))
    }
}
