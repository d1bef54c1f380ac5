/// Bytes in one growable buffer of their owner's own: frames waiting for `SSL_write`, a
/// request's header values, a Redis transaction and the records written into it. Not an
/// array: its append and shortening go through generic paths, and it has no room that can be
/// written before it is counted.
public struct ByteBuffer: ~Copyable {
    @usableFromInline var base: UnsafeMutableRawPointer
    @usableFromInline var capacity: Int
    /// Bytes in use (`count`).
    @usableFromInline var used = 0
    @inlinable public var count: Int { used }

    @inlinable
    public init(capacity: Int) {
        self.capacity = max(capacity, 16)
        base = .allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    @inlinable public var isEmpty: Bool { count == 0 }

    @inlinable
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        reserve(bytes.count)
        if let source = bytes.baseAddress { (base + count).copyMemory(from: source, byteCount: bytes.count) }
        used += bytes.count
    }

    @inlinable
    public mutating func append(_ byte: UInt8) {
        reserve(1)
        base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        used += 1
    }

    /// Lets `body` write at most `maxCount` bytes after the end, and counts the number it
    /// returns: nothing is written twice, nor zero-filled first.
    @inlinable
    public mutating func write(atMost maxCount: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        reserve(maxCount)
        let written = body((base + count).assumingMemoryBound(to: UInt8.self))
        precondition(written >= 0 && written <= maxCount, "wrote past the room reserved")
        used += written
    }

    /// The byte at `offset`, which must be below `count`.
    @inlinable
    public subscript(offset: Int) -> UInt8 {
        get {
            precondition(offset >= 0 && offset < count, "reading past the end")
            return base.load(fromByteOffset: offset, as: UInt8.self)
        }
        set {
            precondition(offset >= 0 && offset < count, "writing past the end")
            base.storeBytes(of: newValue, toByteOffset: offset, as: UInt8.self)
        }
    }

    /// Replaces the bytes in `range` with `bytes`, moving what follows.
    public mutating func replaceSubrange(_ range: Range<Int>, with bytes: UnsafeRawBufferPointer) {
        precondition(range.lowerBound >= 0 && range.upperBound <= count, "replacing past the end")
        let delta = bytes.count - range.count
        if delta > 0 { reserve(delta) }
        if delta != 0 { (base + range.upperBound + delta).copyMemory(from: base + range.upperBound, byteCount: count - range.upperBound) }
        if let source = bytes.baseAddress { (base + range.lowerBound).copyMemory(from: source, byteCount: bytes.count) }
        used += delta
    }

    /// Keeps the first `count` bytes.
    @inlinable
    public mutating func truncate(to count: Int) {
        precondition(count >= 0 && count <= self.count, "truncating past the end")
        used = count
    }

    @inlinable public mutating func removeAll() { used = 0 }

    /// The bytes from `offset` on, valid until the next change.
    @inlinable
    public func bytes(from offset: Int = 0) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + offset, count: count - offset)
    }

    /// What `body` writes into a buffer of its own, as an array: for callers off the hot path.
    public static func array(_ body: (inout ByteBuffer) -> Void) -> [UInt8] {
        var buffer = ByteBuffer(capacity: 512)
        body(&buffer)
        return Array(buffer.bytes())
    }

    /// Room for `more` bytes after the end.
    @inlinable
    mutating func reserve(_ more: Int) {
        if capacity - count < more { grow(toHold: count + more) }
    }

    @usableFromInline
    mutating func grow(toHold needed: Int) {
        let larger = max(needed, 2 * capacity)
        let moved = UnsafeMutableRawPointer.allocate(byteCount: larger, alignment: 16)
        moved.copyMemory(from: base, byteCount: count)
        base.deallocate()
        base = moved
        capacity = larger
    }
}
