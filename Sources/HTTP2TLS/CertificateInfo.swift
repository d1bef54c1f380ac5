import COpenSSL
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
        guard let bio = BIO_new_file(pkcs12File, "rb") else { throw OpenSSLError.drain("opening \(pkcs12File)") }
        defer { BIO_free(bio) }
        guard let p12 = d2i_PKCS12_bio(bio, nil) else { throw OpenSSLError.drain("reading \(pkcs12File)") }
        defer { PKCS12_free(p12) }
        var key: OpaquePointer?
        var cert: OpaquePointer?
        try OpenSSLError.check(PKCS12_parse(p12, password, &key, &cert, nil), "opening \(pkcs12File) (wrong password?)")
        defer { EVP_PKEY_free(key); X509_free(cert) }
        guard let cert else { throw OpenSSLError(operation: "reading \(pkcs12File)", details: "no certificate inside") }
        return try info(cert)
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
