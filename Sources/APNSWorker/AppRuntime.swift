import HTTP2TLS

/// One configured app, ready to send: its TLS context and, for token auth, its shared JWT.
public final class AppRuntime: Sendable {
    public let configuration: AppConfiguration
    public let tls: TLSContext
    /// nil for certificate auth.
    public let jwt: JWTProvider?

    public var name: String { configuration.name }

    /// Apps with the same key share connections: same endpoint and same credential
    /// (team + key, or certificate). One team per connection follows.
    public var poolKey: String {
        let e = configuration.endpoint
        let credential: String
        switch configuration.auth {
        case .token(let team, let kid, _): credential = "token:\(team)/\(kid)"
        case .certificate(let cert, let key): credential = "cert:\(cert)|\(key)"
        case .pkcs12(let file, _): credential = "p12:\(file)"
        }
        return "\(e.host):\(e.port)/\(e.serverName)/\(e.caFile ?? "system")/\(credential)"
    }

    public init(_ configuration: AppConfiguration, jwt: JWTProvider?) throws {
        self.configuration = configuration
        let identity: TLSContext.ClientIdentity?
        switch configuration.auth {
        case .token: identity = nil
        case .certificate(let cert, let key): identity = .pem(certificateFile: cert, keyFile: key)
        case .pkcs12(let file, let password): identity = .pkcs12(file: file, password: password)
        }
        do {
            tls = try TLSContext(clientWithCAFile: configuration.endpoint.caFile, identity: identity)
        } catch {
            throw ConfigurationError("app \(configuration.name): TLS set-up failed: \(error)")
        }
        self.jwt = jwt
    }
}
