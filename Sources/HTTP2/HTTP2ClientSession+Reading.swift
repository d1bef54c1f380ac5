import Buffers
internal import CNghttp2

/// Reading the server's frames (RFC 9113 §6): each checked as the RFC requires, a broken one a
/// connection error.
extension HTTP2ClientSession {
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
    func readFrames(_ bytes: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) -> Int {
        var at = 0
        while bytes.count - at >= 9 {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            guard length <= Self.maxFrameSize else { throw Self.error(.frameSizeError, "a frame larger than SETTINGS_MAX_FRAME_SIZE") }
            guard bytes.count - at - 9 >= length else { break }
            let stream = Int32(
                bitPattern: UInt32(bytes[at + 5] & 0x7F) << 24 | UInt32(bytes[at + 6]) << 16 | UInt32(bytes[at + 7]) << 8 | UInt32(bytes[at + 8]))
            let payload = UnsafeRawBufferPointer(rebasing: bytes[(at + 9)..<(at + 9 + length)])
            try frame(type: bytes[at + 3], flags: bytes[at + 4], stream: stream, payload)
            at += 9 + length
            guard answersQueued <= Self.maxQueuedAnswers else {
                throw Self.error(.enhanceYourCalm, "more than \(Self.maxQueuedAnswers) frames to answer while the server reads none")
            }
        }
        return at
    }

    func frame(type: UInt8, flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard reading == .frames || type == HTTP2Frame.Kind.continuation.rawValue else {
            throw Self.error(.protocolError, "a frame inside a header block")
        }
        if case .awaitingSettings = state, type != HTTP2Frame.Kind.settings.rawValue {
            throw Self.error(.protocolError, "the server's first frame is not SETTINGS")
        }
        let kind = HTTP2Frame.Kind(rawValue: type)
        if stream != 0, kind != .priority, kind != .continuation, kind != nil, !wasOpened(stream) {
            throw Self.error(.protocolError, "a frame of type \(type) on stream \(stream), which was never opened")
        }
        switch kind {
        case .data: try data(flags: flags, stream: stream, payload)
        case .headers: try headers(flags: flags, stream: stream, payload)
        case .rstStream:
            guard payload.count == 4 else { throw Self.error(.frameSizeError, "RST_STREAM of \(payload.count) bytes") }
            guard stream != 0 else { throw Self.error(.protocolError, "RST_STREAM on stream 0") }
            if streams.removeValue(forKey: stream) != nil {
                delegate.http2StreamClosed(stream, errorCode: HTTP2ErrorCode(rawValue: HTTP2Frame.uint32(payload, 0)))
            }
        case .settings: try settings(flags: flags, stream: stream, payload)
        case .pushPromise: throw Self.error(.protocolError, "PUSH_PROMISE, which our SETTINGS refused")
        case .ping:
            guard payload.count == 8 else { throw Self.error(.frameSizeError, "PING of \(payload.count) bytes") }
            guard stream == 0 else { throw Self.error(.protocolError, "PING on a stream") }
            if flags & HTTP2Frame.Flag.ack != 0 {
                delegate.http2PingAck()
            } else {
                delegate.http2PingReceived()
                pending.appendFrameHeader(length: 8, type: .ping, flags: HTTP2Frame.Flag.ack, stream: 0)
                pending.append(payload)
                answersQueued += 1
            }
        case .goAway: try goAway(stream: stream, payload)
        case .windowUpdate: try windowUpdate(stream: stream, payload)
        case .continuation:
            guard case .continuation(stream, let endsStream) = reading else { throw Self.error(.protocolError, "CONTINUATION without its HEADERS") }
            guard headerBlock.count + payload.count <= Self.maxHeaderBlock else { throw Self.error(.protocolError, "a header block over 64 KiB") }
            headerBlock.append(payload)
            if flags & HTTP2Frame.Flag.endHeaders != 0 {
                reading = .frames
                try headersDone(stream: stream, endStream: endsStream)
            }
        case .priority:
            guard stream != 0 else { throw Self.error(.protocolError, "PRIORITY on stream 0") }
            if payload.count != 5 { streamError(stream, .frameSizeError) }  // otherwise ignored: we keep no priorities
        case nil:
            break  // frames of unknown types are ignored (RFC 9113 §5.5)
        }
    }

    func data(flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream != 0 else { throw Self.error(.protocolError, "DATA on stream 0") }
        let content = try Self.unpadded(flags: flags, payload)
        // Padding counts against the window too; the connection's is granted again at half.
        guard payload.count <= receiveWindow else { throw Self.error(.flowControlError, "DATA beyond the connection's window") }
        receiveWindow -= payload.count
        receivedSinceUpdate += payload.count
        if receivedSinceUpdate >= Self.connectionWindow / 2 {
            writeWindowUpdate(stream: 0, increment: receivedSinceUpdate)
            receivedSinceUpdate = 0
        }
        guard var s = streams[stream] else { return }  // reset by us: its answer goes unread
        guard payload.count <= s.receiveWindow else { return streamError(stream, .flowControlError) }
        s.receiveWindow -= payload.count
        streams[stream] = s
        if !content.isEmpty { delegate.http2Data(stream: stream, bytes: content.assumingMemoryBound(to: UInt8.self)) }
        if flags & HTTP2Frame.Flag.endStream != 0 { remoteEnded(stream) }
    }

