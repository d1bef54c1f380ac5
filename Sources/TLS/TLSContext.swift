internal import COpenSSL
import PointerTricks
import Synchronization

/// An `SSL_CTX` set up for APNs: TLS 1.2+, ALPN `h2`, certificate verification.
/// Immutable after init but for the session kept to resume, so it may be shared by every I/O
/// thread (OpenSSL locks internally).
public final class TLSContext: @unchecked Sendable {
    let ctx: OpaquePointer
    public let isServer: Bool
    /// The latest session a client connection of this context got: the next connection resumes
    /// it, with no certificate chain to parse and verify again. A server that will not resume it
    /// answers with a full handshake.
    private let resumable = Mutex<Session?>(nil)
    /// An `SSL_SESSION*`, used under the lock only.
    private struct Session: @unchecked Sendable { let pointer: OpaquePointer }

    /// Client credentials for certificate (mutual TLS) authentication.
    public enum ClientIdentity: Sendable {
        case pem(certificateFile: String, keyFile: String)
        case pkcs12(file: String, password: String)
    }

    /// A client context. `caFile` nil means the system trust store; `alpn` is offered in order
    /// (HTTP/2 for APNs, nothing for Redis).
    public init(clientWithCAFile caFile: String?, identity: ClientIdentity? = nil, alpn: [String] = ["h2"]) throws(OpenSSLError) {
        guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw OpenSSLError.drain("SSL_CTX_new") }
        self.ctx = ctx
        isServer = false
        try configureCommon()
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        if let caFile {
            try OpenSSLError.check(SSL_CTX_load_verify_locations(ctx, caFile, nil), "loading CA file \(caFile)")
        } else {
            try OpenSSLError.check(SSL_CTX_set_default_verify_paths(ctx), "loading the system trust store")
        }
        // AES-128-GCM first (every TLS 1.3 peer implements it, RFC 8446 §9.1): OpenSSL's default
        // order puts AES-256-GCM first, whose four more rounds cost every byte sent and read.
        try OpenSSLError.check(
            SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"),
            "setting the TLS 1.3 cipher suites")
        let protocols = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        // Unlike most of OpenSSL, this returns 0 on success.
        if !protocols.isEmpty, SSL_CTX_set_alpn_protos(ctx, protocols, UInt32(protocols.count)) != 0 {
            throw OpenSSLError.drain("SSL_CTX_set_alpn_protos")
        }
        if let identity { try use(identity) }
        _ = apnsw_ssl_ctx_cache_client_sessions(ctx)
        SSL_CTX_set_ex_data(ctx, 0, CallbackContext.pointer(to: self))
        SSL_CTX_sess_set_new_cb(ctx) { ssl, session in
            guard let ssl, let session, let ctx = SSL_get_SSL_CTX(ssl), let owner = SSL_CTX_get_ex_data(ctx, 0) else { return 0 }
            CallbackContext.with(owner, as: TLSContext.self) { $0.keep(session) }
            return 1  // the session is ours now
        }
    }

    private func keep(_ session: OpaquePointer) {
        let new = Session(pointer: session)
        resumable.withLock { kept in
            if let old = kept { SSL_SESSION_free(old.pointer) }
            kept = new
        }
    }

    /// Offers the kept session, if any, to a new client connection (which takes its own reference).
    func offerSession(to ssl: OpaquePointer) {
        resumable.withLock { kept in
            if let kept { _ = SSL_set_session(ssl, kept.pointer) }
        }
    }

    /// A server context with a certificate chain and key; `clientCAFile` turns on optional
    /// client-certificate verification (for certificate-auth mode).
    public init(serverCertificateFile: String, keyFile: String, clientCAFile: String? = nil) throws(OpenSSLError) {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw OpenSSLError.drain("SSL_CTX_new") }
        self.ctx = ctx
        isServer = true
        try configureCommon()
        try OpenSSLError.check(SSL_CTX_use_certificate_chain_file(ctx, serverCertificateFile), "loading certificate \(serverCertificateFile)")
        try OpenSSLError.check(SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM), "loading the server key")
        try OpenSSLError.check(SSL_CTX_check_private_key(ctx), "matching the server key to its certificate")
        apnsw_ssl_ctx_use_alpn_h2_server(ctx)
        // Resumed sessions are this server's own: OpenSSL resumes none while client certificates
        // are verified unless the sessions carry a context id.
        let sessionContext = Array("apns-mock".utf8)
        try OpenSSLError.check(SSL_CTX_set_session_id_context(ctx, sessionContext, UInt32(sessionContext.count)), "setting the session id context")
        if let clientCAFile {
            try OpenSSLError.check(SSL_CTX_load_verify_locations(ctx, clientCAFile, nil), "loading client CA file")
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
        }
    }

    private func configureCommon() throws(OpenSSLError) {
        try OpenSSLError.check(Int32(apnsw_ssl_ctx_set_min_tls12(ctx)), "setting TLS 1.2 as the minimum")
        _ = apnsw_ssl_ctx_set_modes(ctx)
        // One read(2) takes whatever records have arrived (up to 64 KiB), not a header then a
        // body per record; buffers stay allocated (releasing them freed and reallocated one per read).
        apnsw_ssl_ctx_set_read_ahead(ctx)
        SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024)
        _ = apnsw_ssl_ctx_set_options(ctx)
    }

    private func use(_ identity: ClientIdentity) throws(OpenSSLError) {
        switch identity {
        case .pem(let certificateFile, let keyFile):
            try OpenSSLError.check(SSL_CTX_use_certificate_chain_file(ctx, certificateFile), "loading client certificate")
            SSL_CTX_set_default_passwd_cb(ctx, noPassphrase)  // an encrypted key fails, never prompts
            try OpenSSLError.check(SSL_CTX_use_PrivateKey_file(ctx, keyFile, SSL_FILETYPE_PEM), "loading client key (it must not be encrypted)")
        case .pkcs12(let file, let password):
            try withPKCS12(file: file, password: password) { (key, cert) throws(OpenSSLError) in
                try OpenSSLError.check(SSL_CTX_use_certificate(ctx, cert), "using PKCS#12 certificate")
                try OpenSSLError.check(SSL_CTX_use_PrivateKey(ctx, key), "using PKCS#12 key")
            }
        }
        try OpenSSLError.check(SSL_CTX_check_private_key(ctx), "matching the client key to its certificate")
    }

    deinit {
        SSL_CTX_free(ctx)
        resumable.withLock { kept in if let kept { SSL_SESSION_free(kept.pointer) } }
    }
}
