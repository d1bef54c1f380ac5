/// A device token: the lowercase hex string that goes into `:path` (apns-protocol.md §2.1).
public struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    public let hex: String

    /// Apple says not to assume a size; we accept 8 to 200 hex digits (today's are 64).
    public static let lengthRange = 8...200

    public init?(_ text: String) {
        var text = text
        // One pass over contiguous bytes: every character a hex digit, and is any uppercase?
        let check: (valid: Bool, upper: Bool) = text.withUTF8 { bytes in
            guard DeviceToken.lengthRange.contains(bytes.count), bytes.count % 2 == 0 else { return (false, false) }
            var upper = false
            for b in bytes {
                guard hexValue(b) != nil else { return (false, false) }
                if b >= UInt8(ascii: "A") && b <= UInt8(ascii: "F") { upper = true }
            }
            return (true, upper)
        }
        guard check.valid else { return nil }
        hex = check.upper ? text.lowercased() : text
    }

    public var description: String { hex }
}
