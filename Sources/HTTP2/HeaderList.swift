import Buffers
internal import CNghttp2

/// Header fields for one HTTP/2 request or response, kept in one contiguous buffer so that
/// building a request allocates nothing once the list has grown to size. Reuse it with `clear()`.
/// Not copyable: it owns its buffer.
public struct HeaderList: ~Copyable {
    /// The values, end to end; names are literals and stay where the program keeps them.
    /// The first `keptEnd` bytes are kept values (`keep(_:)`), which `clear()` leaves.
    private var storage: ByteBuffer
    private var keptEnd = 0
    private var entries: [(name: StaticString, value: Range<Int>, sensitive: Bool, kept: Bool)] = []
    /// Changes whenever the kept values are forgotten, so that an encoder may remember what it
    /// did with a kept value (`HPACKEncoder`) for as long as the value stays.
    public private(set) var keptGeneration = 0

    public init() {
        storage = ByteBuffer(capacity: 1024)
        entries.reserveCapacity(12)
    }

    /// A list with the least of buffers, to swap a reused one in and out of a property.
    public init(unreserved: Void) { storage = ByteBuffer(capacity: 0) }

    /// Empties the list for the next request; kept values stay in the buffer.
    public mutating func clear() {
        storage.truncate(to: keptEnd)
        entries.removeAll(keepingCapacity: true)
    }

    /// Empties the list and forgets the kept values.
    public mutating func clearAll() {
        keptEnd = 0
        keptGeneration &+= 1
        clear()
    }

    /// A value kept in the buffer across `clear()`, added to each request by `add(_:kept:)`
    /// without copying its bytes again: for values a run of requests shares (the credential,
    /// the topic).
    public struct Kept {
        fileprivate let range: Range<Int>
    }

    /// Keeps `value`. Values are kept on an empty list (after `clear()`), before any field.
    public mutating func keep(_ value: String) -> Kept {
        precondition(storage.count == keptEnd && entries.isEmpty, "values are kept before the fields of a request")
        let start = storage.count
        append(value)
        keptEnd = storage.count
        return Kept(range: start..<keptEnd)
    }

    public mutating func add(_ name: StaticString, kept value: Kept, sensitive: Bool = false) {
        Self.check(name)
        entries.append((name, value.range, sensitive, true))
    }

    /// Adds a field. `name` must be a lowercase literal: HTTP/2 sends names in lowercase, and
    /// both sessions send it as it is, uncopied. `sensitive` fields are never put into the
    /// HPACK table: values that change per request (`:path`, `apns-id`) would evict the useful
    /// entries (apns-protocol.md §2.3).
    public mutating func add(_ name: StaticString, _ value: String, sensitive: Bool = false) {
        Self.check(name)
        let v0 = storage.count
        append(value)
        entries.append((name, v0..<storage.count, sensitive, false))
    }

    /// A value of a prefix and bytes, written one after the other.
    public mutating func add(_ name: StaticString, _ prefix: String, utf8 value: UnsafeBufferPointer<UInt8>, sensitive: Bool = false) {
        Self.check(name)
        let v0 = storage.count
        append(prefix)
        storage.append(UnsafeRawBufferPointer(value))
        entries.append((name, v0..<storage.count, sensitive, false))
    }

    /// A one-character literal may be kept as a scalar, with no bytes to point at.
    private static func check(_ name: StaticString) {
        precondition(name.hasPointerRepresentation && name.utf8CodeUnitCount > 0, "a header name is a literal of at least one byte")
    }

    /// Copies a string's bytes in one go; `append(contentsOf: s.utf8)` would go byte by byte.
    private mutating func append(_ text: String) {
        text.withUTF8Bytes { storage.append(UnsafeRawBufferPointer($0)) }
    }

    public var count: Int { entries.count }

    /// Each field in order: its name, its value's bytes (valid inside `body`), whether the value
    /// is kept across requests and whether it is sensitive.
    @inline(__always)
    func forEachField(_ body: (_ position: Int, _ name: StaticString, _ value: UnsafeBufferPointer<UInt8>, _ kept: Bool, _ sensitive: Bool) -> Void) {
        let base = storage.bytes().baseAddress!.assumingMemoryBound(to: UInt8.self)
        for i in entries.indices {
            let e = entries[i]
            body(i, e.name, UnsafeBufferPointer(start: base + e.value.lowerBound, count: e.value.count), e.kept, e.sensitive)
        }
    }

    /// The fields as nghttp2's array, for the server session's responses, built on the stack.
    func withNV<R>(_ body: (UnsafePointer<nghttp2_nv>, Int) -> R) -> R {
        // nghttp2 takes mutable pointers but only reads through them.
        let base = UnsafeMutablePointer(mutating: storage.bytes().baseAddress!.assumingMemoryBound(to: UInt8.self))
        return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: entries.count) { nva in
            for (i, e) in entries.enumerated() {
                var flags = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
                if e.sensitive { flags |= UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) }
                nva.initializeElement(
                    at: i,
                    to: nghttp2_nv(
                        name: UnsafeMutablePointer(mutating: e.name.utf8Start), value: base + e.value.lowerBound,
                        namelen: e.name.utf8CodeUnitCount, valuelen: e.value.count, flags: flags))
            }
            return body(UnsafePointer(nva.baseAddress!), entries.count)
        }
    }
}
