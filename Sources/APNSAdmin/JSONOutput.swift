import APNSCore

extension JSONValue {
    /// The value of Swift's own types as JSON: what `--json` output is built from. A type JSON
    /// has no form for prints as its description.
    init(any value: Any) {
        switch value {
        case let v as JSONValue: self = v
        case let s as String: self = .string(s)
        case let b as Bool: self = .bool(b)
        case let n as Int: self = .integer(Int64(n))
        case let n as Int64: self = .integer(n)
        case let n as Int32: self = .integer(Int64(n))
        case let n as UInt64: self = n <= UInt64(Int64.max) ? .integer(Int64(n)) : .number(Double(n))
        case let d as Double: self = .number(d)
        case let o as [String: Any]: self = .object(o.mapValues { JSONValue(any: $0) })
        case let a as [Any]: self = .array(a.map { JSONValue(any: $0) })
        case Optional<Any>.none: self = .null
        default: self = .string("\(value)")
        }
    }

    /// How a table or a line shows the value: a string as it is, anything else as JSON.
    public var display: String { string ?? text }
}
