import Buffers

/// Writes JSON through a pointer, into room reserved beforehand for the largest size the value
/// can take. Outcome records and envelopes are written this way: each piece is a copy, where a
/// `JSONWriter` pays an array append per piece.
public struct JSONCursor: ~Copyable {
    @usableFromInline var p: UnsafeMutablePointer<UInt8>
    /// The end of the room: every write is checked against it (a compare, which costs next to
    /// nothing beside the copy; running past it would corrupt memory).
    @usableFromInline let end: UnsafeMutablePointer<UInt8>
    @usableFromInline var needsComma = false

    /// Room that `string` may need for a value of `utf8Count` bytes: each byte may take six
    /// (`\u00XX`), plus the quotes.
    @inlinable
    public static func room(forString utf8Count: Int) -> Int { 6 * utf8Count + 2 }
    @inlinable
    public static func room(for value: String?) -> Int { value.map { room(forString: $0.utf8.count) } ?? 0 }

    /// Appends to `out` what `body` writes, in at most `maxCount` bytes, written in place.
    @inlinable
    public static func append(to out: inout ByteBuffer, maxCount: Int, _ body: (inout JSONCursor) -> Void) {
        out.write(atMost: maxCount) { start in
            var cursor = JSONCursor(p: start, end: start + maxCount)
            body(&cursor)
            return cursor.p - start
        }
    }

    /// The same, for an array (values written off the hot path: shared fields, tests).
    public static func append(to out: inout [UInt8], maxCount: Int, _ body: (inout JSONCursor) -> Void) {
        var buffer = ByteBuffer(capacity: maxCount)
        append(to: &buffer, maxCount: maxCount, body)
        out.append(contentsOf: buffer.bytes())
    }

    @inlinable init(p: UnsafeMutablePointer<UInt8>, end: UnsafeMutablePointer<UInt8>) {
        self.p = p
        self.end = end
    }

    @inlinable
    public mutating func beginObject() { separate(); put(UInt8(ascii: "{")); needsComma = false }
    @inlinable
    public mutating func endObject() { put(UInt8(ascii: "}")); needsComma = true }
    @inlinable
    public mutating func beginArray() { separate(); put(UInt8(ascii: "[")); needsComma = false }
    @inlinable
    public mutating func endArray() { put(UInt8(ascii: "]")); needsComma = true }

    /// A key written in the source: copied with no escape check.
    @inlinable
    public mutating func key(literal name: StaticString) {
        separate()
        put(UInt8(ascii: "\""))
        copy(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        put(UInt8(ascii: "\""))
        put(UInt8(ascii: ":"))
        needsComma = false
    }

    @inlinable
    public mutating func string(utf8 value: UnsafeBufferPointer<UInt8>) {
        separate()
        precondition(p + JSONCursor.room(forString: value.count) <= end, "a JSON value overran the room reserved for it")
        p += JSONWriter.writeEscaped(value, to: p)
        needsComma = true
    }

    @inlinable
    public mutating func string(_ value: String) { value.withUTF8Bytes { string(utf8: $0) } }

    /// Bytes that need no escaping by construction (a device token's hex digits): copied
    /// between quotes, with room for exactly that.
    @inlinable
    public mutating func string(plain value: UnsafeBufferPointer<UInt8>) {
        separate()
        put(UInt8(ascii: "\""))
        copy(UnsafeRawBufferPointer(value))
        put(UInt8(ascii: "\""))
        needsComma = true
    }

    @inlinable
    public mutating func int(_ value: Int64) {
        separate()
        JSONWriter.withDecimal(value) { copy(UnsafeRawBufferPointer($0)) }
        needsComma = true
    }

    /// An integer as a string of its digits (a handle).
    @inlinable
    public mutating func quoted(_ value: Int64) {
        separate()
        put(UInt8(ascii: "\""))
        JSONWriter.withDecimal(value) { copy(UnsafeRawBufferPointer($0)) }
        put(UInt8(ascii: "\""))
        needsComma = true
    }

    /// Bytes that are already valid JSON.
    @inlinable
    public mutating func raw(_ json: UnsafeBufferPointer<UInt8>) {
        separate()
        copy(UnsafeRawBufferPointer(json))
        needsComma = true
    }

    @inlinable
    public mutating func field(literal name: StaticString, _ value: String) { key(literal: name); string(value) }
    /// A value written in the source, like a key: copied with no escape check.
    @inlinable
    public mutating func field(literal name: StaticString, literal value: StaticString) {
        key(literal: name)
        string(plain: UnsafeBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
    }
    @inlinable
    public mutating func field(literal name: StaticString, _ value: Int) { key(literal: name); int(Int64(value)) }
    @inlinable
    public mutating func field(literal name: StaticString, _ value: Int64) { key(literal: name); int(value) }
    @inlinable
    public mutating func fieldIfPresent(literal name: StaticString, _ value: String?) { if let value { field(literal: name, value) } }
    @inlinable
    public mutating func fieldIfPresent(literal name: StaticString, _ value: Int64?) { if let value { field(literal: name, value) } }

    @inlinable mutating func separate() { if needsComma { put(UInt8(ascii: ",")) } }

    @inlinable mutating func put(_ b: UInt8) {
        precondition(p < end, "a JSON value overran the room reserved for it")
        p.pointee = b
        p += 1
    }

    @inlinable mutating func copy(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress else { return }
        precondition(p + bytes.count <= end, "a JSON value overran the room reserved for it")
        UnsafeMutableRawPointer(p).copyMemory(from: base, byteCount: bytes.count)
        p += bytes.count
    }
}
