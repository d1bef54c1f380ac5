import HTTP2
import XCTest

/// Streams by id: a slot per odd id, a dictionary for an id whose slot is taken.
final class StreamTableTests: XCTestCase {
    func testIdsShareSlotsOnlyThroughTheOverflowAndEveryValueIsFound() {
        var table = StreamTable<String>(capacity: 32)  // 64 slots: ids 1 and 129 share one
        for id in stride(from: Int32(1), through: 127, by: 2) { table[id] = "s\(id)" }
        XCTAssertEqual(table.count, 64)
        table[129] = "s129"  // slot of 1, still open: overflow
        table[131] = "s131"
        XCTAssertEqual(table.count, 66)
        XCTAssertEqual(table[1], "s1")
        XCTAssertEqual(table[129], "s129")
        XCTAssertNil(table[133])
        table[129] = "s129 again"
        XCTAssertEqual(table.count, 66, "replacing a value adds nothing")
        XCTAssertEqual(table.removeValue(forKey: 1), "s1")
        XCTAssertNil(table[1])
        XCTAssertEqual(table[129], "s129 again", "still found while its slot is free")
        table[129] = "moved"
        XCTAssertEqual(table.count, 65, "met again, it takes its slot and leaves the overflow")
        XCTAssertEqual(table.removeValue(forKey: 129), "moved")
        XCTAssertNil(table.removeValue(forKey: 129))
        table[3] = nil
        XCTAssertEqual(table.count, 63)
        XCTAssertEqual(Set(table.entries.map(\.id)).count, 63)
        XCTAssertEqual(table.entries.first { $0.id == 131 }?.value, "s131")
        table.removeAll()
        XCTAssertEqual(table.count, 0)
        XCTAssertTrue(table.entries.isEmpty)
    }
}
