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
    /// directly: unspecialized, each draw and each byte went through witness tables (2,600
    /// instructions an id in the mock, callgrind).
    @inlinable
    public static func random<G: RandomNumberGenerator>(using rng: inout G) -> String {
        // Two draws, not sixteen: each draw from the system generator is a syscall.
        let (hi, lo) = (rng.next(), rng.next())
        return String(unsafeUninitializedCapacity: 36) { out in
            let digits: StaticString = "0123456789abcdef"
            var o = 0
            for i in 0..<16 {
                var v = UInt8(truncatingIfNeeded: (i < 8 ? hi : lo) >> (UInt64(i % 8) * 8))
                if i == 6 { v = v & 0x0F | 0x40 } // version 4
                if i == 8 { v = v & 0x3F | 0x80 } // the RFC 4122 variant
                if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = UInt8(ascii: "-"); o += 1 }
                out[o] = digits.utf8Start[Int(v >> 4)]
                out[o + 1] = digits.utf8Start[Int(v & 15)]
                o += 2
            }
            return o
        }
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

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
