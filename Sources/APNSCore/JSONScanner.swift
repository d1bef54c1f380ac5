import Buffers

/// A strict one-pass JSON reader over raw bytes (RFC 8259).
///
/// It validates without building a tree, so a payload can be checked once and sent as the
/// original bytes, and a job envelope can be read field by field without Foundation.
public struct JSONScanner: ~Copyable {
    public let bytes: UnsafeBufferPointer<UInt8>
    public internal(set) var index: Int = 0
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
    public mutating func forEachMember(
        lendingKeys body: (UnsafeBufferPointer<UInt8>, inout JSONScanner) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
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
        var objects: UInt64 = 0  // bit 0: the innermost open container
        var open = 0
        var b = first
        while true {
            // `b` starts a value, at `index`.
            guard open < maxDepth else {
                throw JSONSyntaxError(offset: index, message: "values nest deeper than \(maxDepth) levels, the limit", kind: .tooDeep)
            }
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
        guard isInteger else { throw JSONSyntaxError(offset: range.lowerBound, message: "expected a whole number", kind: .notAWholeNumber) }
        // The magnitude, so that Int64.min (one more than Int64.max) reads too.
        var magnitude: UInt64 = 0
        var i = range.lowerBound
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        while i < range.upperBound {
            let (m, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(bytes[i] &- 0x30))
            guard !o1, !o2 else { throw JSONSyntaxError(offset: range.lowerBound, message: "whole number out of range", kind: .notAWholeNumber) }
            magnitude = s
            i += 1
        }
        if negative, magnitude <= Int64.min.magnitude { return Int64(truncatingIfNeeded: 0 &- magnitude) }
        guard !negative, let value = Int64(exactly: magnitude) else {
            throw JSONSyntaxError(offset: range.lowerBound, message: "whole number out of range", kind: .notAWholeNumber)
        }
        return value
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

    /// "an object", "a string", "null": for messages.
    public var withArticle: String {
        switch self {
        case .object, .array: "an \(rawValue)"
        case .null: "null"
        case .bool: "a boolean"
        default: "a \(rawValue)"
        }
    }
}

public struct JSONSyntaxError: Error, Equatable, CustomStringConvertible, Sendable {
    public let offset: Int
    public let message: String
    /// What went wrong: only `.syntax` means the bytes are not JSON.
    public var kind = Kind.syntax
    public var description: String { "\(message) at byte \(offset)" }

    public enum Kind: Sendable {
        case syntax
        /// Valid JSON, but a number where a whole one is wanted, or one out of range.
        case notAWholeNumber
        /// Valid JSON, nested deeper than the reader's limit.
        case tooDeep
    }
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
