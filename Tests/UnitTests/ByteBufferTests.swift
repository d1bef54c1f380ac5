import Buffers
import XCTest

final class ByteBufferTests: XCTestCase {
    private func contents(_ b: borrowing ByteBuffer) -> String { String(decoding: b.bytes(), as: UTF8.self) }

    private func append(_ text: String, to b: inout ByteBuffer) { Array(text.utf8).withUnsafeBytes { b.append($0) } }

    func testGrowsKeepingWhatItHolds() {
        var b = ByteBuffer(capacity: 1)  // 16 at least
        for i in 0..<100 { append("\(i % 10)", to: &b) }
        b.append(UInt8(ascii: "!"))
        XCTAssertEqual(b.count, 101)
        XCTAssertEqual(contents(b), String(repeating: "0123456789", count: 10) + "!")
        XCTAssertEqual(b[100], UInt8(ascii: "!"))
        b[0] = UInt8(ascii: "x")
        b.truncate(to: 3)
        XCTAssertEqual(contents(b), "x12")
        XCTAssertEqual(String(decoding: b.bytes(from: 1), as: UTF8.self), "12")
        b.removeAll()
        XCTAssertTrue(b.isEmpty)
    }

    /// A writer gets room for its most and is counted for what it wrote, nothing more.
    func testWritesInPlaceWithinItsRoom() {
        var b = ByteBuffer(capacity: 16)
        append("ab", to: &b)
        b.write(atMost: 100) { p in
            for i in 0..<40 { p[i] = UInt8(ascii: "c") }
            return 40
        }
        XCTAssertEqual(b.count, 42)
        XCTAssertEqual(contents(b), "ab" + String(repeating: "c", count: 40))
        b.write(atMost: 8) { _ in 0 }
        XCTAssertEqual(b.count, 42)
    }

    /// A length header that needs more or fewer digits than its room moves what follows.
    func testReplacesARangeWithMoreOrFewerBytes() {
        var b = ByteBuffer(capacity: 16)
        append("$000\r\nrecord", to: &b)
        Array("$12345".utf8).withUnsafeBytes { b.replaceSubrange(0..<4, with: $0) }
        XCTAssertEqual(contents(b), "$12345\r\nrecord")
        Array("$7".utf8).withUnsafeBytes { b.replaceSubrange(0..<6, with: $0) }
        XCTAssertEqual(contents(b), "$7\r\nrecord")
        Array("$8".utf8).withUnsafeBytes { b.replaceSubrange(0..<2, with: $0) }  // as many bytes: nothing moves
        XCTAssertEqual(contents(b), "$8\r\nrecord")
        Array("".utf8).withUnsafeBytes { b.replaceSubrange(4..<10, with: $0) }
        XCTAssertEqual(contents(b), "$8\r\n")
        // Growing past the capacity while moving the tail.
        let long = String(repeating: "z", count: 100)
        Array(long.utf8).withUnsafeBytes { b.replaceSubrange(1..<2, with: $0) }
        XCTAssertEqual(contents(b), "$" + long + "\r\n")
    }

    func testCollectsWhatABodyWritesAsAnArray() {
        XCTAssertEqual(
            ByteBuffer.array {
                append("one", to: &$0); $0.append(UInt8(ascii: "2"))
            }, Array("one2".utf8))
    }
}
