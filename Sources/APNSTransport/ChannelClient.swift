import APNSCore
import HTTP2
import IOLoop
import TLS

/// Apple's channel-management API for one app (apns-protocol.md §3.2): one request at a time,
/// each on a connection of its own, with the app's credentials. For apnsctl, not the hot path.
public final class ChannelClient {
    public let app: APNSApp
    private let tls: TLSContext
    private let jwt: JWTProvider?
    public let timeoutMs: Int

    /// What APNs answered.
    public struct Answer: Sendable {
        public var status = 0
        public var channelID: String?
        public var requestID: String?
        public var body: [UInt8] = []
        /// The error reason of a 4xx/5xx answer.
        public var reason: String? { status >= 400 ? Rejection.parse(status: status, body: body, apnsID: nil).reason.rawValue : nil }
    }

    public init(app: APNSApp, timeoutMs: Int = 10_000) throws {
        self.app = app
        self.timeoutMs = timeoutMs
        let identity: TLSContext.ClientIdentity?
        switch app.credential {
        case .serviceAccount:
            throw TransportSetupError("app \(app.name) is an FCM app: channels are APNs's broadcast channels")
        case .token(let team, let kid, let file):
            identity = nil
            jwt = try JWTProvider(teamID: team, keyID: kid, p8File: file)
        case .certificate(let cert, let key):
            identity = .pem(certificateFile: cert, keyFile: key)
            jwt = nil
        case .pkcs12(let file, let password):
            identity = .pkcs12(file: file, password: password)
            jwt = nil
        }
        do {
            tls = try TLSContext(clientWithCAFile: app.channelsEndpoint.caFile, identity: identity)
        } catch {
            throw TransportSetupError("app \(app.name): TLS set-up failed: \(error)")
        }
    }

    /// `POST /1/apps/<bundle>/channels`: a new channel's id.
    public func create(storage: ChannelStorage) throws -> Answer {
        var body = JSONWriter(capacity: 64)
        body.beginObject()
        body.field("message-storage-policy", storage.rawValue)
        body.field("push-type", "LiveActivity")
        body.endObject()
        return try send("POST", "channels", body: body.bytes)
    }

    public func read(_ id: String) throws -> Answer { try send("GET", "channels", channelID: id) }
    public func delete(_ id: String) throws -> Answer { try send("DELETE", "channels", channelID: id) }
    public func list() throws -> Answer { try send("GET", "all-channels") }

    /// One request; a connection or TLS failure, or no answer in time, throws and names the address.
    private func send(_ method: String, _ resource: String, channelID: String? = nil, body: [UInt8] = []) throws -> Answer {
        let e = app.channelsEndpoint
        var headers = HeaderList()
        headers.add(":method", method)
        headers.add(":scheme", "https")
        headers.add(":path", "/1/apps/\(app.bundleID)/\(resource)")
        headers.add(":authority", e.serverName)
        if let jwt { headers.add("authorization", "bearer " + jwt.current.token, sensitive: true) }
        if let channelID { headers.add("apns-channel-id", channelID) }
        if !body.isEmpty { headers.add("content-type", "application/json") }
        let answer: HTTP2Exchange.Answer
        do {
            answer = try HTTP2Exchange.send(headers, body: body, host: e.host, port: e.port, serverName: e.serverName, tls: tls, timeoutMs: timeoutMs)
        } catch {
            throw TransportSetupError("channel management at \(error)")
        }
        return Answer(
            status: answer.status, channelID: answer.header("apns-channel-id"), requestID: answer.header("apns-request-id"), body: answer.body)
    }
}
