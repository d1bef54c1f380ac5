import Buffers
import Glibc
import IOLoop
import PointerTricks
import TLS

/// Life events of an `HTTP2Connection`, on top of its HTTP/2 session events.
public protocol HTTP2ConnectionDelegate: HTTP2SessionDelegate {
    /// TLS is up with ALPN `h2`; requests may be submitted.
    func connectionReady(_ connection: HTTP2Connection)
    /// The connection is gone. Called once; `error` is nil for an orderly close. The delegate
    /// must let go of the connection here: its session holds the delegate.
    func connectionClosed(_ connection: HTTP2Connection, error: Error?)
}

/// A TLS + HTTP/2 connection on a non-blocking socket, driven by one `EventLoop`.
///
/// Frames are collected into one buffer of at least 16 KB before each `SSL_write`
/// (one write per frame costs about 4× the CPU; DESIGN.md §2).
public final class HTTP2Connection: EventHandler {
    public enum State { case connecting, handshaking, open, closed }

    public private(set) var fd: Int32
    public private(set) var state: State
    /// A client's addresses not tried yet.
    private var untried: ArraySlice<SocketAddress> = []
    private var peerName = ""
    /// The address of the socket in hand, in numbers.
    private var dialled = ""
    private var connectTimeoutMs = 0, connectAttempts = 0
    /// A server's session (nghttp2's, for the mock), nil on a client.
    public private(set) var server: HTTP2ServerSession!
    /// A client's session (our own framing), nil on a server.
    public private(set) var client: HTTP2ClientSession!
    /// The first stream id of client connections: tests start near the last one (2^31 - 1).
    nonisolated(unsafe) static var firstClientStream: Int32 = 1
    private let framing: HTTP2Framing
    private let tls: TLSStream
    private var isServer: Bool { server != nil }
    /// Uncounted: the loop outlives the connections it runs (a checked unowned reference
    /// counted once per use, several times per response).
    private let loopReference: UncountedReference<EventLoop>
    /// Told of the connect and the close only; the session, which this connection holds, holds
    /// it too, and it lets go of this connection when told of the close.
    private let delegate: HTTP2ConnectionDelegate
    public var loop: EventLoop { loopReference.object }
    /// The loop's time at the start of this turn, read without counting a reference to the loop.
    public var iterationNs: UInt64 { loopReference.withObject { $0.iterationNs } }
    public var iterationWallMs: Int64 { loopReference.withObject { $0.iterationWallMs } }
    private var output = ByteBuffer(capacity: HTTP2Connection.writeTarget * 2)
    private var outputOffset = 0
    private var waitingForWritable = false
    private static let writeTarget = 32 * 1024
    private static let readChunk = 64 * 1024
    private var input = [UInt8](repeating: 0, count: HTTP2Connection.readChunk)

    /// Starts a client connection to the first of `addresses` that answers (non-blocking
    /// connects, one address after another), then TLS with SNI and ALPN for `serverName`.
    /// Each address has `timeoutMs` to take the connect and finish the TLS handshake: a
    /// dropped SYN would otherwise wait out the kernel's retries (about two minutes).
    public init(
        connectingTo addresses: [SocketAddress], tls context: TLSContext, serverName: String,
        loop: EventLoop, delegate: HTTP2ConnectionDelegate, timeoutMs: Int = 10_000
    ) throws {
        var rest = addresses[...]
        (fd, dialled) = try Self.connectNext(&rest, serverName)
        untried = rest
        peerName = serverName
        do {
            tls = try TLSStream(context: context, fd: fd, serverName: serverName)
        } catch {
            close(fd)
            throw error
        }
        loopReference = UncountedReference(loop)
        self.delegate = delegate
        state = .connecting
        client = try HTTP2ClientSession(delegate: delegate, firstStream: Self.firstClientStream)
        framing = client
        try loop.register(fd: fd, handler: self, writable: true)
        waitingForWritable = true
        connectTimeoutMs = timeoutMs
        armConnectTimeout()
    }

    /// A socket connecting to the first of `addresses` that takes a connect; the rest stay.
    private static func connectNext(_ addresses: inout ArraySlice<SocketAddress>, _ name: String) throws(SystemError) -> (Int32, String) {
        var lastError = SystemError(operation: "connect \(name)", code: EHOSTUNREACH, reason: "no address")
        while let address = addresses.popFirst() {
            do throws(SystemError) { return (try Socket.connect(to: address, name: name), address.numericHost) } catch { lastError = error }
        }
        throw lastError
    }

    /// The name and the address dialled, for errors: the TLS name alone hid which address failed.
    private var peer: String { "\(peerName) (\(dialled))" }

    /// A refused or unreachable address gives way to the next (an IPv6 address first, say,
    /// where only IPv4 gets through).
    private func connectFailed(_ error: SystemError) throws {
        guard !untried.isEmpty else { throw error }
        let (next, address) = try Self.connectNext(&untried, peerName)  // on failure `shutdown` closes the socket in hand
        loop.unregister(fd: fd)
        close(fd)
        fd = next
        dialled = address
        try tls.rebind(fd: fd)
        try loop.register(fd: fd, handler: self, writable: true)
        waitingForWritable = true
        armConnectTimeout()
    }

    /// Gives the socket in hand its time: a connect still pending then moves to the next
    /// address, a handshake not done closes the connection.
    private func armConnectTimeout() {
        connectAttempts += 1
        let attempt = connectAttempts  // a closed socket's number may come back for the next
        _ = loop.schedule(afterMilliseconds: connectTimeoutMs) { [weak self] in
            guard let self, connectAttempts == attempt else { return }
            let timedOut = SystemError(operation: "connect \(peer)", code: ETIMEDOUT)
            switch state {
            case .connecting:
                do { try connectFailed(timedOut) } catch { shutdown(error: error) }
            case .handshaking:
                shutdown(error: OpenSSLError(operation: "TLS handshake with \(peer)", details: "no answer in \(connectTimeoutMs) ms"))
            case .open, .closed:
                break
            }
        }
    }

