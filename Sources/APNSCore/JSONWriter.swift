import Buffers

/// Appends JSON to a byte buffer: objects of fields, escaped strings, raw embedded JSON.
///
/// Used for every record we write to Redis and for the mock's log, so escaping lives in one place.
public struct JSONWriter {
    public var bytes: [UInt8]
    private var needsComma = false

    public init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func beginObject() { separate(); bytes.append(UInt8(ascii: "{")); needsComma = false }
    public mutating func endObject() { bytes.append(UInt8(ascii: "}")); needsComma = true }
    public mutating func beginArray() { separate(); bytes.append(UInt8(ascii: "[")); needsComma = false }
    public mutating func endArray() { bytes.append(UInt8(ascii: "]")); needsComma = true }

    public mutating func key(_ name: String) {
        separate()
        JSONWriter.appendEscaped(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func string(_ value: String) { separate(); JSONWriter.appendEscaped(value, to: &bytes); needsComma = true }
    public mutating func int<I: BinaryInteger>(_ value: I) { separate(); JSONWriter.appendDecimal(value, to: &bytes); needsComma = true }
    public mutating func bool(_ value: Bool) { separate(); bytes.append(contentsOf: (value ? "true" : "false").utf8); needsComma = true }
    public mutating func null() { separate(); bytes.append(contentsOf: "null".utf8); needsComma = true }
    /// Embeds bytes that are already valid JSON (validated by `JSONScanner`).
    public mutating func raw<C: Collection>(_ json: C) where C.Element == UInt8 { separate(); bytes.append(contentsOf: json); needsComma = true }
    /// Embeds arbitrary bytes as a JSON string (invalid UTF-8 is replaced).
    public mutating func stringBytes<C: Collection>(_ value: C) where C.Element == UInt8 {
        string(String(decoding: value, as: UTF8.self))
    }

    public mutating func field(_ name: String, _ value: String) { key(name); string(value) }
    public mutating func field<I: BinaryInteger>(_ name: String, _ value: I) { key(name); int(value) }
    public mutating func field(_ name: String, _ value: Bool) { key(name); bool(value) }
    public mutating func fieldIfPresent(_ name: String, _ value: String?) { if let value { field(name, value) } }
    public mutating func fieldIfPresent<I: BinaryInteger>(_ name: String, _ value: I?) { if let value { field(name, value) } }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    public static func appendEscaped(_ s: String, to out: inout [UInt8]) {
        s.withUTF8Bytes { appendEscaped(bytes: $0, to: &out) }
    }

    public static func appendEscaped(bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        // Most strings (tokens, ids, topics) need no escaping: copy them in one go.
        if !needsEscaping(bytes) {
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: JSONCursor.room(forString: bytes.count)) { room in
            let n = writeEscaped(bytes, to: room.baseAddress!)
            out.append(contentsOf: UnsafeBufferPointer(rebasing: room[..<n]))
        }
    }

    /// Writes `bytes` as a quoted JSON string at `p`, which has room for
    /// `JSONCursor.room(forString:)` bytes. Returns how many it wrote. Plain runs are checked
    /// and copied eight bytes at a time, in one pass.
    @usableFromInline
    static func writeEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to p: UnsafeMutablePointer<UInt8>) -> Int {
        p[0] = UInt8(ascii: "\"")
        var o = 1
        guard let base = bytes.baseAddress else { p[1] = UInt8(ascii: "\""); return 2 }
        let n = bytes.count
        var i = 0
        while i + 8 <= n {
            let w = ByteWord.load(base + i)
            if ByteWord.hasJSONSpecial(w) { break }
            UnsafeMutableRawPointer(p + o).storeBytes(of: w, as: UInt64.self)
            i += 8
            o += 8
        }
        // A plain tail of one to seven bytes goes as one word too: the last eight bytes again
        // when there are that many, else the tail padded with spaces. Either store stays inside
        // the room (at least 6n + 2 bytes; n >= 2 in the padded case).
        if i < n, i + 8 > n {
            if n >= 8 {
                let w = ByteWord.load(base + n - 8)
                if !ByteWord.hasJSONSpecial(w) {
                    UnsafeMutableRawPointer(p + o - i + n - 8).storeBytes(of: w, as: UInt64.self)
                    o += n - i
                    i = n
                }
            } else if n >= 2 {
                let w = ByteWord.loadPadded(base, count: n)
                if !ByteWord.hasJSONSpecial(w) {
                    UnsafeMutableRawPointer(p + o).storeBytes(of: w, as: UInt64.self)
                    o += n
                    i = n
                }
            }
        }
        func put(_ b: UInt8) { p[o] = b; o += 1 }
        while i < bytes.count {
            let b = base[i]
            i += 1
            switch b {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"): put(UInt8(ascii: "\\")); put(b)
            case 0x0A: put(UInt8(ascii: "\\")); put(UInt8(ascii: "n"))
            case 0x0D: put(UInt8(ascii: "\\")); put(UInt8(ascii: "r"))
            case 0x09: put(UInt8(ascii: "\\")); put(UInt8(ascii: "t"))
            case 0..<0x20:
                put(UInt8(ascii: "\\")); put(UInt8(ascii: "u")); put(0x30); put(0x30)
                put(hex[Int(b >> 4)]); put(hex[Int(b & 0xF)])
            default: put(b)
            }
        }
        put(UInt8(ascii: "\""))
        return o
    }

    /// Whether any byte is a control character, `"` or `\\`; eight bytes per step, since every
    /// string of every record passes here.
    static func needsEscaping(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        var i = 0
        while i + 8 <= bytes.count {
            if ByteWord.hasJSONSpecial(ByteWord.load(base + i)) { return true }
            i += 8
        }
        while i < bytes.count {
            let b = bytes[i]
            if b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { return true }
            i += 1
        }
        return false
    }

    /// Decimal digits of `value`, without building a String.
    public static func appendDecimal<I: BinaryInteger>(_ value: I, to out: inout [UInt8]) {
        guard let v = Int64(exactly: value) else { out.append(contentsOf: String(value).utf8); return }
        withDecimal(v) { out.append(contentsOf: $0) }
    }

    /// The decimal digits of `v`, taken from the right into a stack buffer: dividing by the
    /// constant 10 is a multiplication, where dividing by a running power of ten was a hardware
    /// division per digit.
    @inlinable
    static func withDecimal<R>(_ v: Int64, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = v.magnitude
            var i = 20
            repeat {
                i -= 1
                digits[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if v < 0 { i -= 1; digits[i] = UInt8(ascii: "-") }
            return body(UnsafeBufferPointer(rebasing: digits[i..<20]))
        }
    }
}
