import Buffers
import CNghttp2

/// A client's HTTP/2 session (RFC 9113) whose frames are written and read here, with nghttp2's
/// HPACK decoder reading the responses' headers. Servers keep nghttp2's session (`HTTP2ServerSession`).
///
/// Why not nghttp2's client session: its encoder never indexes `authorization`, so every request
/// carried the JWT as a Huffman-coded literal, and its send path (outbound queue, stream
/// objects, a copy of each header list, the coding) took about 11,400 instructions a request
/// (callgrind). Here a request is written straight into the outgoing buffer (`HPACKEncoder`) in
/// about 1,400.
///
/// What a client needs of the protocol, and no more: its streams are the requests it opens;
/// server push is refused in our SETTINGS; flow control is kept for what it sends (a body
/// waits for window) and granted generously for what it receives.
/// Owned by one I/O thread.
public final class HTTP2ClientSession: HTTP2Framing {
    /// Strong, as `HTTP2ServerSession`'s: the delegate owns the connection that owns this session.
    let delegate: HTTP2SessionDelegate
    /// Frames waiting for `produce`.
    private var pending = ByteBuffer(capacity: 64 * 1024)
    private var encoder = HPACKEncoder()
    private let inflater: OpaquePointer
    /// The start of a frame that has not all arrived.
    private var carry = ByteBuffer(capacity: 0)
    /// A header block split over HEADERS and CONTINUATION frames, its stream (0: none) and
    /// whether its HEADERS ended the stream.
    private var headerBlock = ByteBuffer(capacity: 1024)
    private var continuing: Int32 = 0
    private var continuingEndsStream = false
    /// The largest header block read (a response's is under 200 bytes): a server that sends
    /// CONTINUATIONs without end is cut off, not buffered.
    static let maxHeaderBlock = 64 * 1024

    /// The server's settings (RFC 9113 §6.5.2 defaults until its SETTINGS arrive).
    private var peerSettled = false
    private var peerMaxFrameSize = 16_384
    private var peerInitialWindow = 65_535
    private var peerMaxConcurrentStreams = Int(UInt32.max)
    /// What the server lets us send on the connection, and what it sent us since we last
    /// granted more.
    private var sendWindow = 65_535
    private var receivedSinceUpdate = 0

    private struct Stream {
        /// The body's bytes not sent yet (borrowed: the caller keeps them until the stream closes).
        var body: UnsafeRawBufferPointer
        /// What the server lets us send on this stream.
        var window: Int
        var sentEnd: Bool
        /// In `unsent`.
        var queued = false
    }
    private var streams = StreamTable<Stream>(capacity: 256)
    /// Streams with body still to send, oldest first: a body goes out when frames are produced,
    /// after the HEADERS of every request submitted before, or later as window opens. HEADERS
    /// first, as nghttp2 sends them: a server that lowers its stream limit on one answer (APNs
    /// after a rejection, and the mock) has then opened every stream of the write already, where
    /// requests sent whole one after the other were refused from that answer on (19,912
    /// REFUSED_STREAM for 5,000 jobs, 1 in 100 rejected, 4 connections of 500 streams).
    private var unsent: [Int32] = []
    private var sending: [Int32] = []
    private var nextStream: Int32
    private var goAwayReceived = false, goAwaySent = false
    /// Streams we reset, to report closed when frames are next produced (as nghttp2 does).
    private var resetByUs: [(stream: Int32, errorCode: UInt32)] = []

    /// The connection window we grant, and each stream's.
    static let connectionWindow = 1 << 24
    static let streamWindow = 1 << 20
    /// The largest frame we read (SETTINGS_MAX_FRAME_SIZE's default: we do not raise it).
    static let maxFrameSize = 16_384

    /// `firstStream`: the first stream id (odd); tests start near the last one.
    public init(delegate: HTTP2SessionDelegate, firstStream: Int32 = 1) throws(HTTP2ProtocolError) {
        self.delegate = delegate
        nextStream = firstStream
        var created: OpaquePointer?
        let rc = nghttp2_hd_inflate_new(&created)
        guard rc == 0, let created else { throw HTTP2ProtocolError(code: rc, operation: "creating the HPACK decoder") }
        inflater = created
        pending.append(UnsafeRawBufferPointer(start: Self.preface.utf8Start, count: Self.preface.utf8CodeUnitCount))
        pending.appendFrameHeader(length: 12, type: .settings, flags: 0, stream: 0)
        pending.appendSetting(.enablePush, 0)
        pending.appendSetting(.initialWindowSize, UInt32(Self.streamWindow))
        writeWindowUpdate(stream: 0, increment: Self.connectionWindow - 65_535)
    }

