import APNSCore
import APNSTransport
import Configuration

extension APNSApp {
    /// The transport's part of a configured app: where it sends and as whom.
    public init(_ app: AppConfiguration) {
        self.init(
            name: app.name, bundleID: app.bundleID, endpoint: app.endpoint, channelsEndpoint: app.channelsEndpoint, credential: app.auth,
            maxRate: app.maxRate)
    }
}
