import APNSCore
import Delivery
import TLS

/// One configured app, ready to send: its TLS context and, for token auth, its shared bearer
/// credential (APNs's JWT, or an FCM app's OAuth token).
public final class AppRuntime: Sendable {
    public let configuration: APNSApp
    public let tls: TLSContext
    /// APNs's provider token; nil for certificate auth and FCM apps.
    public let jwt: JWTProvider?
    /// What `authorization` carries: the JWT, or an FCM app's access token.
    public let credential: BearerCredential?
    /// An FCM app's send path (`/v1/projects/<id>/messages:send`); nil for an APNs app.
    public let fcmPath: String?

    public var name: String { configuration.name }

    public var poolKey: String { configuration.poolKey }

    public var isFCM: Bool { fcmPath != nil }

    public init(_ configuration: APNSApp, jwt: JWTProvider?) throws {
        self.configuration = configuration
        tls = try Self.tls(for: configuration)
        self.jwt = jwt
        credential = jwt
        fcmPath = nil
    }

    /// An FCM app of `projectID`, sending with `token`'s access tokens (fcm-protocol.md §1-3).
    public init(_ configuration: APNSApp, fcmProject projectID: String, token: BearerCredential) throws {
        self.configuration = configuration
        tls = try Self.tls(for: configuration)
        jwt = nil
        credential = token
        fcmPath = "/v1/projects/\(projectID)/messages:send"
    }

    private static func tls(for configuration: APNSApp) throws -> TLSContext {
        let identity: TLSContext.ClientIdentity?
        switch configuration.credential {
        case .token, .serviceAccount: identity = nil
        case .certificate(let cert, let key): identity = .pem(certificateFile: cert, keyFile: key)
        case .pkcs12(let file, let password): identity = .pkcs12(file: file, password: password)
        }
        do {
            return try TLSContext(clientWithCAFile: configuration.endpoint.caFile, identity: identity)
        } catch {
            throw TransportSetupError("app \(configuration.name): TLS set-up failed: \(error)")
        }
    }
}
