import APNSCore
import Foundation
import TLS
import XCTest

final class CryptoEncodingTests: XCTestCase {
    func testBase64URLRoundTripsWithoutPadding() {
        for n in 0..<40 {
            let data = (0..<n).map { UInt8(($0 * 37 + n) & 0xFF) }
            let text = Base64URL.encode(data)
            XCTAssertFalse(text.contains("=") || text.contains("+") || text.contains("/"))
            XCTAssertEqual(Base64URL.decode(text), data)
        }
        XCTAssertEqual(Base64URL.encode(Array("hello?>".utf8)), "aGVsbG8_Pg")
        XCTAssertNil(Base64URL.decode("ab$c"))
    }

    func testDERToRawPadsAndStripsSignBytes() throws {
        // r has a leading 0x00 sign byte (33 bytes); s is short (31 bytes).
        let r = [UInt8](repeating: 0x80, count: 32)
        let s = [UInt8](repeating: 0x11, count: 31)
        let der: [UInt8] = [0x30, UInt8(2 + 33 + 2 + 31), 0x02, 33, 0x00] + r + [0x02, 31] + s
        let raw = try ECDSASignature.rawFromDER(der)
        XCTAssertEqual(raw.count, 64)
        XCTAssertEqual(Array(raw[0..<32]), r)
        XCTAssertEqual(Array(raw[32..<64]), [0] + s)
        XCTAssertEqual(try ECDSASignature.derFromRaw(raw), der)
    }

    func testDERRejectsGarbage() {
        XCTAssertThrowsError(try ECDSASignature.rawFromDER([0x30, 0x03, 0x02, 0x01]))
        XCTAssertThrowsError(try ECDSASignature.rawFromDER([0x31, 0x00]))
        XCTAssertThrowsError(try ECDSASignature.derFromRaw([1, 2, 3]))
    }

    func testSignaturesVerifyWithTheMatchingKeyOnly() throws {
        let key = try ES256PrivateKey()
        let other = try ES256PrivateKey()
        let message = Array("header.claims".utf8)
        let signature = try key.sign(message)
        XCTAssertEqual(signature.count, 64)
        let pub = try ES256PublicKey(pem: Array(try key.publicKeyPEM().utf8))
        XCTAssertTrue(pub.verify(signature: signature, message: message))
        XCTAssertFalse(pub.verify(signature: signature, message: Array("header.claimz".utf8)))
        let otherPub = try ES256PublicKey(pem: Array(try other.publicKeyPEM().utf8))
        XCTAssertFalse(otherPub.verify(signature: signature, message: message))
    }

    func testBrokenKeyErrorsNeverEchoTheKey() throws {
        let pem = try ES256PrivateKey().pkcs8PEM()
        let broken = pem.replacingOccurrences(of: "A", with: "B")
        do {
            _ = try ES256PrivateKey(pem: Array(broken.utf8))
            XCTFail("a corrupted key must not load")
        } catch {
            let body = pem.split(separator: "\n").dropFirst().first.map(String.init) ?? "?"
            XCTAssertFalse("\(error)".contains(body))
            XCTAssertFalse("\(error)".contains(String(broken.split(separator: "\n")[1])))
        }
    }

    /// The .p8 reader asks OpenSSL for EC keys only; a P-256 key in SEC1 form loads too, and any
    /// other key still gets the error that names the problem. Test keys made for this test.
    func testKeyReaderTakesP256InEitherFormAndNamesOtherKeys() throws {
        let sec1 = """
            -----BEGIN EC PRIVATE KEY-----
            MHcCAQEEIPHakXXbqw+Cqffi6Pv4txRjYz/0ySBjkPo7L4M4Z6cToAoGCCqGSM49
            AwEHoUQDQgAEEtd8Bwo9rPIpGGdu/PmM4z8fQ6cu2cBKjSGzZ5uB+JWH6/OL/BBU
            xCUg4SoQEXxTs8I4S2rOVSPkWcZjnKbleg==
            -----END EC PRIVATE KEY-----
            """
        let key = try ES256PrivateKey(pem: Array(sec1.utf8))
        XCTAssertEqual(try key.sign(Array("m".utf8)).count, 64)
        let p384 = """
            -----BEGIN PRIVATE KEY-----
            MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDDH3obNAUmy3PLQ5v0i
            aqet3jvpxmdlgtOu16jrnCeKpVuipv2w36PZ3xJe0pVNkOehZANiAATFRjWuLGME
            KSfrq3uMIGocvjmwYfhqA4A6TQ7vowfF4xr5vgsjXH4+ojvtsmrivOjeuFWzdtD7
            FJT1FDU3GHW9YlSSY9vRjHpFOrQJtG7Ib4bEJOiImg5uHiyna3ZFK9Y=
            -----END PRIVATE KEY-----
            """
        XCTAssertThrowsError(try ES256PrivateKey(pem: Array(p384.utf8))) { error in
            XCTAssertTrue("\(error)".contains("not an EC P-256 key"), "\(error)")
        }
    }
}
