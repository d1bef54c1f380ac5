/// How an app proves itself: to APNs, a token key (`.p8`) or a certificate (PEM or PKCS#12);
/// to FCM, a Google service account's key file (its project, unless the app names another).
public enum APNSCredential: Sendable, Equatable {
    case token(teamID: String, keyID: String, keyFile: String)
    case certificate(certificateFile: String, keyFile: String)
    case pkcs12(file: String, password: String)
    case serviceAccount(file: String, projectID: String?)

    /// An FCM app's.
    public var isFCM: Bool { if case .serviceAccount = self { true } else { false } }
}

/// Where APNs is: Apple's two environments, or any host (a staging proxy, the mock).
public struct APNSEndpoint: Sendable, Equatable {
    public var host: String
    public var port: Int
    /// nil: the system trust store.
    public var caFile: String?
    /// The name checked against the server certificate and sent as SNI.
    public var serverName: String

    public static let production = APNSEndpoint(host: "api.push.apple.com", port: 443, caFile: nil, serverName: "api.push.apple.com")
    public static let development = APNSEndpoint(host: "api.sandbox.push.apple.com", port: 443, caFile: nil, serverName: "api.sandbox.push.apple.com")

    /// FCM's HTTP v1 API (fcm-protocol.md §1).
    public static let fcm = APNSEndpoint(host: "fcm.googleapis.com", port: 443, caFile: nil, serverName: "fcm.googleapis.com")

    public static let manageProduction = APNSEndpoint(
        host: "api-manage-broadcast.push.apple.com", port: 2196, caFile: nil, serverName: "api-manage-broadcast.push.apple.com")
    public static let manageDevelopment = APNSEndpoint(
        host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195, caFile: nil,
        serverName: "api-manage-broadcast.sandbox.push.apple.com")

    /// The channel-management endpoint that goes with this push endpoint: Apple's own for
    /// Apple's hosts, else this host on `port` (default 2196).
    public func channelsEndpoint(port: Int?) -> APNSEndpoint {
        if self == .production && port == nil { return .manageProduction }
        if self == .development && port == nil { return .manageDevelopment }
        return APNSEndpoint(host: host, port: port ?? 2196, caFile: caFile, serverName: serverName)
    }

    public init(host: String, port: Int, caFile: String?, serverName: String? = nil) {
        self.host = host
        self.port = port
        self.caFile = caFile
        self.serverName = serverName ?? host
    }

    /// Apps with the same endpoint and credential (team + key, or certificate) share
    /// connections: one team per connection follows.
    public func poolKey(_ credential: APNSCredential) -> String {
        let who: String
        switch credential {
        case .token(let team, let kid, _): who = "token:\(team)/\(kid)"
        case .certificate(let cert, let key): who = "cert:\(cert)|\(key)"
        case .pkcs12(let file, _): who = "p12:\(file)"
        case .serviceAccount(let file, let project): who = "fcm:\(file)/\(project ?? "")"
        }
        return "\(host):\(port)/\(serverName)/\(caFile ?? "system")/\(who)"
    }
}
