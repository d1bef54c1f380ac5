/// A device token: the lowercase hex string that goes into `:path` (apns-protocol.md §2.1).
public struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    public let hex: String

    /// Apple says not to assume a size; we accept 8 to 200 hex digits (today's are 64).
    public static let lengthRange = 8...200

    public init?(_ text: String) {
        let utf8 = text.utf8
        guard DeviceToken.lengthRange.contains(utf8.count), utf8.count % 2 == 0,
              utf8.allSatisfy({ hexValue($0) != nil }) else { return nil }
        hex = utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "F") }) ? text.lowercased() : text
    }

    public var description: String { hex }
}
