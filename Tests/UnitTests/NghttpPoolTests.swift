import CNghttp2
import XCTest

/// The block pool nghttp2 sessions allocate from (CNghttp2/shim.h).
final class NghttpPoolTests: XCTestCase {
    func testBlocksAreReusedPerClassAndKeepTheirBytesThroughRealloc() {
        var pool = apnsw_pool()
        withUnsafeMutablePointer(to: &pool) { p in
            let a = apnsw_pool_malloc(100, p)!
            XCTAssertEqual(Int(bitPattern: a) % 16, 0, "16-byte aligned")
            memset(a, 0xAB, 100)
            apnsw_pool_free(a, p)
            let b = apnsw_pool_malloc(120, p)!
            XCTAssertEqual(a, b, "a freed block of the same class is reused")
            let c = apnsw_pool_malloc(100, p)!
            XCTAssertNotEqual(b, c)

            // Growing within the class keeps the block; past it, the bytes move to a larger one.
            memset(c, 0x5A, 100)
            XCTAssertEqual(apnsw_pool_realloc(c, 128, p), c)
            let d = apnsw_pool_realloc(c, 3000, p)!
            XCTAssertNotEqual(d, c)
            XCTAssertTrue(UnsafeRawBufferPointer(start: d, count: 100).allSatisfy { $0 == 0x5A })
            let reused = apnsw_pool_malloc(100, p)
            XCTAssertEqual(reused, c, "the smaller block went back to its class")

            let z = apnsw_pool_calloc(10, 50, p)!
            XCTAssertTrue(UnsafeRawBufferPointer(start: z, count: 500).allSatisfy { $0 == 0 })
            XCTAssertNil(apnsw_pool_calloc(Int.max, 4, p), "overflowing sizes are refused")

            for block in [b, d, z, reused] { apnsw_pool_free(block, p) }

            // A burst returns to malloc beyond the blocks a class keeps.
            let burst = (0..<(Int(APNSW_POOL_KEEP) + 10)).map { _ in apnsw_pool_malloc(40, p)! }
            for block in burst { apnsw_pool_free(block, p) }
            XCTAssertEqual(withUnsafeBytes(of: &p.pointee.free_count) { $0.load(as: Int32.self) }, APNSW_POOL_KEEP)
            apnsw_pool_free(nil, p)
            apnsw_pool_drain(p)
            for c in 0..<Int(APNSW_POOL_CLASSES) {
                XCTAssertNil(withUnsafeBytes(of: &p.pointee.free_list) { $0.load(fromByteOffset: c * 8, as: UnsafeMutableRawPointer?.self) })
            }
        }
    }
}
