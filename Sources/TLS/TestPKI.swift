internal import COpenSSL

/// Makes a throwaway certificate authority and certificates signed by it, for the mock APNs,
/// tests and the demo. Never used for real APNs traffic.
public final class TestPKI {
    private let caKey: ES256PrivateKey
    private let caCert: OpaquePointer

    public init(commonName: String = "apns-worker test CA") throws(OpenSSLError) {
        caKey = try ES256PrivateKey()
        guard let cert = X509_new() else { throw OpenSSLError.drain("X509_new") }
        caCert = cert
        try Self.fill(cert, subject: [("CN", commonName)], key: caKey, serial: 1, days: 3650)
        X509_set_issuer_name(cert, X509_get_subject_name(cert))
        try Self.addExtensions(cert, issuer: cert, [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")])
        guard X509_sign(cert, caKey.pkey, EVP_sha256()) > 0 else { throw OpenSSLError.drain("signing the CA certificate") }
    }

    deinit { X509_free(caCert) }

    public func caCertificatePEM() throws(OpenSSLError) -> String {
        try writePEM("writing the CA certificate") { PEM_write_bio_X509($0, caCert) }
    }

    /// A certificate for `key`, signed by this CA.
    /// - `dnsNames`/`ips` make a server certificate; `uid` makes an APNs-style client certificate.
    public func issue(
        key: ES256PrivateKey, commonName: String, dnsNames: [String] = [], ips: [String] = [],
        uid: String? = nil, days: Int = 365, serial: Int = 2
    ) throws(OpenSSLError) -> String {
        guard let cert = X509_new() else { throw OpenSSLError.drain("X509_new") }
        defer { X509_free(cert) }
        var subject = [("CN", commonName)]
        if let uid { subject.append(("UID", uid)) }
        try Self.fill(cert, subject: subject, key: key, serial: serial, days: days)
        X509_set_issuer_name(cert, X509_get_subject_name(caCert))
        var exts: [(Int32, String)] = [(NID_basic_constraints, "critical,CA:FALSE")]
        let san = dnsNames.map { "DNS:\($0)" } + ips.map { "IP:\($0)" }
        if !san.isEmpty {
            exts.append((NID_subject_alt_name, san.joined(separator: ",")))
            exts.append((NID_ext_key_usage, "serverAuth"))
        } else {
            exts.append((NID_ext_key_usage, "clientAuth"))
        }
        try Self.addExtensions(cert, issuer: caCert, exts)
        guard X509_sign(cert, caKey.pkey, EVP_sha256()) > 0 else { throw OpenSSLError.drain("signing a certificate") }
        return try writePEM("writing a certificate") { PEM_write_bio_X509($0, cert) }
    }

    /// A PKCS#12 bundle of `key` and its certificate, protected by `password`.
    public static func pkcs12(key: ES256PrivateKey, certificatePEM: String, password: String) throws(OpenSSLError) -> [UInt8] {
        let pem = Array(certificatePEM.utf8)
        guard let inBio = pem.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else { throw OpenSSLError.drain("BIO") }
        defer { BIO_free(inBio) }
        guard let cert = PEM_read_bio_X509(inBio, nil, nil, nil) else { throw OpenSSLError.drain("reading a certificate") }
        defer { X509_free(cert) }
        guard let p12 = PKCS12_create(password, "apns", key.pkey, cert, nil, 0, 0, 0, 0, 0) else { throw OpenSSLError.drain("PKCS12_create") }
        defer { PKCS12_free(p12) }
        guard let out = BIO_new(BIO_s_mem()) else { throw OpenSSLError.drain("BIO") }
        defer { BIO_free(out) }
        try OpenSSLError.check(i2d_PKCS12_bio(out, p12), "writing PKCS#12")
        var ptr: UnsafeMutablePointer<CChar>?
        let n = apnsw_bio_get_mem_data(out, &ptr)
        guard let ptr, n > 0 else { throw OpenSSLError.drain("writing PKCS#12") }
        return Array(UnsafeRawBufferPointer(start: ptr, count: n))
    }

    private static func fill(_ cert: OpaquePointer, subject: [(String, String)], key: ES256PrivateKey, serial: Int, days: Int) throws(OpenSSLError) {
        try OpenSSLError.check(X509_set_version(cert, 2), "X509_set_version")
        ASN1_INTEGER_set(X509_get_serialNumber(cert), serial)
        X509_gmtime_adj(X509_getm_notBefore(cert), -3600)
        X509_gmtime_adj(X509_getm_notAfter(cert), days * 86_400)
        try OpenSSLError.check(X509_set_pubkey(cert, key.pkey), "X509_set_pubkey")
        let name = X509_get_subject_name(cert)
        for (field, value) in subject {
            try OpenSSLError.check(X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0), "setting \(field)")
        }
    }

    private static func addExtensions(_ cert: OpaquePointer, issuer: OpaquePointer, _ list: [(Int32, String)]) throws(OpenSSLError) {
        var v3 = X509V3_CTX()
        X509V3_set_ctx(&v3, issuer, cert, nil, nil, 0)
        for (nid, value) in list {
            guard let ext = X509V3_EXT_conf_nid(nil, &v3, nid, value) else { throw OpenSSLError.drain("certificate extension \(value)") }
            defer { X509_EXTENSION_free(ext) }
            try OpenSSLError.check(X509_add_ext(cert, ext, -1), "adding an extension")
        }
    }
}
