import Buffers

/// Strings (RFC 8259 §7): validated in one pass, lent in place when plain, decoded otherwise.
extension JSONScanner {
    /// Validates a string (escapes, no raw control characters, valid UTF-8) without decoding it.
    /// Plain ASCII up to the closing quote (nearly every string) is passed in place.
    public mutating func skipString() throws(JSONSyntaxError) {
        guard try peek() == UInt8(ascii: "\"") else { throw fail("expected a string") }
        try skipString(atQuote: ())
    }

    /// `skipString` with the scanner at the opening quote, as the value loop knows it is.
    @inline(__always)
    mutating func skipString(atQuote: Void) throws(JSONSyntaxError) {
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
    func plainEnd(from i: Int) -> Int? {
        var end = plainRunEnd(from: i)
        while end < bytes.count, ByteWord.isPlainJSON(bytes[end]) {
            end += 1
        }
        return end < bytes.count && bytes[end] == UInt8(ascii: "\"") ? end : nil
    }

    /// The first index from `i` on whose byte is not plain string content (a control
    /// character, `"`, `\` or non-ASCII), passing runs of plain ASCII (most of every job) eight
    /// bytes at a time. It stops before the last seven bytes, which callers check one by one.
    func plainRunEnd(from i: Int) -> Int {
        guard let base = bytes.baseAddress else { return i }
        var i = i
        while i + 8 <= bytes.count {
            if let offset = ByteWord.firstSpecialOrNonASCII(ByteWord.load(base + i)) { return i + offset }
            i += 8
        }
        return i
    }

    mutating func scanString(decode: Bool) throws(JSONSyntaxError) -> String? {
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

    mutating func hex4() throws(JSONSyntaxError) -> UInt32 {
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
    func utf8SequenceLength(at i: Int) throws(JSONSyntaxError) -> Int {
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