    func headers(flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream != 0 else { throw Self.error(.protocolError, "HEADERS on stream 0") }
        var fragment = try Self.unpadded(flags: flags, payload)
        if flags & HTTP2Frame.Flag.priority != 0 {
            guard fragment.count >= 5 else { throw Self.error(.frameSizeError, "HEADERS too short for its priority") }
            fragment = UnsafeRawBufferPointer(rebasing: fragment[5...])
        }
        headerBlock.removeAll()
        headerBlock.append(fragment)
        if flags & HTTP2Frame.Flag.endHeaders != 0 {
            try headersDone(stream: stream, endStream: flags & HTTP2Frame.Flag.endStream != 0)
        } else {
            reading = .continuation(stream: stream, endsStream: flags & HTTP2Frame.Flag.endStream != 0)
        }
    }

    /// Decodes a whole header block, even for a stream we reset (the decoder's table must follow
    /// every block), and hands a live stream's fields to the delegate.
    func headersDone(stream: Int32, endStream: Bool) throws(HTTP2ProtocolError) {
        let live = streams[stream] != nil
        let block = headerBlock.bytes()
        var p = block.baseAddress?.assumingMemoryBound(to: UInt8.self), left = block.count
        while true {
            var nv = nghttp2_nv()
            var flags: Int32 = 0
            let n = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, p, left, 1)
            guard n >= 0 else { throw Self.error(.compressionError, "a header block that does not decode") }
            p = p.map { $0 + n }
            left -= n
            if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0, live {
                delegate.http2Header(
                    stream: stream, name: UnsafeBufferPointer(start: nv.name, count: nv.namelen),
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
    func remoteEnded(_ stream: Int32) {
        delegate.http2EndStream(stream)
        guard let s = streams.removeValue(forKey: stream) else { return }
        if !s.sentEnd { writeRSTStream(stream, .noError) }
        delegate.http2StreamClosed(stream, errorCode: .noError)
    }

    func settings(flags: UInt8, stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream == 0 else { throw Self.error(.protocolError, "SETTINGS on a stream") }
        if flags & HTTP2Frame.Flag.ack != 0 {
            guard payload.isEmpty else { throw Self.error(.frameSizeError, "SETTINGS ACK with a payload") }
            delegate.http2SettingsAcknowledged()
            return
        }
        guard payload.count % 6 == 0 else { throw Self.error(.frameSizeError, "SETTINGS of \(payload.count) bytes") }
        for at in stride(from: 0, to: payload.count, by: 6) {
            let id = UInt16(payload[at]) << 8 | UInt16(payload[at + 1])
            let value = HTTP2Frame.uint32(payload, at + 2)
            switch HTTP2Frame.Setting(rawValue: id) {
            case .headerTableSize: encoder.peerTableSize(Int(value))
            case .maxConcurrentStreams: peerMaxConcurrentStreams = Int(value)
            case .initialWindowSize:
                guard value <= 0x7FFF_FFFF else { throw Self.error(.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1") }
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
                guard (16_384...16_777_215).contains(value) else { throw Self.error(.protocolError, "SETTINGS_MAX_FRAME_SIZE \(value)") }
                peerMaxFrameSize = Int(value)
            case .enablePush, nil:
                break
            }
        }
        pending.appendFrameHeader(length: 0, type: .settings, flags: HTTP2Frame.Flag.ack, stream: 0)
        answersQueued += 1
        if case .awaitingSettings(let said) = state { state = said ? .goingAway(saidByUs: true) : .open }
        delegate.http2RemoteSettings(maxConcurrentStreams: peerMaxConcurrentStreams)
        sendUnsent()
    }

    func goAway(stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard stream == 0 else { throw Self.error(.protocolError, "GOAWAY on a stream") }
        guard payload.count >= 8 else { throw Self.error(.frameSizeError, "GOAWAY of \(payload.count) bytes") }
        let last = Int32(bitPattern: HTTP2Frame.uint32(payload, 0) & 0x7FFF_FFFF)
        if state == .open { state = .goingAway(saidByUs: false) }
        delegate.http2GoAway(lastStreamID: last, errorCode: HTTP2ErrorCode(rawValue: HTTP2Frame.uint32(payload, 4)), debugData: Array(payload[8...]))
        // Streams above the last one processed never were: closed as refused, to be sent again.
        for (id, _) in streams.entries.sorted(by: { $0.id < $1.id }) where id > last {
            streams.removeValue(forKey: id)
            delegate.http2StreamClosed(id, errorCode: .refusedStream)
        }
    }

    func windowUpdate(stream: Int32, _ payload: UnsafeRawBufferPointer) throws(HTTP2ProtocolError) {
        guard payload.count == 4 else { throw Self.error(.frameSizeError, "WINDOW_UPDATE of \(payload.count) bytes") }
        let increment = Int(HTTP2Frame.uint32(payload, 0) & 0x7FFF_FFFF)
        if stream == 0 {
            guard increment > 0 else { throw Self.error(.protocolError, "a WINDOW_UPDATE of 0 for the connection") }
            sendWindow += increment
            guard sendWindow <= 0x7FFF_FFFF else { throw Self.error(.flowControlError, "a connection window above 2^31-1") }
        } else if var s = streams[stream] {
            // Stream errors (RFC 9113 §6.9, §6.9.1): the stream is reset, the connection goes on.
            guard increment > 0 else { return streamError(stream, .protocolError) }
            guard s.window + increment <= 0x7FFF_FFFF else { return streamError(stream, .flowControlError) }
            s.window += increment
            streams[stream] = s
        }
        sendUnsent()
    }
}
