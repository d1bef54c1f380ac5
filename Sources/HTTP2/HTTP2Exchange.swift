import IOLoop
import TLS

/// One request and its answer, on a connection of its own, on the calling thread (it blocks):
/// for the control plane (channel management, OAuth tokens), never the hot path.
public enum HTTP2Exchange {
    public struct Answer: Sendable {
        public var status = 0
        /// Every header but `:status`, names as sent (lowercase).
        public var headers: [(name: String, value: String)] = []
        public var body: [UInt8] = []

        public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
    }

    /// Sends `headers` and `body` to `host:port`; a connection or TLS failure, a reset, or no
    /// answer in `timeoutMs` throws and says which, naming the address.
    public static func send(
        _ headers: consuming HeaderList, body: [UInt8], host: String, port: Int, serverName: String, tls: TLSContext, timeoutMs: Int
    ) throws(HTTP2ExchangeError) -> Answer {
        let loop: EventLoop
        let addresses: [SocketAddress]
        do {
            loop = try EventLoop()
            addresses = try Socket.addresses(of: host, port: port)
        } catch { throw HTTP2ExchangeError("\(host):\(port): \(error)") }
        let exchange = Exchange(loop: loop, headers: headers, body: body)
        let connection: HTTP2Connection
        do {
            connection = try HTTP2Connection(
                connectingTo: addresses, tls: tls, serverName: serverName, loop: loop, delegate: exchange, timeoutMs: timeoutMs)
        } catch { throw HTTP2ExchangeError("\(host):\(port): \(error)") }
        _ = loop.schedule(afterMilliseconds: timeoutMs) {
            exchange.failure = exchange.failure ?? "no answer in \(timeoutMs) ms"
            loop.stop()
        }
        loop.run()
        connection.shutdown(error: nil)
        guard exchange.done else { throw HTTP2ExchangeError("\(host):\(port): \(exchange.failure ?? "the connection closed")") }
        return exchange.answer
    }
}

public struct HTTP2ExchangeError: Error, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One request and its answer on one connection, on the calling thread's loop.
private final class Exchange: HTTP2ConnectionDelegate {
    let loop: EventLoop
    var headers: HeaderList
    let body: [UInt8]
    var answer = HTTP2Exchange.Answer()
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
        if name.equals(":status") {
            answer.status = Int(text) ?? 0
        } else if answer.headers.count < 100 {
            answer.headers.append((String(decoding: name, as: UTF8.self), text))
        }
    }

    func http2Data(stream: Int32, bytes: UnsafeBufferPointer<UInt8>) {
        if answer.body.count < 4 << 20 { answer.body.append(contentsOf: bytes) }
    }

    func http2EndStream(_ stream: Int32) {
        done = answer.status != 0
        loop.stop()
    }

    func http2StreamClosed(_ stream: Int32, errorCode: HTTP2ErrorCode) {
        if !done { failure = "the server reset the request (\(errorCode))" }
        loop.stop()
    }

    func http2RemoteSettings(maxConcurrentStreams: Int) {}
    func http2GoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) {}
}