    /// Wraps an accepted server socket.
    public init(
        accepted fd: Int32, tls context: TLSContext, loop: EventLoop, delegate: HTTP2ConnectionDelegate,
        maxConcurrentStreams: Int, answerPings: Bool = true
    ) throws {
        self.fd = fd
        tls = try TLSStream(context: context, fd: fd, serverName: nil)
        loopReference = UncountedReference(loop)
        self.delegate = delegate
        state = .handshaking
        server = try HTTP2ServerSession(delegate: delegate, maxConcurrentStreams: maxConcurrentStreams, answerPings: answerPings)
        framing = server
        try loop.register(fd: fd, handler: self, writable: false)
    }

    /// The client certificate's subject UID, on servers that asked for one.
    public var peerSubjectUID: String? { tls.peerSubjectUID }

    /// The TLS handshake resumed a session of an earlier connection of the same context.
    public var resumedTLSSession: Bool { tls.resumedSession }

    public func handleEvents(readable: Bool, writable: Bool, hangup: Bool) {
        do {
            switch state {
            case .connecting:
                let err = Socket.pendingError(fd)
                guard err == 0 else { return try connectFailed(SystemError(operation: "connect \(peer)", code: err)) }
                state = .handshaking
                try continueHandshake()
            case .handshaking:
                try continueHandshake()
            case .open:
                if readable || hangup { try readAvailable() }
                if state == .open { try flush() }
            case .closed:
                return
            }
        } catch let error as HTTP2ProtocolError {
            sayGoAway(after: error)
            shutdown(error: error)
        } catch {
            shutdown(error: error)
        }
    }

    /// A connection error: GOAWAY with its code goes out if the socket takes it now (RFC 9113
    /// §5.4.1), then the connection closes.
    private func sayGoAway(after error: HTTP2ProtocolError) {
        guard state == .open else { return }
        framing.sayGoAway(after: error)
        try? framing.produce(into: &output, target: HTTP2Connection.writeTarget)
        while outputOffset < output.count, case .bytes(let n)? = try? tls.write(output.bytes(from: outputOffset)), n > 0 { outputOffset += n }
    }

    private func continueHandshake() throws {
        switch try tls.handshake() {
        case .wantRead: setWritable(false)
        case .wantWrite: setWritable(true)
        case .done:
            // Clients insist on ALPN h2; servers also take HTTP/2 with prior knowledge (no ALPN), as APNs does.
            let alpn = tls.alpn
            guard alpn == "h2" || (isServer && alpn == nil) else {
                throw OpenSSLError(operation: "TLS handshake", details: "the peer did not agree to HTTP/2 (ALPN h2)")
            }
            state = .open
            setWritable(false)
            delegate.connectionReady(self)
            if state == .open {
                try readAvailable()
                if state == .open { try flush() }
            }
        }
    }

    private func readAvailable() throws {
        while state == .open {
            let result = try input.withUnsafeMutableBytes { try tls.read(into: $0) }
            switch result {
            case .bytes(let n):
                try input.withUnsafeBytes { try framing.receive(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            case .wantRead, .wantWrite:
                return
            case .closed:
                shutdown(error: nil)
                return
            }
        }
    }

    /// Writes every frame the session has queued. Call after submitting a batch of requests.
    public func flush() throws {
        guard state == .open else { return }
        while true {
            if outputOffset == output.count {
                output.removeAll()
                outputOffset = 0
                try framing.produce(into: &output, target: HTTP2Connection.writeTarget)
                if output.isEmpty { break }
            }
            let result = try tls.write(output.bytes(from: outputOffset))
            switch result {
            case .bytes(let n):
                outputOffset += n
            case .wantWrite, .wantRead:
                setWritable(true)
                return
            case .closed:
                shutdown(error: nil)
                return
            }
        }
        setWritable(false)
        if !framing.wantsRead && !framing.wantsWrite { shutdown(error: nil) }
    }

    /// Queues bytes past the session, ahead of what it writes next (`RawFrame`).
    public func writeRaw(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { output.append($0) }
    }

    /// Flushes and reports errors by closing, for callers that cannot handle them.
    public func flushOrClose() {
        do { try flush() } catch { shutdown(error: error) }
    }

    private func setWritable(_ on: Bool) {
        guard on != waitingForWritable, state != .closed else { return }
        waitingForWritable = on
        loop.setWritable(fd: fd, on)
    }

    /// Writes what is queued, then cuts the connection for writing (FIN) and closes it after
    /// `graceMs`: the peer gets every answer already given, and nothing after.
    public func cut(graceMs: Int) {
        guard state == .open else { return }
        flushOrClose()
        guard state == .open else { return }
        Glibc.shutdown(fd, Int32(SHUT_WR))
        loop.schedule(afterMilliseconds: graceMs) { [self] in shutdown(error: nil) }
    }

    /// Closes the socket at once and tells the delegate. An orderly close (no error) of an open
    /// connection sends TLS's close_notify first.
    public func shutdown(error: Error?) {
        guard state != .closed else { return }
        if error == nil, state == .open { tls.closeNotify() }
        state = .closed
        loop.keepAlive(self)
        loop.keepAlive(delegate)
        loop.unregister(fd: fd)
        close(fd)
        delegate.connectionClosed(self, error: error)
    }
}
