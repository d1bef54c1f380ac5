extension String {
    /// The string's UTF-8 bytes, valid inside `body`. Native strings, inline (small) ones
    /// included, lend their bytes without a copy of the string; `withUTF8` on a copy retained and
    /// released it each time. Only a string that is not contiguous UTF-8 is copied first.
    @inlinable
    public func withUTF8Bytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = self
        return try copy.withUTF8(body)
    }
}
