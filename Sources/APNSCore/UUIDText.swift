/// Canonical UUID text (8-4-4-4-12 hex), the form `apns-id` takes.
public enum UUIDText {
    public static func isValid(_ text: String) -> Bool {
        let u = Array(text.utf8)
        guard u.count == 36 else { return false }
        for (i, c) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if hexValue(c) == nil {
                return false
            }
        }
        return true
    }

    /// A random version-4 UUID in lowercase. Inlinable, so that a caller's generator is called
    /// directly, not through witness tables.
    @inlinable
    public static func random<G: RandomNumberGenerator>(using rng: inout G) -> String {
        // Two draws, not sixteen: each draw from the system generator is a syscall.
        let (hi, lo) = (rng.next(), rng.next())
        return String(unsafeUninitializedCapacity: 36) { out in
            write(hi, lo, to: UnsafeMutableRawPointer(out.baseAddress!))
            return 36
        }
    }

    /// `random(using:)` as an `APNSID`, kept inline: no String is made.
    @inlinable
    public static func randomID<G: RandomNumberGenerator>(using rng: inout G) -> APNSID {
        let (hi, lo) = (rng.next(), rng.next())
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { out in
            write(hi, lo, to: UnsafeMutableRawPointer(out.baseAddress!))
            return APNSID(UnsafeBufferPointer(out))
        }
    }

    /// The 36 bytes of the version-4 UUID of two draws, 8-4-4-4-12, eight digits at a time.
    @inlinable
    static func write(_ hi: UInt64, _ lo: UInt64, to raw: UnsafeMutableRawPointer) {
        let b = hexDigits(UInt32(truncatingIfNeeded: hi)), c = hexDigits(UInt32(truncatingIfNeeded: lo >> 32))
        raw.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: hi >> 32)), toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: b), toByteOffset: 9, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: b >> 32), toByteOffset: 14, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: c), toByteOffset: 19, as: UInt32.self)
        raw.storeBytes(of: UInt32(truncatingIfNeeded: c >> 32), toByteOffset: 24, as: UInt32.self)
        raw.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: lo)), toByteOffset: 28, as: UInt64.self)
        raw.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 8, as: UInt8.self)
        raw.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 13, as: UInt8.self)
        raw.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 18, as: UInt8.self)
        raw.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 23, as: UInt8.self)
        raw.storeBytes(of: UInt8(ascii: "4"), toByteOffset: 14, as: UInt8.self)  // version 4
        // The RFC 4122 variant: 8, 9, a or b, from the top two bits of `lo`.
        let variant = UInt8(truncatingIfNeeded: lo >> 62)
        raw.storeBytes(of: UInt8(ascii: "8") &+ variant &+ (variant >= 2 ? 39 : 0), toByteOffset: 19, as: UInt8.self)
    }

    /// `x` as eight lowercase hex digits, the first in the lowest byte (first in memory on
    /// this little-endian machine).
    @inlinable
    static func hexDigits(_ x: UInt32) -> UInt64 {
        // Each nibble into a byte of its own, then '0'-'9' or 'a'-'f' for all eight at once.
        var z = UInt64(x)
        z = (z | z << 16) & 0x0000_FFFF_0000_FFFF
        z = (z | z << 8) & 0x00FF_00FF_00FF_00FF
        z = ((z | z << 4) & 0x0F0F_0F0F_0F0F_0F0F).byteSwapped
        let letters = (z &+ 0x0606_0606_0606_0606) >> 4 & 0x0101_0101_0101_0101
        return z &+ 0x3030_3030_3030_3030 &+ letters &* 0x27
    }

    public static func random() -> String {
        var g = SystemRandomNumberGenerator()
        return random(using: &g)
    }
}

/// SplitMix64: a fast generator for identifiers that need to be unique, not secret (the mock's
/// `apns-id`s). Seeded once from the system generator.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    /// The same sequence for the same seed (tests).
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
