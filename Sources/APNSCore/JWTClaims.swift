/// The provider token's JSON parts (apns-protocol.md §6.1): `{"alg":"ES256","kid":…}` and
/// `{"iss":<team>,"iat":<seconds>}`. Signing is done by the TLS edge, which owns OpenSSL.
public struct JWTClaims: Sendable, Equatable {
    public let keyID: String
    public let teamID: String
    public let issuedAt: Int64

    public init(keyID: String, teamID: String, issuedAt: Int64) {
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
    }

    /// `b64url(header) "." b64url(claims)`: the bytes the signature covers.
    public var signingInput: String {
        var header = JSONWriter(capacity: 48)
        header.beginObject(); header.field("alg", "ES256"); header.field("kid", keyID); header.endObject()
        var claims = JSONWriter(capacity: 48)
        claims.beginObject(); claims.field("iss", teamID); claims.field("iat", issuedAt); claims.endObject()
        return Base64URL.encode(header.bytes) + "." + Base64URL.encode(claims.bytes)
    }

    /// Splits `header.claims.signature` and reads the fields APNs checks.
    /// Returns nil for anything that is not a well-formed ES256 JWT.
    public static func decode(_ token: String) -> (claims: JWTClaims, signingInput: Substring, signature: [UInt8])? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerJSON = Base64URL.decode(parts[0]),
            let claimsJSON = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { return nil }
        let header = readFlatObject(headerJSON)
        let body = readFlatObject(claimsJSON)
        guard case .string("ES256")? = header["alg"], case .string(let kid)? = header["kid"],
            case .string(let iss)? = body["iss"], case .int(let iat)? = body["iat"]
        else { return nil }
        let inputEnd = parts[1].endIndex
        return (JWTClaims(keyID: kid, teamID: iss, issuedAt: iat), token[token.startIndex..<inputEnd], signature)
    }

    enum FlatValue { case string(String), int(Int64), other }

    /// Reads a one-level JSON object of strings and integers.
    static func readFlatObject(_ bytes: [UInt8]) -> [String: FlatValue] {
        var out: [String: FlatValue] = [:]
        bytes.withUnsafeBufferPointer { buf in
            var s = JSONScanner(buf)
            do {
                try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                    let c = try s.peek()
                    if c == UInt8(ascii: "\"") {
                        out[key] = .string(try s.readString())
                    } else if c == UInt8(ascii: "-") || isDigit(c) {
                        out[key] = .int(try s.readInt())
                    } else {
                        try s.skipValue()
                        out[key] = .other
                    }
                }
                try s.expectEnd()
            } catch {
                out = [:]
            }
        }
        return out
    }
}
