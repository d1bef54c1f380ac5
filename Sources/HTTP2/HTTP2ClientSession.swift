import Buffers
internal import CNghttp2

/// A client's HTTP/2 session (RFC 9113) whose frames are written and read here, with nghttp2's
/// HPACK decoder reading the responses' headers. Servers keep nghttp2's session (`HTTP2ServerSession`).
///
/// Our own, not nghttp2's: its encoder never indexes `authorization`, and its send path cost
/// about eight times what writing a request straight into the outgoing buffer does
/// (docs/performance.md).
///
/// What a client needs of the protocol, and no more: its streams are the requests it opens;
/// server push is refused in our SETTINGS; flow control is kept for what it sends (a body
/// waits for window) and granted generously for what it receives.
/// Owned by one I/O thread.
public final class HTTP2ClientSession: HTTP2Framing {
    /// Strong, as `HTTP2ServerSession`'s: the delegate owns the connection that owns this session.
    let delegate: HTTP2SessionDelegate
    /// Frames waiting for `produce`.
    var pending = ByteBuffer(capacity: 64 * 1024)
    var encoder = HPACKEncoder()
    let inflater: OpaquePointer
    /// The start of a frame that has not all arrived.
    var carry = ByteBuffer(capacity: 0)
    /// A header block split over HEADERS and CONTINUATION frames.
    var headerBlock = ByteBuffer(capacity: 1024)
    /// Where the connection stands, and whether a header block is still to be continued.
    var state = State.awaitingSettings(saidGoAway: false)
    var reading = Reading.frames

    enum State: Equatable {
        /// Until the server's first frame, which must be SETTINGS; `saidGoAway`: we said it already.
        case awaitingSettings(saidGoAway: Bool)
        case open
        /// No more streams may open: GOAWAY came from the server or went to it (`saidByUs`).
        case goingAway(saidByUs: Bool)
    }

    enum Reading: Equatable {
        case frames
        /// A HEADERS frame of `stream` without END_HEADERS: only its CONTINUATIONs may follow.
        case continuation(stream: Int32, endsStream: Bool)
    }
    /// The largest header block read (a response's is under 200 bytes): a server that sends
    /// CONTINUATIONs without end is cut off, not buffered.
    static let maxHeaderBlock = 64 * 1024

    /// The server's settings (RFC 9113 §6.5.2 defaults until its SETTINGS arrive).
    var peerMaxFrameSize = 16_384
    var peerInitialWindow = 65_535
    var peerMaxConcurrentStreams = Int(UInt32.max)
    /// What the server lets us send on the connection, and what it sent us since we last
    /// granted more.
    var sendWindow = 65_535
    var receivedSinceUpdate = 0

    struct Stream {
        /// The body's bytes not sent yet (borrowed: the caller keeps them until the stream closes).
        var body: UnsafeRawBufferPointer
        /// What the server lets us send on this stream.
        var window: Int
        var sentEnd: Bool
        /// In `unsent`.
        var queued = false
        /// What the server may still send on this stream (we never grant more: answers are small).
        var receiveWindow = HTTP2ClientSession.streamWindow
    }
    var streams = StreamTable<Stream>(capacity: 256)
    /// Streams with body still to send, oldest first: a body goes out when frames are produced,
    /// after the HEADERS of every request submitted before, or later as window opens. HEADERS
    /// first: a server that lowers its stream limit on one answer (APNs after a rejection) has
    /// then opened every stream of the write already (docs/performance.md).
    var unsent: [Int32] = []
    private var sending: [Int32] = []
    var nextStream: Int32
    let firstStream: Int32
    /// What the server may still send on the connection before we grant more.
    var receiveWindow = 65_535  // RFC 9113's initial window, until our WINDOW_UPDATE in init
    /// Frames written in answer to the server's (PING and SETTINGS ACKs, resets) since frames
    /// were last produced: a server that sends them and never reads is cut off, not buffered.
    var answersQueued = 0
    static let maxQueuedAnswers = 1000
    /// Streams we reset, to report closed when frames are next produced.
    private var resetByUs: [(stream: Int32, errorCode: HTTP2ErrorCode)] = []

    /// The connection window we grant, and each stream's.
    static let connectionWindow = 1 << 24
    static let streamWindow = 1 << 20
    /// The largest frame we read (SETTINGS_MAX_FRAME_SIZE's default: we do not raise it).
    static let maxFrameSize = 16_384

    /// `firstStream`: the first stream id (odd); tests start near the last one.
    public init(delegate: HTTP2SessionDelegate, firstStream: Int32 = 1) throws(HTTP2ProtocolError) {
        self.delegate = delegate
        nextStream = firstStream
        self.firstStream = firstStream
        var created: OpaquePointer?
        let rc = nghttp2_hd_inflate_new(&created)
        guard rc == 0, let created else { throw .nghttp2(rc, operation: "creating the HPACK decoder") }
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
        if isGoingAway { throw HTTP2ProtocolError(.refusedStream, operation: "submitting a request", detail: "GOAWAY was said") }
        guard nextStream > 0 else { throw HTTP2ProtocolError(.refusedStream, operation: "submitting a request", detail: "the stream ids ran out") }
        let id = nextStream
        nextStream = id <= Int32.max - 2 ? id + 2 : -1
        writeHeaders(headers, stream: id, endStream: body.isEmpty)
        streams[id] = Stream(body: body, window: peerInitialWindow, sentEnd: body.isEmpty, queued: !body.isEmpty)
        if !body.isEmpty { unsent.append(id) }
        return id
    }

