/// A provider's refusal (an APNs error answer today), with the server's data kept (DESIGN.md §5).
public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    public let reason: APNSReason
    public let apnsID: String?
    /// Milliseconds since the epoch when APNs learned the token was invalid (410 only).
    public let timestamp: Int64?
    /// What the provider said beyond its reason: FCM's message and field violations.
    public let detail: String?
    /// The answer's `retry-after`, in milliseconds, when it had one.
    public let retryAfterMs: Int?

    public init(status: Int, reason: APNSReason, apnsID: String?, timestamp: Int64?, detail: String? = nil, retryAfterMs: Int? = nil) {
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.timestamp = timestamp
        self.detail = detail
        self.retryAfterMs = retryAfterMs
    }

    public var description: String { "\(status) \(reason)" }

    /// Reads `{"reason":"…","timestamp":…}`; a body that is not JSON keeps its text as the reason.
    public static func parse(status: Int, body: [UInt8], apnsID: String?) -> Rejection {
        var reason: String?
        var timestamp: Int64?
        body.withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            do {
                try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                    switch (key, try s.peek()) {
                    case ("reason", UInt8(ascii: "\"")): reason = try s.readString()
                    case ("timestamp", let c) where c == UInt8(ascii: "-") || isDigit(c): timestamp = try s.readInt()
                    default: try s.skipValue()
                    }
                }
            } catch {
                if reason == nil, !body.isEmpty { reason = String(decoding: body.prefix(200), as: UTF8.self) }
            }
        }
        return Rejection(status: status, reason: APNSReason(reason ?? "HTTP\(status)"), apnsID: apnsID, timestamp: timestamp)
    }
}
