/// A JSON document as a tree, for what is read whole and rarely: configuration files, and the
/// records apnsctl shows. The hot path scans bytes with `JSONScanner` instead.
public indirect enum JSONValue: Sendable, Equatable {
    case object([String: JSONValue])
    case array([JSONValue])
    case string(String)
    /// A number written without fraction or exponent, that fits.
    case integer(Int64)
    case number(Double)
    case bool(Bool)
    case null

    /// Parses exactly one JSON value; a key given twice in one object is an error.
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 64) throws(JSONSyntaxError) -> JSONValue {
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { (buffer) throws(JSONSyntaxError) -> JSONValue in
            var scanner = JSONScanner(buffer, maxDepth: maxDepth)
            let value = try read(&scanner, depth: 0, maxDepth: maxDepth)
            try scanner.expectEnd()
            return value
        }
    }

    private static func read(_ s: inout JSONScanner, depth: Int, maxDepth: Int) throws(JSONSyntaxError) -> JSONValue {
        let first = try s.peek()
        switch first {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < maxDepth else {
                throw JSONSyntaxError(offset: s.index, message: "values nest deeper than \(maxDepth) levels, the limit", kind: .tooDeep)
            }
            if first == UInt8(ascii: "[") {
                s.index += 1
                var items: [JSONValue] = []
                if try s.consume(UInt8(ascii: "]")) { return .array(items) }
                repeat { items.append(try read(&s, depth: depth + 1, maxDepth: maxDepth)) } while try s.consume(UInt8(ascii: ","))
                try s.expect(UInt8(ascii: "]"))
                return .array(items)
            }
            var members: [String: JSONValue] = [:]
            try s.forEachMember { (key, inner) throws(JSONSyntaxError) in
                let at = inner.index
                let value = try read(&inner, depth: depth + 1, maxDepth: maxDepth)
                guard members.updateValue(value, forKey: key) == nil else {
                    throw JSONSyntaxError(offset: at, message: "the key \"\(key)\" is given twice")
                }
            }
            return .object(members)
        case UInt8(ascii: "\""):
            return .string(try s.readString())
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            try s.skipValue()
            return first == UInt8(ascii: "n") ? .null : .bool(first == UInt8(ascii: "t"))
        default:
            let (range, isInteger) = try s.scanNumber()
            let text = String(decoding: UnsafeBufferPointer(rebasing: s.bytes[range]), as: UTF8.self)
            if isInteger, let whole = Int64(text) { return .integer(whole) }
            return .number(Double(text) ?? .nan)
        }
    }

    /// The JSON text, with each object's keys sorted, so that equal values print alike.
    public var text: String {
        var w = JSONWriter(capacity: 128)
        write(to: &w)
        return String(decoding: w.bytes, as: UTF8.self)
    }

    public func write(to w: inout JSONWriter) {
        switch self {
        case .object(let members):
            w.beginObject()
            for key in members.keys.sorted() {
                w.key(key)
                members[key]!.write(to: &w)
            }
            w.endObject()
        case .array(let items):
            w.beginArray()
            for item in items { item.write(to: &w) }
            w.endArray()
        case .string(let s): w.string(s)
        case .integer(let n): w.int(n)
        case .number(let d): d.isFinite ? w.raw(Array("\(d)".utf8)) : w.null()
        case .bool(let b): w.bool(b)
        case .null: w.null()
        }
    }

    public var kind: JSONKind {
        switch self {
        case .object: .object
        case .array: .array
        case .string: .string
        case .integer, .number: .number
        case .bool: .bool
        case .null: .null
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var array: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var object: [String: JSONValue]? { if case .object(let o) = self { o } else { nil } }
    public var integer: Int64? { if case .integer(let n) = self { n } else { nil } }
}
