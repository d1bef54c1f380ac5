import Buffers
internal import CNghttp2
import PointerTricks

/// A server's nghttp2 session (the mock's), driven through `mem_recv`/`mem_send`, so nghttp2
/// never touches a socket. Clients use `HTTP2ClientSession`. Owned by one I/O thread.
public final class HTTP2ServerSession: HTTP2Framing {
    /// nghttp2_session*, owned by this object's thread.
    private var session: OpaquePointer!
    /// Strong, so that each callback borrows it: an unowned one was retained per call, about
    /// eight times per request. The delegate owns the connection that owns this session; it
    /// drops the connection once told it closed (`connectionClosed`), which ends the cycle.
    let delegate: HTTP2SessionDelegate
    /// Each response body being sent, and how much of it went out.
    private var bodies = StreamTable<(bytes: [UInt8], sent: Int)>(capacity: 256)
    /// The blocks nghttp2 allocates, reused per size class (this session's thread only).
    private let pool: UnsafeMutablePointer<apnsw_pool> = {
        let p = UnsafeMutablePointer<apnsw_pool>.allocate(capacity: 1)
        p.initialize(to: apnsw_pool())
        return p
    }()

    /// `answerPings: false` leaves PINGs unanswered (the mock's fault injection).
    public init(delegate: HTTP2SessionDelegate, maxConcurrentStreams: Int? = nil, answerPings: Bool = true) throws(HTTP2ProtocolError) {
        self.delegate = delegate
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            if frame!.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame!.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                HTTP2ServerSession.with(user) { $0.delegate.http2BeginStream(frame!.pointee.hd.stream_id) }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, namelen, value, valuelen, _, user in
            HTTP2ServerSession.with(user) {
                $0.delegate.http2Header(
                    stream: frame!.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: namelen),
                    value: UnsafeBufferPointer(start: value, count: valuelen))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, len, user in
            HTTP2ServerSession.with(user) { $0.delegate.http2Data(stream: stream, bytes: UnsafeBufferPointer(start: data, count: len)) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { session, frame, user in
            HTTP2ServerSession.with(user) { $0.frameReceived(session!, frame!) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, code, user in
            HTTP2ServerSession.with(user) { me in
                me.forgetBody(stream)
                me.delegate.http2StreamClosed(stream, errorCode: HTTP2ErrorCode(rawValue: code))
            }
            return 0
        }
        var created: OpaquePointer?
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        if !answerPings { nghttp2_option_set_no_auto_ping_ack(option, 1) }
        let user = CallbackContext.pointer(to: self)
        var mem = apnsw_pool_mem(pool)
        let rc = nghttp2_session_server_new3(&created, callbacks, user, option, &mem)
        guard rc == 0, let created else { throw .nghttp2(rc, operation: "creating the HTTP/2 session") }
        session = created
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20)]
        if let maxConcurrentStreams {
            settings.append(
                nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(maxConcurrentStreams)))
        }
        let src = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), settings, settings.count)
        guard src == 0 else { throw .nghttp2(src, operation: "submitting SETTINGS") }
        // A large connection window, so that the peer never waits on WINDOW_UPDATE.
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, 1 << 24)
    }

    deinit {
        nghttp2_session_del(session)
        apnsw_pool_drain(pool)
        pool.deallocate()
    }

    /// The session behind a callback's user pointer, borrowed: nghttp2 calls back only from
    /// within this session's own calls, so it is alive and needs no retain.
    private static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (HTTP2ServerSession) -> R) -> R {
        CallbackContext.with(user!, as: HTTP2ServerSession.self, body)
    }

    private func frameReceived(_ s: OpaquePointer, _ frame: UnsafePointer<nghttp2_frame>) {
        let hd = frame.pointee.hd
        switch Int(hd.type) {
        case Int(NGHTTP2_HEADERS.rawValue), Int(NGHTTP2_DATA.rawValue):
            if hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0 { delegate.http2EndStream(hd.stream_id) }
        case Int(NGHTTP2_SETTINGS.rawValue):
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
                let limit = nghttp2_session_get_remote_settings(s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
                delegate.http2RemoteSettings(maxConcurrentStreams: Int(limit))
            } else {
                delegate.http2SettingsAcknowledged()
            }
        case Int(NGHTTP2_GOAWAY.rawValue):
            let g = frame.pointee.goaway
            let debug = g.opaque_data.map { Array(UnsafeBufferPointer(start: $0, count: g.opaque_data_len)) } ?? []
            delegate.http2GoAway(lastStreamID: g.last_stream_id, errorCode: HTTP2ErrorCode(rawValue: g.error_code), debugData: debug)
        case Int(NGHTTP2_PING.rawValue):
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0 { delegate.http2PingAck() } else { delegate.http2PingReceived() }
        default:
            break
        }
    }

    // MARK: Submitting

    /// Queues a response; a nil body ends the stream with the HEADERS frame.
    public func submitResponse(stream: Int32, _ headers: borrowing HeaderList, body: [UInt8]?) {
        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: HTTP2ServerSession.readBody)
        let rc: Int32, session = session
        if let body {
            bodies[stream] = (body, 0)
            rc = headers.withNV { nva, n in nghttp2_submit_response(session, stream, nva, n, &provider) }
        } else {
            rc = headers.withNV { nva, n in nghttp2_submit_response(session, stream, nva, n, nil) }
        }
        if rc != 0 { forgetBody(stream) }
    }

    private func forgetBody(_ stream: Int32) {
        if bodies.count > 0 { bodies[stream] = nil }
    }

    public func submitMaxConcurrentStreams(_ value: Int) {
        var entry = nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: UInt32(value))
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
    }

    /// Sends GOAWAY naming the last stream that will be processed.
    public func submitGoAway(lastStreamID: Int32? = nil, errorCode: HTTP2ErrorCode = .noError, debugData: [UInt8] = []) {
        let last = lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session)
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, errorCode.rawValue, debugData, debugData.count)
    }

    public func sayGoAway(after error: HTTP2ProtocolError) {
        nghttp2_session_terminate_session(session, error.code.rawValue)
    }

    public func resetStream(_ stream: Int32, errorCode: HTTP2ErrorCode) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, errorCode.rawValue)
    }

    private static let readBody: nghttp2_data_source_read_callback = { _, stream, buf, length, flags, _, user in
        HTTP2ServerSession.with(user) { $0.copyBody(stream: stream, into: buf!, length: length, flags: flags!) }
    }

    private func copyBody(stream: Int32, into buf: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let (bytes, sent) = bodies[stream] else {
            flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue)
            return 0
        }
        let n = min(length, bytes.count - sent)
        if n > 0 { bytes.withUnsafeBytes { UnsafeMutableRawPointer(buf).copyMemory(from: $0.baseAddress! + sent, byteCount: n) } }
        if sent + n == bytes.count {
            flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue)
            forgetBody(stream)
        } else {
            bodies[stream] = (bytes, sent + n)
        }
        return n
    }

    // MARK: Pumping bytes

    /// Feeds received bytes to nghttp2, which calls the delegate.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        let rc = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rc < 0 { throw .nghttp2(Int32(rc), operation: "reading HTTP/2 frames", code: .protocolError) }
    }

    /// Appends pending frames to `out` until it holds at least `target` bytes or nothing is left.
    /// Chunks from nghttp2 stay valid only until the next call, so each is copied.
    func produce(into out: inout ByteBuffer, target: Int) throws(HTTP2ProtocolError) {
        while out.count < target {
            var chunk: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &chunk)
            if n < 0 { throw .nghttp2(Int32(n), operation: "writing HTTP/2 frames") }
            if n == 0 { return }
            out.append(UnsafeRawBufferPointer(start: chunk, count: n))
        }
    }

    public var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    public var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }
}
