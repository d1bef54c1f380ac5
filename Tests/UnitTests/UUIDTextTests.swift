import APNSCore
import XCTest

final class UUIDTextTests: XCTestCase {
    /// Draws a fixed sequence.
    private struct Fixed: RandomNumberGenerator {
        var values: [UInt64]
        mutating func next() -> UInt64 { values.removeFirst() }
    }

    /// Bytes in draw order (low byte first), the version and variant bits set, lowercase hex.
    func testARandomIDIsAVersion4UUIDOfItsTwoDraws() {
        var fixed = Fixed(values: [0x0011_2233_4455_6677, 0x8899_AABB_CCDD_EEFF])
        XCTAssertEqual(UUIDText.random(using: &fixed), "77665544-3322-4100-bfee-ddccbbaa9988")
        var generator = SplitMix64()
        let ids = (0..<1000).map { _ in UUIDText.random(using: &generator) }
        XCTAssertEqual(Set(ids).count, 1000)
        for id in ids {
            XCTAssertTrue(UUIDText.isValid(id), id)
            let u = Array(id.utf8)
            XCTAssertEqual(u[14], UInt8(ascii: "4"), id)
            XCTAssertTrue("89ab".utf8.contains(u[19]), id)
            XCTAssertEqual(id, id.lowercased())
        }
    }
}
