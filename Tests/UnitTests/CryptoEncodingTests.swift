import APNSCore
import Foundation
import HTTP2TLS
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
}
