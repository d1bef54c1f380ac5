/// The fields of a Google service-account JSON file that FCM needs (fcm-protocol.md §3.1).
/// `privateKeyPEM` is a secret: `description` never shows it, nor does any error.
public struct FCMServiceAccount: Sendable, Equatable, CustomStringConvertible {
    public var projectID: String
    public var clientEmail: String
    public var privateKeyID: String
    public var privateKeyPEM: String
    public var tokenURI: String

    public init(projectID: String, clientEmail: String, privateKeyID: String, privateKeyPEM: String, tokenURI: String) {
        self.projectID = projectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.privateKeyPEM = privateKeyPEM
        self.tokenURI = tokenURI
    }

    public var description: String { "FCMServiceAccount(\(clientEmail), project \(projectID), key \(privateKeyID))" }

    public static let googleTokenURI = "https://oauth2.googleapis.com/token"

    /// Reads the file's JSON; an error names the field to fix (`source`: the file, for errors),
    /// and never quotes a value of the file.
    public static func parse(_ bytes: [UInt8], source: String) throws(FCMSetupError) -> FCMServiceAccount {
        guard let json = try? JSONValue.parse(bytes), case .object(let fields) = json else {
            throw FCMSetupError("\(source) is not a JSON object (a service-account key file from the Firebase console)")
        }
        func required(_ name: String) throws(FCMSetupError) -> String {
            guard let value = fields[name]?.string, !value.isEmpty else {
                throw FCMSetupError("\(source): \"\(name)\" is missing or not a string (a service-account key file has it)")
            }
            return value
        }
        let type = try required("type")
        guard type == "service_account" else {
            throw FCMSetupError("\(source): \"type\" is not \"service_account\" (FCM needs a service-account key, not a user's credentials)")
        }
        let account = FCMServiceAccount(
            projectID: try required("project_id"), clientEmail: try required("client_email"), privateKeyID: try required("private_key_id"),
            privateKeyPEM: try required("private_key"), tokenURI: try required("token_uri"))
        guard account.privateKeyPEM.contains("-----BEGIN") else {
            throw FCMSetupError("\(source): \"private_key\" is not a PEM key")
        }
        guard HTTPSURL(account.tokenURI) != nil else {
            throw FCMSetupError("\(source): \"token_uri\" is not an https:// URL")
        }
        return account
    }

    /// The file's JSON, as the Firebase console writes it (tests, the demo and the mock).
    public var json: [UInt8] {
        var w = JSONWriter(capacity: 2048)
        w.beginObject()
        w.field("type", "service_account")
        w.field("project_id", projectID)
        w.field("private_key_id", privateKeyID)
        w.field("private_key", privateKeyPEM)
        w.field("client_email", clientEmail)
        w.field("token_uri", tokenURI)
        w.endObject()
        return w.bytes
    }
}

/// An FCM set-up that cannot work (a service-account file, its key, a token endpoint), named.
public struct FCMSetupError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// `https://host[:port]/path`, as a service account's `token_uri` gives it.
public struct HTTPSURL: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var path: String

    public init?(_ text: String) {
        guard text.hasPrefix("https://") else { return nil }
        let rest = text.dropFirst("https://".count)
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        path = slash == rest.endIndex ? "/" : String(rest[slash...])
        if let colon = authority.lastIndex(of: ":") {
            guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else { return nil }
            host = String(authority[..<colon])
            port = p
        } else {
            host = String(authority)
            port = 443
        }
        guard !host.isEmpty, !host.contains(where: { $0 == "@" || $0 == " " || $0 == "?" || $0 == "#" }),
            !path.contains(where: { $0.isWhitespace || $0.asciiValue.map { $0 < 0x20 } ?? false })
        else { return nil }
    }

    public var text: String { "https://\(host)\(port == 443 ? "" : ":\(port)")\(path)" }
}

/// The OAuth 2.0 JWT assertion a service account signs (fcm-protocol.md §3.2): header
/// `{"alg":"RS256","typ":"JWT","kid":…}`, claims `iss`, `scope`, `aud`, `iat`, `exp` (an hour at
/// most after `iat`). The TLS edge signs it.
public struct FCMAssertion: Sendable, Equatable {
    public var keyID: String
    public var issuer: String
    public var scope: String
    public var audience: String
    public var issuedAt: Int64
    public var expiresAt: Int64

    public static let messagingScope = "https://www.googleapis.com/auth/firebase.messaging"
    public static let cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"
    public static let lifetimeSeconds: Int64 = 3600

    public init(account: FCMServiceAccount, issuedAt: Int64) {
        keyID = account.privateKeyID
        issuer = account.clientEmail
        scope = Self.messagingScope
        audience = account.tokenURI
        self.issuedAt = issuedAt
        expiresAt = issuedAt + Self.lifetimeSeconds
    }

    public init(keyID: String, issuer: String, scope: String, audience: String, issuedAt: Int64, expiresAt: Int64) {
        self.keyID = keyID
        self.issuer = issuer
        self.scope = scope
        self.audience = audience
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
    }

    /// `b64url(header) "." b64url(claims)`: the bytes the signature covers.
    public var signingInput: String {
        var header = JSONWriter(capacity: 64)
        header.beginObject(); header.field("alg", "RS256"); header.field("typ", "JWT"); header.field("kid", keyID); header.endObject()
        var claims = JSONWriter(capacity: 256)
        claims.beginObject()
        claims.field("iss", issuer); claims.field("scope", scope); claims.field("aud", audience)
        claims.field("iat", issuedAt); claims.field("exp", expiresAt)
        claims.endObject()
        return Base64URL.encode(header.bytes) + "." + Base64URL.encode(claims.bytes)
    }

    /// The token request's form body (fcm-protocol.md §3.3) for a signed assertion.
    public static func formBody(assertion: String) -> [UInt8] {
        Array("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)".utf8)
    }

    /// Splits `header.claims.signature` and reads what a token endpoint checks; nil for anything
    /// that is not a well-formed RS256 JWT with these claims.
    public static func decode(_ jwt: Substring) -> (assertion: FCMAssertion, signingInput: Substring, signature: [UInt8])? {
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerJSON = Base64URL.decode(parts[0]), let claimsJSON = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else { return nil }
        let header = JWTClaims.readFlatObject(headerJSON)
        let body = JWTClaims.readFlatObject(claimsJSON)
        guard case .string("RS256")? = header["alg"], case .string(let kid)? = header["kid"], case .string(let iss)? = body["iss"],
            case .string(let scope)? = body["scope"], case .string(let aud)? = body["aud"], case .int(let iat)? = body["iat"],
            case .int(let exp)? = body["exp"]
        else { return nil }
        let assertion = FCMAssertion(keyID: kid, issuer: iss, scope: scope, audience: aud, issuedAt: iat, expiresAt: exp)
        return (assertion, jwt[jwt.startIndex..<parts[1].endIndex], signature)
    }
}
