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
        let loop = try EventLoop()
        let exchange = Exchange(loop: loop, headers: headers, body: body)
        let addresses = try Socket.addresses(of: e.host, port: e.port)
        let connection = try HTTP2Connection(
            connectingTo: addresses, tls: tls, serverName: e.serverName, loop: loop, delegate: exchange, timeoutMs: timeoutMs)
        _ = loop.schedule(afterMilliseconds: timeoutMs) {
            exchange.failure = exchange.failure ?? "no answer in \(self.timeoutMs) ms"
            loop.stop()
        }
        loop.run()
        connection.shutdown(error: nil)
        guard exchange.done else {
            throw TransportSetupError("channel management at \(e.host):\(e.port): \(exchange.failure ?? "the connection closed")")
        }
        return exchange.answer
    }
}

/// One request and its answer on one connection, on the calling thread's loop.
private final class Exchange: HTTP2ConnectionDelegate {
    let loop: EventLoop
    var headers: HeaderList
    let body: [UInt8]
    var answer = ChannelClient.Answer()
    var done = false
    var failure: String?

    init(loop: EventLoop, headers: consuming HeaderList, body: [UInt8]) {
        self.loop = loop
        self.headers = headers
        self.body = body
    }

    func connectionReady(_ connection: HTTP2Connection) {
        do {
            _ = try body.withUnsafeBytes { raw in try connection.client.submitRequest(headers, body: raw) }
            connection.flushOrClose()
        } catch {
            failure = "the request could not be sent: \(error)"
            loop.stop()
        }
    }

    func connectionClosed(_ connection: HTTP2Connection, error: Error?) {
        if !done { failure = error.map { "\($0)" } ?? "the server closed the connection before answering" }
        loop.stop()
    }

    func http2Header(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let text = String(decoding: value, as: UTF8.self)
        if name.equals(":status") { answer.status = Int(text) ?? 0 }
        if name.equals("apns-channel-id") { answer.channelID = text }
        if name.equals("apns-request-id") { answer.requestID = text }
    }

    func http2Data(stream: Int32, bytes: UnsafeBufferPointer<UInt8>) {
        if answer.body.count < 4 << 20 { answer.body.append(contentsOf: bytes) }
    }

    func http2EndStream(_ stream: Int32) {
        done = answer.status != 0
        loop.stop()
    }

    func http2StreamClosed(_ stream: Int32, errorCode: HTTP2ErrorCode) {
        if !done { failure = "APNs reset the request (\(errorCode))" }
        loop.stop()
    }

    func http2RemoteSettings(maxConcurrentStreams: Int) {}
    func http2GoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) {}
}
