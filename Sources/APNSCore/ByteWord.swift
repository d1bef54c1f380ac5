/// Tests on eight bytes at once (SWAR), for the loops every job's strings go through.
/// Each test is exact about whether some byte matches; it does not say which one.
enum ByteWord {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    static func load(_ p: UnsafePointer<UInt8>) -> UInt64 {
        UnsafeRawPointer(p).loadUnaligned(as: UInt64.self)
    }

    /// `count` (2-7) bytes in memory order, the rest of the word spaces. Two overlapping loads
    /// from the ends, so nothing past the bytes is read and nothing goes through memory (a copy
    /// into a word on the stack stalled the load that followed it).
    static func loadPadded(_ p: UnsafePointer<UInt8>, count: Int) -> UInt64 {
        let raw = UnsafeRawPointer(p)
        let spaces: UInt64 = 0x2020_2020_2020_2020 << (8 * count)
        if count >= 4 {
            let head = UInt64(raw.loadUnaligned(as: UInt32.self)), tail = UInt64(raw.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self))
            return head | tail << (8 * (count - 4)) | spaces
        }
        let head = UInt64(raw.loadUnaligned(as: UInt16.self)), tail = UInt64(raw.loadUnaligned(fromByteOffset: count - 2, as: UInt16.self))
        return head | tail << (8 * (count - 2)) | spaces
    }

    /// Copies `bytes` to `out` eight at a time, each word through `word`, then the last few one
    /// by one through `byte`; either returning nil stops the copy. Returns whether every byte
    /// passed. Checking and copying in one pass is how tokens and apns-ids are taken in.
    static func copy(
        _ bytes: UnsafeBufferPointer<UInt8>, to out: UnsafeMutableRawBufferPointer,
        word: (UInt64) -> UInt64?, byte: (UInt8) -> UInt8?
    ) -> Bool {
        var i = 0
        if let base = bytes.baseAddress {
            while i + 8 <= bytes.count {
                guard let w = word(load(base + i)) else { return false }
                out.storeBytes(of: w, toByteOffset: i, as: UInt64.self)
                i += 8
            }
        }
        while i < bytes.count {
            guard let b = byte(bytes[i]) else { return false }
            out[i] = b
            i += 1
        }
        return true
    }

    /// No byte is above 0x7F.
    static func isASCII(_ w: UInt64) -> Bool { w & highs == 0 }

    /// Some byte is below `limit` (at most 0x80).
    static func hasByte(below limit: UInt8, _ w: UInt64) -> Bool {
        (w &- ones &* UInt64(limit)) & ~w & highs != 0
    }

    static func hasByte(equalTo b: UInt8, _ w: UInt64) -> Bool {
        let x = w ^ (ones &* UInt64(b))
        return (x &- ones) & ~x & highs != 0
    }

    /// Each byte is at least `lo` and at most `hi` (both below 0x80), for ASCII bytes: a borrow
    /// cannot cross bytes, since none is above 0x7F.
    private static func allInRange(_ w: UInt64, _ lo: UInt8, _ hi: UInt8) -> UInt64 {
        let atLeast = w &+ ones &* UInt64(0x80 - lo), above = w &+ ones &* UInt64(0x7F - hi)
        return atLeast & ~above & highs
    }

    /// All eight bytes are hex digits, in either case.
    static func isHexDigits(_ w: UInt64) -> Bool {
        guard w & highs == 0 else { return false }
        // Setting bit 5 folds A-F onto a-f; of the other bytes only 0x10-0x19 fold onto digits,
        // so digits are checked unfolded.
        let folded = w | ones &* 0x20
        return allInRange(w, 0x30, 0x39) | allInRange(folded, 0x61, 0x66) == highs
    }

    /// A control character, `"` or `\`: what a JSON string escapes.
    static func hasJSONSpecial(_ w: UInt64) -> Bool {
        hasByte(below: 0x20, w) || hasByte(equalTo: UInt8(ascii: "\""), w) || hasByte(equalTo: UInt8(ascii: "\\"), w)
    }

    /// One byte of plain string content: ASCII, not a control character, `"` or `\` (the test
    /// `firstSpecialOrNonASCII` makes of eight at once).
    @inline(__always)
    static func isPlainJSON(_ b: UInt8) -> Bool {
        b >= 0x20 && b < 0x80 && b != UInt8(ascii: "\"") && b != UInt8(ascii: "\\")
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
