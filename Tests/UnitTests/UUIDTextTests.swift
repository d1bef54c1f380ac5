import APNSCore
import XCTest

final class UUIDTextTests: XCTestCase {
    /// Draws a fixed sequence.
    private struct Fixed: RandomNumberGenerator {
        var values: [UInt64]
        mutating func next() -> UInt64 { values.removeFirst() }
    }

    /// The two draws' hex digits in order, most significant first, with the version digit and
    /// the variant digit (from the second draw's top two bits) set; lowercase.
    func testARandomIDIsAVersion4UUIDOfItsTwoDraws() {
        var fixed = Fixed(values: [0x0011_2233_4455_6677, 0x8899_AABB_CCDD_EEFF])
        XCTAssertEqual(UUIDText.random(using: &fixed), "00112233-4455-4677-a899-aabbccddeeff")
        var again = Fixed(values: [0x0011_2233_4455_6677, 0x8899_AABB_CCDD_EEFF])
        let id = UUIDText.randomID(using: &again)
        XCTAssertEqual(id.description, "00112233-4455-4677-a899-aabbccddeeff")
        XCTAssertTrue(id.isPlainJSON, "kept inline")
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
