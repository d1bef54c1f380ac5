/// Frames waiting for `SSL_write`, in one buffer of this connection's own. An array's append
/// checked uniqueness and capacity through a generic path, about 60 instructions a call and two
/// calls per request (a HEADERS and a DATA chunk from nghttp2).
struct OutputBuffer: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    var isEmpty: Bool { count == 0 }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if capacity - count < bytes.count { grow(toHold: count + bytes.count) }
        if let source = bytes.baseAddress { (base + count).copyMemory(from: source, byteCount: bytes.count) }
        count += bytes.count
    }

    mutating func removeAll() { count = 0 }

    /// The bytes from `offset` on, valid until the next change.
    func bytes(from offset: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + offset, count: count - offset)
    }

    private mutating func grow(toHold needed: Int) {
        let larger = max(needed, 2 * capacity)
        let moved = UnsafeMutableRawPointer.allocate(byteCount: larger, alignment: 16)
        moved.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = moved
        capacity = larger
    }
}
