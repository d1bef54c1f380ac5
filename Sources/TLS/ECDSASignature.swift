/// Converts ECDSA P-256 signatures between DER (what OpenSSL produces) and the raw
/// `r‖s` form that JWS ES256 requires (RFC 7518 §3.4).
public enum ECDSASignature {
    public struct FormatError: Error, Equatable, Sendable { public let message: String }

    /// DER `SEQUENCE { INTEGER r, INTEGER s }` → 64 bytes `r‖s`, each left-padded to 32 bytes.
    public static func rawFromDER(_ der: [UInt8]) throws(FormatError) -> [UInt8] {
        var i = 0
        func byte() throws(FormatError) -> UInt8 {
            guard i < der.count else { throw FormatError(message: "truncated DER signature") }
            defer { i += 1 }
            return der[i]
        }
        func length() throws(FormatError) -> Int {
            let first = try byte()
            if first < 0x80 { return Int(first) }
            guard first == 0x81 else { throw FormatError(message: "unsupported DER length") }
            return Int(try byte())
        }
        func integer() throws(FormatError) -> [UInt8] {
            guard try byte() == 0x02 else { throw FormatError(message: "expected DER INTEGER") }
            let n = try length()
            guard n > 0, i + n <= der.count else { throw FormatError(message: "bad DER INTEGER length") }
            var value = Array(der[i..<i + n])
            i += n
            while value.count > 1, value[0] == 0 { value.removeFirst() }
            guard value.count <= 32 else { throw FormatError(message: "DER INTEGER longer than 32 bytes") }
            return [UInt8](repeating: 0, count: 32 - value.count) + value
        }
        guard try byte() == 0x30 else { throw FormatError(message: "expected DER SEQUENCE") }
        let total = try length()
        guard i + total == der.count else { throw FormatError(message: "DER length mismatch") }
        let r = try integer()
        let s = try integer()
        guard i == der.count else { throw FormatError(message: "trailing bytes in DER signature") }
        return r + s
    }

    /// 64 bytes `r‖s` → DER, with the minimal INTEGER encodings.
    public static func derFromRaw(_ raw: [UInt8]) throws(FormatError) -> [UInt8] {
        guard raw.count == 64 else { throw FormatError(message: "raw ES256 signature must be 64 bytes, got \(raw.count)") }
        func integer(_ part: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(part.drop(while: { $0 == 0 }))
            if v.isEmpty { v = [0] }
            if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02, UInt8(v.count)] + v
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(body.count)] + body
    }
}