    deinit { nghttp2_hd_inflate_del(inflater) }

    private static let preface: StaticString = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

    // MARK: Submitting

    /// Writes a request's HEADERS (its body follows when frames are produced, as far as flow
    /// control lets it); returns its stream id. The caller keeps `body`'s bytes alive and
    /// unchanged until the stream closes.
    public func submitRequest(_ headers: borrowing HeaderList, body: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) -> Int32 {
        guard !goAwayReceived, !goAwaySent else { throw HTTP2ProtocolError(code: NGHTTP2_ERR_START_STREAM_NOT_ALLOWED.rawValue, operation: "submitting a request") }
        guard nextStream > 0 else { throw HTTP2ProtocolError(code: NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue, operation: "submitting a request") }
        let id = nextStream
        nextStream = id <= Int32.max - 2 ? id + 2 : -1
        writeHeaders(headers, stream: id, endStream: body.isEmpty)
        streams[id] = Stream(body: body, window: peerInitialWindow, sentEnd: body.isEmpty, queued: !body.isEmpty)
        if !body.isEmpty { unsent.append(id) }
        return id
    }

    /// Whether a request may be submitted: not after a GOAWAY either way, nor once the stream
    /// ids have run out (2^30 requests on one connection: a day at 12,000 a second).
    public var canOpenStreams: Bool { !goAwayReceived && !goAwaySent && nextStream > 0 }

    /// Tells the server this client opens no more streams; the session wants nothing more once
    /// the streams open are answered.
    public func goAway() {
        guard !goAwaySent else { return }
        goAwaySent = true
        pending.appendFrameHeader(length: 8, type: .goAway, flags: 0, stream: 0)
        pending.appendUInt32(0) // the last stream the server opened: none
        pending.appendUInt32(0) // NO_ERROR
    }

    public func submitPing() {
        pending.appendFrameHeader(length: 8, type: .ping, flags: 0, stream: 0)
        pending.appendUInt32(0)
        pending.appendUInt32(0)
    }

    /// Resets a stream of ours; the delegate hears it closed when frames are next produced.
    public func resetStream(_ stream: Int32, errorCode: UInt32) {
        guard streams.removeValue(forKey: stream) != nil else { return }
        writeRSTStream(stream, errorCode)
        resetByUs.append((stream, errorCode))
    }

    // MARK: Pumping bytes

    public func produce(into out: inout ByteBuffer, target: Int) throws(HTTP2ProtocolError) {
        if !resetByUs.isEmpty {
            let reset = resetByUs
            resetByUs.removeAll()
            for r in reset { delegate.http2StreamClosed(r.stream, errorCode: r.errorCode) }
        }
        sendUnsent()
        guard !pending.isEmpty else { return }
        out.append(pending.bytes())
        pending.removeAll()
    }

    public var wantsRead: Bool { streams.count > 0 || !(goAwayReceived || goAwaySent) }
    public var wantsWrite: Bool { !pending.isEmpty || !resetByUs.isEmpty || (!unsent.isEmpty && sendWindow > 0) }

