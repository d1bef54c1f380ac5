import APNSCore
import TLS

/// One configured app, ready to send: its TLS context and, for token auth, its shared JWT.
public final class AppRuntime: Sendable {
    public let configuration: APNSApp
    public let tls: TLSContext
    /// nil for certificate auth.
    public let jwt: JWTProvider?

    public var name: String { configuration.name }

    public var poolKey: String { configuration.poolKey }

    public init(_ configuration: APNSApp, jwt: JWTProvider?) throws {
        self.configuration = configuration
        let identity: TLSContext.ClientIdentity?
        switch configuration.credential {
        case .token: identity = nil
        case .certificate(let cert, let key): identity = .pem(certificateFile: cert, keyFile: key)
        case .pkcs12(let file, let password): identity = .pkcs12(file: file, password: password)
        }
        do {
            tls = try TLSContext(clientWithCAFile: configuration.endpoint.caFile, identity: identity)
        } catch {
            throw TransportSetupError("app \(configuration.name): TLS set-up failed: \(error)")
        }
        self.jwt = jwt
    }
}
