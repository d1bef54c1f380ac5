import Glibc

extension UnsafeBufferPointer<UInt8> {
    /// Whether these bytes are `literal`'s: the length, then one `memcmp`. For names read off
    /// the wire (a job's keys, response headers), with no String built.
    @inlinable
    public func equals(_ literal: StaticString) -> Bool {
        count == literal.utf8CodeUnitCount && (count == 0 || memcmp(baseAddress!, literal.utf8Start, count) == 0)
    }
}
