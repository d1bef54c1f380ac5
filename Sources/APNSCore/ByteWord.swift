/// Tests on eight bytes at once (SWAR), for the loops every job's strings go through.
/// Each test is exact about whether some byte matches; it does not say which one.
enum ByteWord {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    static func load(_ p: UnsafePointer<UInt8>) -> UInt64 {
        UnsafeRawPointer(p).loadUnaligned(as: UInt64.self)
    }

    /// Some byte is below `limit` (at most 0x80).
    static func hasByte(below limit: UInt8, _ w: UInt64) -> Bool {
        (w &- ones &* UInt64(limit)) & ~w & highs != 0
    }

    static func hasByte(equalTo b: UInt8, _ w: UInt64) -> Bool {
        let x = w ^ (ones &* UInt64(b))
        return (x &- ones) & ~x & highs != 0
    }

    /// A control character, `"` or `\`: what a JSON string escapes.
    static func hasJSONSpecial(_ w: UInt64) -> Bool {
        hasByte(below: 0x20, w) || hasByte(equalTo: UInt8(ascii: "\""), w) || hasByte(equalTo: UInt8(ascii: "\\"), w)
    }

    /// The offset (0-7, in memory order) of the first byte that is not plain string content:
    /// a control character, `"`, `\` or a non-ASCII byte; nil if there is none. Each test's
    /// lowest flagged byte is exact (a borrow only flags bytes above a true match), so the
    /// lowest of them all is the first such byte.
    static func firstSpecialOrNonASCII(_ w: UInt64) -> Int? {
        let below = (w &- ones &* 0x20) & ~w & highs
        let q = w ^ (ones &* UInt64(UInt8(ascii: "\""))), quote = (q &- ones) & ~q & highs
        let b = w ^ (ones &* UInt64(UInt8(ascii: "\\"))), backslash = (b &- ones) & ~b & highs
        let mask = below | quote | backslash | (w & highs)
        return mask == 0 ? nil : mask.trailingZeroBitCount >> 3
    }
}
