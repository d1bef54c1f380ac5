import Buffers

/// A strict one-pass JSON reader over raw bytes (RFC 8259).
///
/// It validates without building a tree, so a payload can be checked once and sent as the
/// original bytes, and a job envelope can be read field by field without Foundation.
public struct JSONScanner: ~Copyable {
    public let bytes: UnsafeBufferPointer<UInt8>
    public private(set) var index: Int = 0
    private let maxDepth: Int

    /// `maxDepth`: how deep values may nest, at most 64 (`skipValues` keeps a bit per level).
    public init(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = 64) {
        self.bytes = bytes
        self.maxDepth = min(maxDepth, 64)
    }

    public var isAtEnd: Bool { index >= bytes.count }

    @inline(__always)
    public mutating func skipWhitespace() {
        // Jobs as producers write them have no whitespace: one test, not the loop's four.
        if index < bytes.count, bytes[index] > 0x20 { return }
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    public func fail(_ message: String) -> JSONSyntaxError { JSONSyntaxError(offset: index, message: message) }

    @inline(__always)
    public mutating func peek() throws(JSONSyntaxError) -> UInt8 {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        return bytes[index]
    }

    public mutating func expect(_ byte: UInt8) throws(JSONSyntaxError) {
        guard try peek() == byte else { throw fail("expected '\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    /// Consumes `byte` if it is next (after whitespace).
    public mutating func consume(_ byte: UInt8) throws(JSONSyntaxError) -> Bool {
        if try peek() == byte { index += 1; return true }
        return false
    }

    /// Walks the members of the object at the scanner; `body` gets each key and must consume
    /// the value (read it or `skipValue()`).
    public mutating func forEachMember(_ body: (String, inout JSONScanner) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
        try expect(UInt8(ascii: "{"))
        if try consume(UInt8(ascii: "}")) { return }
        repeat {
            let key = try readString()
            try expect(UInt8(ascii: ":"))
            try body(key, &self)
        } while try consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
    }

    /// `forEachMember`, with each key lent as its decoded UTF-8: in place when it has no
    /// escapes (every key of an ordinary job), so that matching a key builds no String.
    public mutating func forEachMember(lendingKeys body: (UnsafeBufferPointer<UInt8>, inout JSONScanner) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
        try expect(UInt8(ascii: "{"))
        if try consume(UInt8(ascii: "}")) { return }
        repeat {
            let key = try readPlainOrDecoded()
            try expect(UInt8(ascii: ":"))
            switch key {
            case .plain(let range):
                try body(UnsafeBufferPointer(rebasing: bytes[range]), &self)
            case .decoded(let text):
                var failure: JSONSyntaxError?
                text.withUTF8Bytes { key in
                    do throws(JSONSyntaxError) { try body(key, &self) } catch { failure = error }
                }
                if let failure { throw failure }
            }
        } while try consume(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
    }

    /// Requires that only whitespace remains.
    public mutating func expectEnd() throws(JSONSyntaxError) {
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected data after the JSON value") }
    }

    /// Validates one value of any kind and returns its kind and byte range.
    @discardableResult
    public mutating func skipValue() throws(JSONSyntaxError) -> (kind: JSONKind, range: Range<Int>) {
        let first = try peek()
        let start = index
        let kind: JSONKind
        switch first {
        case UInt8(ascii: "{"): kind = .object
        case UInt8(ascii: "["): kind = .array
        case UInt8(ascii: "\""): kind = .string
        case UInt8(ascii: "t"), UInt8(ascii: "f"): kind = .bool
        case UInt8(ascii: "n"): kind = .null
        default: kind = .number
        }
        try skipValues(from: first)
        return (kind, start..<index)
    }

    /// Validates the value that starts with `first` at the scanner, with everything nested in
    /// it, in one loop: the containers open are kept as bits (1 for an object), not as calls.
    /// A call per value, with its kind and range returned, cost more than the value's bytes.
    private mutating func skipValues(from first: UInt8) throws(JSONSyntaxError) {
        var objects: UInt64 = 0 // bit 0: the innermost open container
        var open = 0
        var b = first
        while true {
            // `b` starts a value, at `index`.
            guard open < maxDepth else { throw fail("nesting deeper than \(maxDepth)") }
            if b == UInt8(ascii: "{") || b == UInt8(ascii: "[") {
                let isObject = b == UInt8(ascii: "{")
                objects = objects << 1 | (isObject ? 1 : 0)
                open += 1
                index += 1
                b = try peek()
                if b != (isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) {
                    if isObject { b = try skipKey(b) }
                    continue
                }
                index += 1
                objects >>= 1
                open -= 1
            } else {
                try skipScalar(b)
            }
            // After a value: a comma and the next value, or the ends of containers.
            while true {
                if open == 0 { return }
                b = try peek()
                let inObject = objects & 1 == 1
                if b == UInt8(ascii: ",") {
                    index += 1
                    b = try peek()
                    if inObject { b = try skipKey(b) }
                    break
                }
                guard b == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else {
                    throw fail(inObject ? "expected ',' or '}'" : "expected ',' or ']'")
                }
                index += 1
                objects >>= 1
                open -= 1
            }
        }
    }

    /// A member's key and its colon, `b` being the key's first byte; returns the first byte of
    /// the value.
    @inline(__always)
    private mutating func skipKey(_ b: UInt8) throws(JSONSyntaxError) -> UInt8 {
        guard b == UInt8(ascii: "\"") else { throw fail("expected a string key") }
        try skipString(atQuote: ())
        // As producers write JSON: the colon, then the value, with no space between.
        if index + 1 < bytes.count, bytes[index] == UInt8(ascii: ":"), bytes[index + 1] > 0x20 {
            index += 1
            return bytes[index]
        }
        try expect(UInt8(ascii: ":"))
        return try peek()
    }

    /// A string, number, `true`, `false` or `null` starting with `b`.
    private mutating func skipScalar(_ b: UInt8) throws(JSONSyntaxError) {
        switch b {
        case UInt8(ascii: "\""): try skipString(atQuote: ())
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: _ = try scanNumber()
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let n = word.utf8CodeUnitCount
        guard index + n <= bytes.count else { throw fail("unexpected end of input") }
        let p = word.utf8Start
        for i in 0..<n where bytes[index + i] != p[i] { throw fail("invalid literal") }
        index += n
    }

    /// Validates a number and returns its byte range; `isInteger` is false for fractions and exponents.
    public mutating func scanNumber() throws(JSONSyntaxError) -> (range: Range<Int>, isInteger: Bool) {
        skipWhitespace()
        let start = index
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid value") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return (start..<index, isInteger)
    }

    /// Reads an integer value; fractions, exponents and overflow are errors.
    public mutating func readInt() throws(JSONSyntaxError) -> Int64 {
        let (range, isInteger) = try scanNumber()
        guard isInteger else { throw JSONSyntaxError(offset: range.lowerBound, message: "expected an integer") }
        // The magnitude, so that Int64.min (one more than Int64.max) reads too.
        var magnitude: UInt64 = 0
        var i = range.lowerBound
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        while i < range.upperBound {
            let (m, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(bytes[i] &- 0x30))
            guard !o1, !o2 else { throw JSONSyntaxError(offset: range.lowerBound, message: "integer out of range") }
            magnitude = s
            i += 1
        }
        if negative, magnitude <= Int64.min.magnitude { return Int64(truncatingIfNeeded: 0 &- magnitude) }
        guard !negative, let value = Int64(exactly: magnitude) else {
            throw JSONSyntaxError(offset: range.lowerBound, message: "integer out of range")
        }
        return value
    }

    /// Validates a string (escapes, no raw control characters, valid UTF-8) without decoding it.
    /// Plain ASCII up to the closing quote (nearly every string) is passed in place.
    public mutating func skipString() throws(JSONSyntaxError) {
        guard try peek() == UInt8(ascii: "\"") else { throw fail("expected a string") }
        try skipString(atQuote: ())
    }

    /// `skipString` with the scanner at the opening quote, as the value loop knows it is.
    @inline(__always)
    private mutating func skipString(atQuote: Void) throws(JSONSyntaxError) {
        if let end = plainEnd(from: index + 1) {
            index = end + 1
            return
        }
        _ = try scanString(decode: false)
    }

    /// Reads and decodes a string.
    public mutating func readString() throws(JSONSyntaxError) -> String {
        try scanString(decode: true)!
    }

    /// Reads a string and lends its decoded UTF-8 to `body`: the bytes in place when the string
    /// has no escapes (no String is built), a decoded copy otherwise.
    public mutating func readString<R>(lending body: (UnsafeBufferPointer<UInt8>) -> R) throws(JSONSyntaxError) -> R {
        switch try readPlainOrDecoded() {
        case .plain(let range): return body(UnsafeBufferPointer(rebasing: bytes[range]))
        case .decoded(let text): return text.withUTF8Bytes(body)
        }
    }

    /// A string as read: in place when it is plain ASCII with no escapes (its content's bytes
    /// are then the same in JSON and decoded), decoded otherwise.
    public enum ScannedString: Sendable, Equatable {
        /// The range of its content.
        case plain(Range<Int>)
        case decoded(String)
    }

    public mutating func readPlainOrDecoded() throws(JSONSyntaxError) -> ScannedString {
        guard try peek() == UInt8(ascii: "\"") else { throw fail("expected a string") }
        // Plain ASCII up to the closing quote (a token, an id, a key) needs no other look.
        if let end = plainEnd(from: index + 1) {
            let content = (index + 1)..<end
            index = end + 1
            return .plain(content)
        }
        // Escapes or multi-byte characters: read the long way.
        return .decoded(try readString())
    }

    /// The index of the closing quote of a string whose content, from `i` on, is plain ASCII
    /// (no escape, no control character); nil for any other string.
    @inline(__always)
    private func plainEnd(from i: Int) -> Int? {
        var end = plainRunEnd(from: i)
        while end < bytes.count, ByteWord.isPlainJSON(bytes[end]) {
            end += 1
        }
        return end < bytes.count && bytes[end] == UInt8(ascii: "\"") ? end : nil
    }

    /// The first index from `i` on whose byte is not plain string content (a control
    /// character, `"`, `\` or non-ASCII), passing runs of plain ASCII (most of every job) eight
    /// bytes at a time. It stops before the last seven bytes, which callers check one by one.
    private func plainRunEnd(from i: Int) -> Int {
        guard let base = bytes.baseAddress else { return i }
        var i = i
        while i + 8 <= bytes.count {
            if let offset = ByteWord.firstSpecialOrNonASCII(ByteWord.load(base + i)) { return i + offset }
            i += 8
        }
        return i
    }

    private mutating func scanString(decode: Bool) throws(JSONSyntaxError) -> String? {
        guard try peek() == UInt8(ascii: "\"") else { throw fail("expected a string") }
        index += 1
        let contentStart = index
        var decoded: [UInt8]? = nil
        while true {
            if decoded == nil { index = plainRunEnd(from: index) }
            guard index < bytes.count else { throw fail("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let end = index
                index += 1
                guard decode else { return nil }
                if let out = decoded { return String(decoding: out, as: UTF8.self) }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[contentStart..<end]), as: UTF8.self)
            }
            if b == UInt8(ascii: "\\") {
                if decode, decoded == nil { decoded = Array(bytes[contentStart..<index]) }
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded?.append(e)
                case UInt8(ascii: "b"): decoded?.append(0x08)
                case UInt8(ascii: "f"): decoded?.append(0x0C)
                case UInt8(ascii: "n"): decoded?.append(0x0A)
                case UInt8(ascii: "r"): decoded?.append(0x0D)
                case UInt8(ascii: "t"): decoded?.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("unpaired surrogate")
                    }
                    if decoded != nil { decoded!.append(contentsOf: String(Unicode.Scalar(scalar)!).utf8) }
                default: throw fail("invalid escape")
                }
                continue
            }
            if b < 0x20 { throw fail("control character in string") }
            if b < 0x80 {
                decoded?.append(b)
                index += 1
            } else {
                let n = try utf8SequenceLength(at: index)
                decoded?.append(contentsOf: bytes[index..<index + n])
                index += n
            }
        }
    }

    private mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let d = hexValue(bytes[index]) else { throw fail("invalid \\u escape") }
            v = v << 4 | UInt32(d)
            index += 1
        }
        return v
    }

    /// Length of the well-formed UTF-8 sequence at `i`, or an error (overlongs and surrogates too).
    private func utf8SequenceLength(at i: Int) throws(JSONSyntaxError) -> Int {
        let b0 = bytes[i]
        let n: Int
        var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: n = 2
        case 0xE0: n = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE, 0xEF: n = 3
        case 0xED: n = 3; hi = 0x9F
        case 0xF0: n = 4; lo = 0x90
        case 0xF1...0xF3: n = 4
        case 0xF4: n = 4; hi = 0x8F
        default: throw JSONSyntaxError(offset: i, message: "invalid UTF-8")
        }
        guard i + n <= bytes.count else { throw JSONSyntaxError(offset: i, message: "invalid UTF-8") }
        let b1 = bytes[i + 1]
        guard b1 >= lo, b1 <= hi else { throw JSONSyntaxError(offset: i, message: "invalid UTF-8") }
        for k in 2..<max(n, 2) where bytes[i + k] & 0xC0 != 0x80 {
            throw JSONSyntaxError(offset: i, message: "invalid UTF-8")
        }
        return n
    }
}

@inline(__always) func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }

@inline(__always) func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case 0x30...0x39: return b - 0x30
    case 0x41...0x46: return b - 0x41 + 10
    case 0x61...0x66: return b - 0x61 + 10
    default: return nil
    }
}

public enum JSONKind: String, Sendable {
    case object, array, string, number, bool, null
}

public struct JSONSyntaxError: Error, Equatable, CustomStringConvertible, Sendable {
    public let offset: Int
    public let message: String
    public var description: String { "\(message) at byte \(offset)" }
}

extension JSONScanner {
    /// Validates that `bytes` hold exactly one JSON object.
    public static func validateObject(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) {
        var scanner = JSONScanner(bytes)
        guard try scanner.peek() == UInt8(ascii: "{") else { throw scanner.fail("expected a JSON object") }
        try scanner.skipValue()
        try scanner.expectEnd()
    }
}
