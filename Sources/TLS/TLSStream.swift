internal import COpenSSL

/// One TLS session over a non-blocking socket. Owned by a single I/O thread.
package final class TLSStream {
    let ssl: OpaquePointer
    /// Held for as long as the connection: OpenSSL calls back into it (a client's session
    /// tickets) through a pointer that counts no reference.
    private let context: TLSContext

    package enum Progress { case done, wantRead, wantWrite }
    package enum IOResult { case bytes(Int), wantRead, wantWrite, closed }

    package init(context: TLSContext, fd: Int32, serverName: String?) throws(OpenSSLError) {
        guard let ssl = SSL_new(context.ctx) else { throw OpenSSLError.drain("SSL_new") }
        self.ssl = ssl
        self.context = context
        try OpenSSLError.check(SSL_set_fd(ssl, fd), "SSL_set_fd")
        if context.isServer {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
            context.offerSession(to: ssl)
            if let serverName {
                // SNI, and hostname verification of the peer certificate.
                try OpenSSLError.check(Int32(apnsw_ssl_set_sni(ssl, serverName)), "setting SNI")
                try OpenSSLError.check(SSL_set1_host(ssl, serverName), "setting the expected host name")
            }
        }
    }

    deinit { SSL_free(ssl) }

    /// Sends TLS's close_notify, once, after a finished handshake, and does not wait for the
    /// peer's. Besides telling the peer the close is meant, it keeps this connection's session
    /// resumable: OpenSSL drops the session of a connection freed without it, and a server
    /// (the mock, at least) then refuses the next connection's resumption.
    package func closeNotify() {
        guard SSL_is_init_finished(ssl) == 1 else { return }
        OpenSSLError.clear()
        _ = SSL_shutdown(ssl)  // a peer gone already makes this fail: the session stays resumable all the same
        OpenSSLError.clear()
    }

    /// Moves a client that has not started its handshake to another socket.
    package func rebind(fd: Int32) throws(OpenSSLError) {
        try OpenSSLError.check(SSL_set_fd(ssl, fd), "SSL_set_fd")
    }

    package func handshake() throws(OpenSSLError) -> Progress {
        OpenSSLError.clear()
        let r = SSL_do_handshake(ssl)
        if r == 1 { return .done }
        switch SSL_get_error(ssl, r) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                let text = String(cString: X509_verify_cert_error_string(verify))
                throw OpenSSLError(operation: "TLS handshake", details: "certificate verification: \(text)")
            }
            throw OpenSSLError.drain("TLS handshake")
        }
    }

    package var alpn: String? {
        var data: UnsafePointer<UInt8>?
        var len: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &len)
        guard let data, len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(len)), as: UTF8.self)
    }

    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(OpenSSLError) -> IOResult {
        OpenSSLError.clear()
        let r = SSL_read(ssl, buffer.baseAddress, Int32(buffer.count))
        if r > 0 { return .bytes(Int(r)) }
        return try status(r, "TLS read")
    }

    package func write(_ buffer: UnsafeRawBufferPointer) throws(OpenSSLError) -> IOResult {
        OpenSSLError.clear()
        let r = SSL_write(ssl, buffer.baseAddress, Int32(buffer.count))
        if r > 0 { return .bytes(Int(r)) }
        return try status(r, "TLS write")
    }

    private func status(_ r: Int32, _ operation: String) throws(OpenSSLError) -> IOResult {
        switch SSL_get_error(ssl, r) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            OpenSSLError.clear()
            return .closed
        default: throw OpenSSLError.drain(operation)
        }
    }

    /// The handshake resumed an earlier session (no certificate chain was sent or verified).
    package var resumedSession: Bool { SSL_session_reused(ssl) == 1 }

    /// The peer certificate's subject UID (the bundle id on APNs push certificates).
    package var peerSubjectUID: String? {
        guard let cert = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(cert) }
        guard let name = X509_get_subject_name(cert) else { return nil }
        var buf = [CChar](repeating: 0, count: 256)
        let n = X509_NAME_get_text_by_NID(name, NID_userId, &buf, Int32(buf.count))
        guard n > 0 else { return nil }
        return String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
