internal import COpenSSL

/// An ES256 (ECDSA P-256 + SHA-256) private key, as in an APNs `.p8` file.
/// The key bytes stay inside OpenSSL; `description` never shows them.
public final class ES256PrivateKey: @unchecked Sendable, CustomStringConvertible {
    package let pkey: OpaquePointer

    /// Reads a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`) and checks it is a P-256 EC key.
    public init(pem: [UInt8]) throws(OpenSSLError) {
        // An encrypted key would have OpenSSL ask for a pass phrase on the terminal, and wait.
        if pem.count >= 9, (0...(pem.count - 9)).contains(where: { pem[$0..<($0 + 9)].elementsEqual("ENCRYPTED".utf8) }) {
            throw OpenSSLError(
                operation: "reading the .p8 key",
                details:
                    "the key is encrypted (a pass phrase protects it); Apple's .p8 keys are not: use the file as downloaded, or decrypt it with openssl pkcs8 -in key.p8 -out plain.p8"
            )
        }
        if let key = pem.withUnsafeBufferPointer({ apnsw_read_ec_private_key_pem($0.baseAddress, $0.count) }) {
            pkey = key
        } else {
            // Not an EC key: read it as any key, for the error that says what it is.
            OpenSSLError.clear()
            pkey = try readKey(pem, operation: "reading the .p8 key") { PEM_read_bio_PrivateKey($0, nil, noPassphrase, nil) }
        }
        try requireP256(pkey, "the .p8 key")
    }

    /// A fresh random key (tests, demo and the mock's generated credentials).
    public init() throws(OpenSSLError) {
        guard let key = apnsw_ec_p256_generate() else { throw OpenSSLError.drain("generating a P-256 key") }
        pkey = key
    }

    deinit { EVP_PKEY_free(pkey) }

    public var description: String { "ES256PrivateKey(<redacted>)" }

    /// Signs and returns the raw `r‖s` JWS signature (64 bytes).
    public func sign(_ message: [UInt8]) throws(OpenSSLError) -> [UInt8] {
        let der = try signSHA256(pkey, message)
        do {
            return try ECDSASignature.rawFromDER(der)
        } catch {
            throw OpenSSLError(operation: "ES256 signature", details: error.message)
        }
    }

    /// PKCS#8 PEM text, for writing generated keys to disk.
    public func pkcs8PEM() throws(OpenSSLError) -> String { try privateKeyPEM(pkey) }

    /// The matching public key as SubjectPublicKeyInfo PEM.
    public func publicKeyPEM() throws(OpenSSLError) -> String { try TLS.publicKeyPEM(pkey) }
}

/// A signature over SHA-256 of `message` with `pkey`: DER for ECDSA, PKCS#1 v1.5 for RSA.
func signSHA256(_ pkey: OpaquePointer, _ message: [UInt8]) throws(OpenSSLError) -> [UInt8] {
    guard let md = EVP_MD_CTX_new() else { throw OpenSSLError.drain("EVP_MD_CTX_new") }
    defer { EVP_MD_CTX_free(md) }
    try OpenSSLError.check(EVP_DigestSignInit(md, nil, EVP_sha256(), nil, pkey), "EVP_DigestSignInit")
    var length = 0
    try OpenSSLError.check(EVP_DigestSign(md, nil, &length, message, message.count), "EVP_DigestSign (size)")
    var signature = [UInt8](repeating: 0, count: length)
    try OpenSSLError.check(EVP_DigestSign(md, &signature, &length, message, message.count), "EVP_DigestSign")
    return Array(signature.prefix(length))
}

/// Verifies a signature over SHA-256 of `message`; false for a bad one.
func verifySHA256(_ pkey: OpaquePointer, signature: [UInt8], message: [UInt8]) -> Bool {
    guard let md = EVP_MD_CTX_new() else { return false }
    defer { EVP_MD_CTX_free(md); OpenSSLError.clear() }
    guard EVP_DigestVerifyInit(md, nil, EVP_sha256(), nil, pkey) == 1 else { return false }
    return EVP_DigestVerify(md, signature, signature.count, message, message.count) == 1
}

func privateKeyPEM(_ pkey: OpaquePointer) throws(OpenSSLError) -> String {
    try writePEM("writing the private key") { PEM_write_bio_PrivateKey($0, pkey, nil, nil, 0, nil, nil) }
}

func publicKeyPEM(_ pkey: OpaquePointer) throws(OpenSSLError) -> String {
    try writePEM("writing the public key") { PEM_write_bio_PUBKEY($0, pkey) }
}

/// An ES256 public key that verifies JWT signatures (used by the mock APNs).
public final class ES256PublicKey: @unchecked Sendable {
    package let pkey: OpaquePointer

    public init(pem: [UInt8]) throws(OpenSSLError) {
        pkey = try readKey(pem, operation: "reading the public key") { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        try requireP256(pkey, "the public key")
    }

    deinit { EVP_PKEY_free(pkey) }

    /// Verifies a raw `r‖s` signature; false for a wrong size or a bad signature.
    public func verify(signature raw: [UInt8], message: [UInt8]) -> Bool {
        guard let der = try? ECDSASignature.derFromRaw(raw) else { return false }
        return verifySHA256(pkey, signature: der, message: message)
    }
}

func readKey(_ pem: [UInt8], operation: String, _ read: (OpaquePointer) -> OpaquePointer?) throws(OpenSSLError) -> OpaquePointer {
    guard let bio = pem.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else {
        throw OpenSSLError.drain(operation)
    }
    defer { BIO_free(bio) }
    // The error text names the failing step only; it never echoes the PEM.
    guard let key = read(bio) else { throw OpenSSLError.drain(operation) }
    return key
}

/// Called once the key is stored: the object's deinit frees it when this throws (freeing it here
/// too freed it twice).
private func requireP256(_ pkey: OpaquePointer, _ what: String) throws(OpenSSLError) {
    guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC, EVP_PKEY_get_bits(pkey) == 256 else {
        throw OpenSSLError(operation: "loading \(what)", details: "not an EC P-256 key (APNs needs ES256)")
    }
}

package func writePEM(_ operation: String, _ write: (OpaquePointer) -> Int32) throws(OpenSSLError) -> String {
    guard let bio = BIO_new(BIO_s_mem()) else { throw OpenSSLError.drain(operation) }
    defer { BIO_free(bio) }
    try OpenSSLError.check(write(bio), operation)
    var ptr: UnsafeMutablePointer<CChar>?
    let n = apnsw_bio_get_mem_data(bio, &ptr)
    guard let ptr, n > 0 else { throw OpenSSLError.drain(operation) }
    return String(decoding: UnsafeRawBufferPointer(start: ptr, count: n), as: UTF8.self)
}

/// A pass phrase callback that gives none: OpenSSL fails instead of prompting on a terminal.
let noPassphrase: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { _, _, _, _ in 0 }
