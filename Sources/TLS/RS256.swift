internal import COpenSSL

/// An RS256 (RSASSA-PKCS1-v1_5 + SHA-256) private key, as in a Google service account's
/// `private_key` (fcm-protocol.md §3.1). The key stays inside OpenSSL; `description` hides it.
public final class RS256PrivateKey: @unchecked Sendable, CustomStringConvertible {
    package let pkey: OpaquePointer

    /// Reads a PEM private key (PKCS#8 `BEGIN PRIVATE KEY`, or PKCS#1) and checks it is RSA.
    public init(pem: [UInt8]) throws(OpenSSLError) {
        pkey = try readKey(pem, operation: "reading the RSA private key") { PEM_read_bio_PrivateKey($0, nil, noPassphrase, nil) }
        try requireRSA(pkey, "the private key")
    }

    /// A fresh random key (tests, the demo and the mock's service accounts).
    public init(bits: UInt32 = 2048) throws(OpenSSLError) {
        guard let key = apnsw_rsa_generate(bits) else { throw OpenSSLError.drain("generating an RSA key") }
        pkey = key
    }

    deinit { EVP_PKEY_free(pkey) }

    public var description: String { "RS256PrivateKey(<redacted>)" }

    /// The PKCS#1 v1.5 signature over SHA-256 of `message`.
    public func sign(_ message: [UInt8]) throws(OpenSSLError) -> [UInt8] { try signSHA256(pkey, message) }

    /// PKCS#8 PEM text, as a service-account file holds it.
    public func pkcs8PEM() throws(OpenSSLError) -> String { try privateKeyPEM(pkey) }

    public func publicKeyPEM() throws(OpenSSLError) -> String { try TLS.publicKeyPEM(pkey) }
}

/// An RS256 public key that verifies JWT signatures (the mock FCM's token endpoint).
public final class RS256PublicKey: @unchecked Sendable {
    package let pkey: OpaquePointer

    public init(pem: [UInt8]) throws(OpenSSLError) {
        pkey = try readKey(pem, operation: "reading the RSA public key") { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        try requireRSA(pkey, "the public key")
    }

    deinit { EVP_PKEY_free(pkey) }

    public func verify(signature: [UInt8], message: [UInt8]) -> Bool { verifySHA256(pkey, signature: signature, message: message) }
}

/// Google's keys are 2048-bit RSA; anything under 2048 bits is refused as OpenSSL's defaults do.
private func requireRSA(_ pkey: OpaquePointer, _ what: String) throws(OpenSSLError) {
    guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_RSA, EVP_PKEY_get_bits(pkey) >= 2048 else {
        throw OpenSSLError(operation: "loading \(what)", details: "not an RSA key of 2048 bits or more (FCM's service accounts sign with RS256)")
    }
}