    /// Reads received bytes: whole frames at once, the start of one that has not all arrived
    /// kept for the next call.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        if carry.isEmpty {
            let used = try readFrames(bytes)
            if used < bytes.count { carry.append(UnsafeRawBufferPointer(rebasing: bytes[used...])) }
            return
        }
        carry.append(bytes)
        let used = try readFrames(carry.bytes())
        carry.replaceSubrange(0..<used, with: UnsafeRawBufferPointer(start: nil, count: 0))
    }

    /// Handles each whole frame in `bytes`; returns the bytes they took.
    private func readFrames(_ bytes: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) -> Int {
        var at = 0
        while bytes.count - at >= 9 {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            guard length <= Self.maxFrameSize else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "a frame larger than SETTINGS_MAX_FRAME_SIZE") }
            guard bytes.count - at - 9 >= length else { break }
            let stream = Int32(bitPattern: UInt32(bytes[at + 5] & 0x7F) << 24 | UInt32(bytes[at + 6]) << 16 | UInt32(bytes[at + 7]) << 8 | UInt32(bytes[at + 8]))
            let payload = UnsafeRawBufferPointer(rebasing: bytes[(at + 9)..<(at + 9 + length)])
            try frame(type: bytes[at + 3], flags: bytes[at + 4], stream: stream, payload)
            at += 9 + length
        }
        return at
    }

    private func frame(type: UInt8, flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard continuing == 0 || type == HTTP2Frame.Kind.continuation.rawValue else {
            throw Self.error(NGHTTP2_ERR_PROTO, "a frame inside a header block")
        }
        guard peerSettled || type == HTTP2Frame.Kind.settings.rawValue else { throw Self.error(NGHTTP2_ERR_PROTO, "the server's first frame is not SETTINGS") }
        switch HTTP2Frame.Kind(rawValue: type) {
        case .data: try data(flags: flags, stream: stream, payload)
        case .headers: try headers(flags: flags, stream: stream, payload)
        case .rstStream:
            guard payload.count == 4 else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "RST_STREAM of \(payload.count) bytes") }
            guard stream != 0 else { throw Self.error(NGHTTP2_ERR_PROTO, "RST_STREAM on stream 0") }
            if streams.removeValue(forKey: stream) != nil { delegate.http2StreamClosed(stream, errorCode: HTTP2Frame.uint32(payload, 0)) }
        case .settings: try settings(flags: flags, stream: stream, payload)
        case .pushPromise: throw Self.error(NGHTTP2_ERR_PROTO, "PUSH_PROMISE, which our SETTINGS refused")
        case .ping:
            guard payload.count == 8 else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "PING of \(payload.count) bytes") }
            guard stream == 0 else { throw Self.error(NGHTTP2_ERR_PROTO, "PING on a stream") }
            if flags & HTTP2Frame.Flag.ack != 0 {
                delegate.http2PingAck()
            } else {
                delegate.http2PingReceived()
                pending.appendFrameHeader(length: 8, type: .ping, flags: HTTP2Frame.Flag.ack, stream: 0)
                pending.append(payload)
            }
        case .goAway: try goAway(stream: stream, payload)
        case .windowUpdate: try windowUpdate(stream: stream, payload)
        case .continuation:
            guard continuing != 0, stream == continuing else { throw Self.error(NGHTTP2_ERR_PROTO, "CONTINUATION without its HEADERS") }
            guard headerBlock.count + payload.count <= Self.maxHeaderBlock else { throw Self.error(NGHTTP2_ERR_PROTO, "a header block over 64 KiB") }
            headerBlock.append(payload)
            if flags & HTTP2Frame.Flag.endHeaders != 0 {
                continuing = 0
                try headersDone(stream: stream, endStream: continuingEndsStream)
            }
        case .priority, nil:
            break // PRIORITY and frames of unknown types are ignored (RFC 9113 §5.5)
        }
    }

    private func data(flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream != 0 else { throw Self.error(NGHTTP2_ERR_PROTO, "DATA on stream 0") }
        let content = try Self.unpadded(flags: flags, payload)
        // Padding counts against the window too; the connection's is granted again at half.
        receivedSinceUpdate += payload.count
        if receivedSinceUpdate >= Self.connectionWindow / 2 {
            writeWindowUpdate(stream: 0, increment: receivedSinceUpdate)
            receivedSinceUpdate = 0
        }
        guard streams[stream] != nil else { return } // reset by us: its answer goes unread
        if !content.isEmpty { delegate.http2Data(stream: stream, bytes: content.assumingMemoryBound(to: UInt8.self)) }
        if flags & HTTP2Frame.Flag.endStream != 0 { remoteEnded(stream) }
    }

    private func headers(flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream != 0 else { throw Self.error(NGHTTP2_ERR_PROTO, "HEADERS on stream 0") }
        var fragment = try Self.unpadded(flags: flags, payload)
        if flags & HTTP2Frame.Flag.priority != 0 {
            guard fragment.count >= 5 else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "HEADERS too short for its priority") }
            fragment = UnsafeRawBufferPointer(rebasing: fragment[5...])
        }
        headerBlock.removeAll()
        headerBlock.append(fragment)
        if flags & HTTP2Frame.Flag.endHeaders != 0 {
            try headersDone(stream: stream, endStream: flags & HTTP2Frame.Flag.endStream != 0)
        } else {
            continuing = stream
            continuingEndsStream = flags & HTTP2Frame.Flag.endStream != 0
        }
    }

    /// Decodes a whole header block, even for a stream we reset (the decoder's table must follow
    /// every block), and hands a live stream's fields to the delegate.
    private func headersDone(stream: Int32, endStream: Bool) throws(HTTP2ProtocolError) {
        let live = streams[stream] != nil
        let block = headerBlock.bytes()
        var p = block.baseAddress?.assumingMemoryBound(to: UInt8.self), left = block.count
        while true {
            var nv = nghttp2_nv()
            var flags: Int32 = 0
            let n = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, p, left, 1)
            guard n >= 0 else { throw Self.error(NGHTTP2_ERR_HEADER_COMP, "a header block that does not decode") }
            p = p.map { $0 + n }
            left -= n
            if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0, live {
                delegate.http2Header(stream: stream, name: UnsafeBufferPointer(start: nv.name, count: nv.namelen),
                                     value: UnsafeBufferPointer(start: nv.value, count: nv.valuelen))
            }
            if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 { break }
        }
        nghttp2_hd_inflate_end_headers(inflater)
        headerBlock.removeAll()
        if endStream, live { remoteEnded(stream) }
    }

    /// The server ended the stream: the response is complete, and so is the stream (a response
    /// before all of the request was sent stops the rest of it).
    private func remoteEnded(_ stream: Int32) {
        delegate.http2EndStream(stream)
        guard let s = streams.removeValue(forKey: stream) else { return }
        if !s.sentEnd { writeRSTStream(stream, 0) }
        delegate.http2StreamClosed(stream, errorCode: 0)
    }

    private func settings(flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream == 0 else { throw Self.error(NGHTTP2_ERR_PROTO, "SETTINGS on a stream") }
        if flags & HTTP2Frame.Flag.ack != 0 {
            guard payload.isEmpty else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "SETTINGS ACK with a payload") }
            delegate.http2SettingsAcknowledged()
            return
        }
        guard payload.count % 6 == 0 else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "SETTINGS of \(payload.count) bytes") }
        for at in stride(from: 0, to: payload.count, by: 6) {
            let id = UInt16(payload[at]) << 8 | UInt16(payload[at + 1])
            let value = HTTP2Frame.uint32(payload, at + 2)
            switch HTTP2Frame.Setting(rawValue: id) {
            case .headerTableSize: encoder.peerTableSize(Int(value))
            case .maxConcurrentStreams: peerMaxConcurrentStreams = Int(value)
            case .initialWindowSize:
                guard value <= 0x7FFF_FFFF else { throw Self.error(NGHTTP2_ERR_FLOW_CONTROL, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1") }
                // A change applies to the streams open, by the difference (RFC 9113 §6.9.2).
                let delta = Int(value) - peerInitialWindow
                peerInitialWindow = Int(value)
                if delta != 0 {
                    for (id, open) in streams.entries {
                        var s = open
                        s.window += delta
                        streams[id] = s
                    }
                }
            case .maxFrameSize:
                guard (16_384...16_777_215).contains(value) else { throw Self.error(NGHTTP2_ERR_PROTO, "SETTINGS_MAX_FRAME_SIZE \(value)") }
                peerMaxFrameSize = Int(value)
            case .enablePush, nil:
                break
            }
        }
        pending.appendFrameHeader(length: 0, type: .settings, flags: HTTP2Frame.Flag.ack, stream: 0)
        peerSettled = true
        delegate.http2RemoteSettings(maxConcurrentStreams: peerMaxConcurrentStreams)
        sendUnsent()
    }

    private func goAway(stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream == 0 else { throw Self.error(NGHTTP2_ERR_PROTO, "GOAWAY on a stream") }
        guard payload.count >= 8 else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "GOAWAY of \(payload.count) bytes") }
        let last = Int32(bitPattern: HTTP2Frame.uint32(payload, 0) & 0x7FFF_FFFF)
        goAwayReceived = true
        delegate.http2GoAway(lastStreamID: last, errorCode: HTTP2Frame.uint32(payload, 4), debugData: Array(payload[8...]))
        // Streams above the last one processed never were: closed as refused, to be sent again.
        for (id, _) in streams.entries.sorted(by: { $0.id < $1.id }) where id > last {
            streams.removeValue(forKey: id)
            delegate.http2StreamClosed(id, errorCode: 7) // REFUSED_STREAM
        }
    }

    private func windowUpdate(stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard payload.count == 4 else { throw Self.error(NGHTTP2_ERR_FRAME_SIZE_ERROR, "WINDOW_UPDATE of \(payload.count) bytes") }
        let increment = Int(HTTP2Frame.uint32(payload, 0) & 0x7FFF_FFFF)
        if stream == 0 {
            guard increment > 0 else { throw Self.error(NGHTTP2_ERR_PROTO, "a WINDOW_UPDATE of 0 for the connection") }
            sendWindow += increment
            guard sendWindow <= 0x7FFF_FFFF else { throw Self.error(NGHTTP2_ERR_FLOW_CONTROL, "a connection window above 2^31-1") }
        } else if var s = streams[stream], increment > 0 {
            s.window += increment
            streams[stream] = s
        }
        sendUnsent()
    }

    // MARK: Writing frames

    private func writeHeaders(_ headers: borrowing HeaderList, stream: Int32, endStream: Bool) {
        let start = pending.count
        pending.appendFrameHeader(length: 0, type: .headers, flags: 0, stream: stream)
        encoder.encode(headers, into: &pending)
        let length = pending.count - start - 9
        let end = endStream ? HTTP2Frame.Flag.endStream : 0
        if length <= peerMaxFrameSize {
            pending.patchFrameHeader(at: start, length: length, flags: HTTP2Frame.Flag.endHeaders | end)
            return
        }
        // A block larger than a frame: HEADERS, then CONTINUATIONs (no request of ours is).
        let block = Array(pending.bytes(from: start + 9))
        pending.truncate(to: start)
        var at = 0
        while at < block.count {
            let n = min(peerMaxFrameSize, block.count - at)
            let last = at + n == block.count
            pending.appendFrameHeader(length: n, type: at == 0 ? .headers : .continuation, flags: (last ? HTTP2Frame.Flag.endHeaders : 0) | (at == 0 ? end : 0), stream: stream)
            block.withUnsafeBytes { pending.append(UnsafeRawBufferPointer(rebasing: $0[at..<(at + n)])) }
            at += n
        }
    }

    /// Sends as much of a stream's body as both windows allow; the rest waits for window.
    private func sendBody(_ id: Int32) {
        guard var s = streams[id] else { return }
        while !s.body.isEmpty {
            let n = min(s.body.count, s.window, sendWindow, peerMaxFrameSize)
            guard n > 0 else {
                if !s.queued {
                    s.queued = true
                    unsent.append(id)
                }
                break
            }
            let last = n == s.body.count
            pending.appendFrameHeader(length: n, type: .data, flags: last ? HTTP2Frame.Flag.endStream : 0, stream: id)
            pending.append(UnsafeRawBufferPointer(rebasing: s.body[..<n]))
            s.body = UnsafeRawBufferPointer(rebasing: s.body[n...])
            s.window -= n
            sendWindow -= n
            if last { s.sentEnd = true }
        }
        streams[id] = s
    }

    /// The bodies in `unsent`, in order, as far as window allows.
    private func sendUnsent() {
        guard !unsent.isEmpty, sendWindow > 0 else { return }
        swap(&unsent, &sending)
        for id in sending {
            guard var s = streams[id] else { continue }
            s.queued = false
            streams[id] = s
            sendBody(id)
        }
        sending.removeAll(keepingCapacity: true)
    }

    private func writeWindowUpdate(stream: Int32, increment: Int) {
        pending.appendFrameHeader(length: 4, type: .windowUpdate, flags: 0, stream: stream)
        pending.appendUInt32(UInt32(increment))
    }

    private func writeRSTStream(_ stream: Int32, _ errorCode: UInt32) {
        pending.appendFrameHeader(length: 4, type: .rstStream, flags: 0, stream: stream)
        pending.appendUInt32(errorCode)
    }

    /// A DATA or HEADERS payload without its padding.
    private static func unpadded(flags: UInt8, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) -> UnsafeRawBufferPointer {
        guard flags & HTTP2Frame.Flag.padded != 0 else { return payload }
        guard let padding = payload.first, Int(padding) < payload.count else { throw error(NGHTTP2_ERR_PROTO, "padding longer than its frame") }
        return UnsafeRawBufferPointer(rebasing: payload[1..<(payload.count - Int(padding))])
    }

    private static func error(_ code: nghttp2_error, _ what: String) -> HTTP2ProtocolError {
        HTTP2ProtocolError(code: code.rawValue, operation: "reading HTTP/2 frames (\(what))")
    }
}
