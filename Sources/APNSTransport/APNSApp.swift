import APNSCore

/// What the transport needs to know of one app: where it sends and as whom. The pipeline maps
/// it from the worker's settings; the transport reads nothing else of them.
public struct APNSApp: Sendable {
    public var name: String
    public var bundleID: String
    public var endpoint: APNSEndpoint
    /// Where the channel-management API is (apns-protocol.md §3.2).
    public var channelsEndpoint: APNSEndpoint
    public var credential: APNSCredential
    /// Requests a second for this app at most (shared with apps of the same pool); nil: no cap.
    public var maxRate: Int?

    public init(
        name: String, bundleID: String, endpoint: APNSEndpoint, channelsEndpoint: APNSEndpoint, credential: APNSCredential, maxRate: Int?
    ) {
        self.name = name
        self.bundleID = bundleID
        self.endpoint = endpoint
        self.channelsEndpoint = channelsEndpoint
        self.credential = credential
        self.maxRate = maxRate
    }

    /// Apps with the same endpoint and credential share a pool of connections.
    public var poolKey: String { endpoint.poolKey(credential) }
}

/// A transport set-up that cannot work (a key or certificate that does not load), named.
public struct TransportSetupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