    /// Whether a request may be submitted: not after a GOAWAY either way, nor once the stream
    /// ids have run out (2^30 requests on one connection: a day at 12,000 a second).
    public var canOpenStreams: Bool { !isGoingAway && nextStream > 0 }

    var isGoingAway: Bool {
        switch state {
        case .awaitingSettings(let said): said
        case .open: false
        case .goingAway: true
        }
    }

    var saidGoAway: Bool { state == .awaitingSettings(saidGoAway: true) || state == .goingAway(saidByUs: true) }

    /// Tells the server this client opens no more streams; the session wants nothing more once
    /// the streams open are answered.
    public func goAway() {
        if saidGoAway { return }
        if case .awaitingSettings = state { state = .awaitingSettings(saidGoAway: true) } else { state = .goingAway(saidByUs: true) }
        writeGoAway(.noError)
    }

    public func submitPing() {
        pending.appendFrameHeader(length: 8, type: .ping, flags: 0, stream: 0)
        pending.appendUInt32(0)
        pending.appendUInt32(0)
    }

    /// Tells the server why the connection ends (RFC 9113 §5.4.1): GOAWAY with the error's code.
    public func sayGoAway(after error: HTTP2ProtocolError) {
        state = .goingAway(saidByUs: true)
        writeGoAway(error.code, debug: Array(error.detail.utf8.prefix(200)))
    }

    private func writeGoAway(_ code: HTTP2ErrorCode, debug: [UInt8] = []) {
        pending.appendFrameHeader(length: 8 + debug.count, type: .goAway, flags: 0, stream: 0)
        pending.appendUInt32(0)  // the last stream the server opened: none
        pending.appendUInt32(code.rawValue)
        debug.withUnsafeBytes { pending.append($0) }
    }

    /// Resets a stream of ours; the delegate hears it closed when frames are next produced.
    public func resetStream(_ stream: Int32, errorCode: HTTP2ErrorCode) {
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
        answersQueued = 0
        guard !pending.isEmpty else { return }
        out.append(pending.bytes())
        pending.removeAll()
    }

    public var wantsRead: Bool { streams.count > 0 || !isGoingAway }
    public var wantsWrite: Bool { !pending.isEmpty || !resetByUs.isEmpty || (!unsent.isEmpty && sendWindow > 0) }

    // MARK: Writing frames

    func writeHeaders(_ headers: borrowing HeaderList, stream: Int32, endStream: Bool) {
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
            pending.appendFrameHeader(
                length: n, type: at == 0 ? .headers : .continuation, flags: (last ? HTTP2Frame.Flag.endHeaders : 0) | (at == 0 ? end : 0),
                stream: stream)
            block.withUnsafeBytes { pending.append(UnsafeRawBufferPointer(rebasing: $0[at..<(at + n)])) }
            at += n
        }
    }

    /// Sends as much of a stream's body as both windows allow; the rest waits for window.
    func sendBody(_ id: Int32) {
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
    func sendUnsent() {
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

    func writeWindowUpdate(stream: Int32, increment: Int) {
        pending.appendFrameHeader(length: 4, type: .windowUpdate, flags: 0, stream: stream)
        pending.appendUInt32(UInt32(increment))
        if stream == 0 { receiveWindow += increment }
    }

    func writeRSTStream(_ stream: Int32, _ errorCode: HTTP2ErrorCode) {
        pending.appendFrameHeader(length: 4, type: .rstStream, flags: 0, stream: stream)
        pending.appendUInt32(errorCode.rawValue)
        answersQueued += 1
    }

    /// A stream error (RFC 9113 §5.4.2): the stream is reset with `code`, the connection goes on.
    func streamError(_ stream: Int32, _ code: HTTP2ErrorCode) {
        if streams[stream] != nil { resetStream(stream, errorCode: code) } else { writeRSTStream(stream, code) }
    }

    /// Whether `stream` is one of ours that was opened (it may be closed since): a server opens
    /// no streams, and a frame on one never opened is a connection error (RFC 9113 §5.1).
    func wasOpened(_ stream: Int32) -> Bool {
        stream % 2 == 1 && stream >= firstStream && (nextStream < 0 || stream < nextStream)
    }

    /// A DATA or HEADERS payload without its padding.
    static func unpadded(flags: UInt8, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) -> UnsafeRawBufferPointer {
        guard flags & HTTP2Frame.Flag.padded != 0 else { return payload }
        guard let padding = payload.first, Int(padding) < payload.count else { throw error(.protocolError, "padding longer than its frame") }
        return UnsafeRawBufferPointer(rebasing: payload[1..<(payload.count - Int(padding))])
    }

    static func error(_ code: HTTP2ErrorCode, _ what: String) -> HTTP2ProtocolError {
        HTTP2ProtocolError(code, operation: "reading HTTP/2 frames", detail: what)
    }
}
