import Buffers
internal import CNghttp2

/// Events from an HTTP/2 session. All calls come on the thread that feeds the session.
public protocol HTTP2SessionDelegate: AnyObject {
    /// A new stream opened by the peer (servers).
    func http2BeginStream(_ stream: Int32)
    func http2Header(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)
    func http2Data(stream: Int32, bytes: UnsafeBufferPointer<UInt8>)
    /// The peer sent END_STREAM: its request or response is complete.
    func http2EndStream(_ stream: Int32)
    /// The stream is gone; `errorCode` is not `.noError` for a reset (`.refusedStream`, say).
    func http2StreamClosed(_ stream: Int32, errorCode: HTTP2ErrorCode)
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS, each time SETTINGS arrive.
    func http2RemoteSettings(maxConcurrentStreams: Int)
    func http2GoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8])
    func http2PingAck()
    /// The peer acknowledged our latest SETTINGS: from now on it must follow them.
    func http2SettingsAcknowledged()
    /// The peer sent a PING (answered automatically unless the session was told not to).
    func http2PingReceived()
}

public extension HTTP2SessionDelegate {
    func http2BeginStream(_ stream: Int32) {}
    func http2PingAck() {}
    func http2SettingsAcknowledged() {}
    func http2PingReceived() {}
}

/// What a connection pumps bytes through: a server's nghttp2 session or a client's own.
protocol HTTP2Framing: AnyObject {
    func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2ProtocolError)
    /// Appends pending frames to `out` until it holds at least `target` bytes or nothing is left.
    func produce(into out: inout ByteBuffer, target: Int) throws(HTTP2ProtocolError)
    var wantsRead: Bool { get }
    var wantsWrite: Bool { get }
    /// Queues GOAWAY with the error's code, before the connection closes on it.
    func sayGoAway(after error: HTTP2ProtocolError)
}

/// A connection error of HTTP/2: the RFC 9113 code it amounts to, what was being done, and why.
public struct HTTP2ProtocolError: Error, CustomStringConvertible {
    public let code: HTTP2ErrorCode
    public let operation: String
    public let detail: String
    public var description: String { "\(operation): \(detail) (\(code))" }

    public init(_ code: HTTP2ErrorCode, operation: String, detail: String) {
        self.code = code
        self.operation = operation
        self.detail = detail
    }

    /// A failed nghttp2 call (the server session's, the HPACK decoder's), in nghttp2's words.
    static func nghttp2(_ rc: Int32, operation: String, code: HTTP2ErrorCode = .internalError) -> HTTP2ProtocolError {
        HTTP2ProtocolError(code, operation: operation, detail: String(cString: nghttp2_strerror(rc)))
    }
}
