/// Bytes in one growable buffer of their owner's own: frames waiting for `SSL_write`, a
/// request's header values. An array's append checked uniqueness and capacity through a
/// generic path, about 60 instructions a call, and shortening one went through
/// `replaceSubrange`, about 80; a few calls of each per request.
struct ByteBuffer: ~Copyable {
    private var base: UnsafeMutableRawPointer
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 16)
        base = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    var isEmpty: Bool { count == 0 }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if capacity - count < bytes.count { grow(toHold: count + bytes.count) }
        if let source = bytes.baseAddress { (base + count).copyMemory(from: source, byteCount: bytes.count) }
        count += bytes.count
    }

    /// Keeps the first `count` bytes.
    mutating func truncate(to count: Int) {
        precondition(count >= 0 && count <= self.count, "truncating past the end")
        self.count = count
    }

    mutating func removeAll() { count = 0 }

    /// The bytes from `offset` on, valid until the next change.
    func bytes(from offset: Int = 0) -> UnsafeRawBufferPointer {
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
