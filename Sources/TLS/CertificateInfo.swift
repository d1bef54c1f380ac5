internal import COpenSSL
import Glibc

/// What the worker checks on a client certificate: its subject UID (the bundle id) and expiry.
public struct CertificateInfo: Sendable {
    public let subjectUID: String?
    /// UNIX seconds.
    public let notAfter: Int64

    public static func read(pemFile: String) throws(OpenSSLError) -> CertificateInfo {
        guard let bio = BIO_new_file(pemFile, "r") else { throw OpenSSLError.drain("opening certificate \(pemFile)") }
        defer { BIO_free(bio) }
        guard let cert = PEM_read_bio_X509(bio, nil, nil, nil) else { throw OpenSSLError.drain("reading certificate \(pemFile)") }
        defer { X509_free(cert) }
        return try info(cert)
    }

    public static func read(pkcs12File: String, password: String) throws(OpenSSLError) -> CertificateInfo {
        try withPKCS12(file: pkcs12File, password: password) { (_, cert) throws(OpenSSLError) in try info(cert) }
    }

    static func info(_ cert: OpaquePointer) throws(OpenSSLError) -> CertificateInfo {
        var t = tm()
        guard let end = X509_get0_notAfter(cert), ASN1_TIME_to_tm(end, &t) == 1 else {
            throw OpenSSLError.drain("reading the certificate's expiry")
        }
        var uid: String?
        if let name = X509_get_subject_name(cert) {
            var buf = [CChar](repeating: 0, count: 256)
            let n = X509_NAME_get_text_by_NID(name, NID_userId, &buf, Int32(buf.count))
            if n > 0 { uid = String(decoding: buf.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        }
        return CertificateInfo(subjectUID: uid, notAfter: Int64(timegm(&t)))
    }
}

/// Opens a PKCS#12 file and lends its key and certificate to `body` (freed afterwards).
func withPKCS12<R>(
    file: String, password: String,
    _ body: (_ key: OpaquePointer, _ cert: OpaquePointer) throws(OpenSSLError) -> R
) throws(OpenSSLError) -> R {
    guard let bio = BIO_new_file(file, "rb") else { throw OpenSSLError.drain("opening PKCS#12 file \(file)") }
    defer { BIO_free(bio) }
    guard let p12 = d2i_PKCS12_bio(bio, nil) else { throw OpenSSLError.drain("reading PKCS#12 file \(file)") }
    defer { PKCS12_free(p12) }
    var key: OpaquePointer?
    var cert: OpaquePointer?
    try OpenSSLError.check(PKCS12_parse(p12, password, &key, &cert, nil), "opening PKCS#12 file \(file) (wrong password?)")
    defer { EVP_PKEY_free(key); X509_free(cert) }
    guard let key, let cert else { throw OpenSSLError(operation: "reading PKCS#12 file \(file)", details: "no key or certificate inside") }
    return try body(key, cert)
}
