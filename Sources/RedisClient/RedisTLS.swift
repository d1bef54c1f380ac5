internal import CHiredisIO
import PointerTricks
import Synchronization
import TLS

/// TLS to Redis: the CA that signs the server's certificate (or the system store), the name
/// to verify it against, and a client certificate for servers that ask for one. Its OpenSSL
/// context is made on first use, once, and shared by every connection of the same settings.
public struct RedisTLS: Sendable {
    /// nil: the system's trust store.
    public var caFile: String?
    /// The name the server's certificate must carry; nil: the host dialled.
    public var serverName: String?
    public var certificateFile: String?
    /// The client certificate's key; nil: it is in the certificate file.
    public var keyFile: String?
    private let made = MadeContext()

    public init(caFile: String? = nil, serverName: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.serverName = serverName
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }

    /// The OpenSSL context: loading the CA and the client certificate fails here, with what to fix.
    public func context() throws(OpenSSLError) -> TLSContext {
        try made.context(for: self)
    }

    private final class MadeContext: Sendable {
        private let state = Mutex<(key: [String?], context: TLSContext)?>(nil)

        func context(for tls: RedisTLS) throws(OpenSSLError) -> TLSContext {
            let key = [tls.caFile, tls.certificateFile, tls.keyFile]
            if let made = state.withLock({ $0 }), made.key == key { return made.context }
            let identity = tls.certificateFile.map { TLSContext.ClientIdentity.pem(certificateFile: $0, keyFile: tls.keyFile ?? $0) }
            let context = try TLSContext(clientWithCAFile: tls.caFile, identity: identity, alpn: [])
            state.withLock { $0 = (key, context) }
            return context
        }
    }
}

/// One TLS session over a Redis context's socket, and the calls through which the C side
/// reads and writes it (`apnsw_redis_io`). Owned by the connection that owns the context.
final class RedisTLSLink {
    private let stream: TLSStream
    /// Stable for the link's life: the C side keeps no copy, but each call is handed this.
    let io: UnsafeMutablePointer<apnsw_redis_io>
    private(set) var handshakeDone = false
    /// What the handshake waits for, while it is not done.
    private(set) var handshakeWantsWrite = true

    init(_ tls: RedisTLS, fd: Int32, host: String) throws(OpenSSLError) {
        stream = try TLSStream(context: try tls.context(), fd: fd, serverName: tls.serverName ?? host)
        io = .allocate(capacity: 1)
        io.initialize(
            to: apnsw_redis_io(
                stream: CallbackContext.pointer(to: self),
                read: { link, buffer, count, error, errorLength in
                    CallbackContext.with(link!, as: RedisTLSLink.self) { link in
                        link.moved(error, errorLength) { () throws(OpenSSLError) in
                            try link.stream.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: count))
                        }
                    }
                },
                write: { link, buffer, count, error, errorLength in
                    CallbackContext.with(link!, as: RedisTLSLink.self) { link in
                        link.moved(error, errorLength) { () throws(OpenSSLError) in
                            let result = try link.stream.write(UnsafeRawBufferPointer(start: buffer, count: count))
                            if case .closed = result { try link.readAlert() }
                            return result
                        }
                    }
                }))
    }

    deinit {
        io.deinitialize(count: 1)
        io.deallocate()
    }

    /// One step of the handshake: true once it is done. A socket that blocks finishes it here
    /// or times out.
    func handshake() throws(OpenSSLError) -> Bool {
        switch try stream.handshake() {
        case .done: handshakeDone = true
        case .wantRead: handshakeWantsWrite = false
        case .wantWrite: handshakeWantsWrite = true
        }
        return handshakeDone
    }

    func closeNotify() { stream.closeNotify() }

    /// After a write found the connection closed: the server's alert, if it sent one before
    /// closing (a refused client certificate), thrown as the error it names.
    private func readAlert() throws(OpenSSLError) {
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 512, alignment: 1)
        defer { scratch.deallocate() }
        _ = try stream.read(into: scratch)
    }

    /// The C side's convention: bytes moved, 0 closed, -1 wait, -2 failed with the text in `error`.
    private func moved(
        _ text: UnsafeMutablePointer<CChar>?, _ capacity: Int, _ body: () throws(OpenSSLError) -> TLSStream.IOResult
    ) -> Int {
        do {
            switch try body() {
            case .bytes(let n): return n
            case .wantRead, .wantWrite: return -1
            case .closed: return 0
            }
        } catch {
            if let text, capacity > 0 {
                let message = Array("TLS: \(error)".utf8.prefix(capacity - 1))
                for (i, b) in message.enumerated() { text[i] = CChar(bitPattern: b) }
                text[message.count] = 0
            }
            return -2
        }
    }
}
