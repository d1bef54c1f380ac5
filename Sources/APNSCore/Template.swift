/// A payload template: an APNs payload in JSON whose strings may hold `{{name}}` placeholders.
///
/// A string that is exactly `"{{name}}"` takes the data value as is (any JSON type); a
/// placeholder inside a longer string takes the value's text, JSON-escaped. Compiled once,
/// filled per job without parsing the template again.
public struct Template: Sendable {
    enum Segment: Sendable {
        case literal([UInt8])
        case value(String)
        case inString(String)
    }

    let segments: [Segment]
    /// Every placeholder name, in order of first use.
    public let placeholders: [String]

    public init(_ source: [UInt8]) throws(JobRejection) {
        do {
            try source.withUnsafeBufferPointer { (b) throws(JSONSyntaxError) in try JSONScanner.validateObject(b) }
        } catch {
            throw JobRejection(JobRejection.malformedJSON, "the template is not a JSON object: \(error)")
        }
        var segments: [Segment] = []
        var names: [String] = []
        var literalStart = 0
        var i = 0
        func flush(_ end: Int) {
            if end > literalStart { segments.append(.literal(Array(source[literalStart..<end]))) }
        }
        while i < source.count {
            guard source[i] == UInt8(ascii: "\"") else { i += 1; continue }
            var j = i + 1
            while source[j] != UInt8(ascii: "\"") { j += source[j] == UInt8(ascii: "\\") ? 2 : 1 }
            let parts = Template.split(source, (i + 1)..<j)
            if parts.count == 1, case .inString(let name) = parts[0] {
                flush(i)
                segments.append(.value(name))
                literalStart = j + 1
            } else if parts.contains(where: { if case .inString = $0 { return true } else { return false } }) {
                flush(i + 1)
                segments.append(contentsOf: parts)
                literalStart = j
            }
            for case .inString(let name) in parts where !names.contains(name) { names.append(name) }
            i = j + 1
        }
        flush(source.count)
        self.segments = segments
        placeholders = names
    }

    /// Splits string content into literal text and `{{name}}` placeholders.
    private static func split(_ s: [UInt8], _ range: Range<Int>) -> [Segment] {
        var out: [Segment] = []
        var start = range.lowerBound
        var k = range.lowerBound
        while k + 1 < range.upperBound {
            guard s[k] == UInt8(ascii: "{"), s[k + 1] == UInt8(ascii: "{") else { k += 1; continue }
            var end = k + 2
            while end + 1 < range.upperBound, !(s[end] == UInt8(ascii: "}") && s[end + 1] == UInt8(ascii: "}")) { end += 1 }
            guard end + 1 < range.upperBound else { break }
            let name = String(decoding: s[(k + 2)..<end], as: UTF8.self).trimmingSpaces
            guard !name.isEmpty, name.utf8.allSatisfy(isNameByte) else { k += 2; continue }
            if k > start { out.append(.literal(Array(s[start..<k]))) }
            out.append(.inString(name))
            k = end + 2
            start = k
        }
        if start < range.upperBound { out.append(.literal(Array(s[start..<range.upperBound]))) }
        return out
    }

    private static func isNameByte(_ b: UInt8) -> Bool {
        isDigit(b) || (b | 0x20 >= UInt8(ascii: "a") && b | 0x20 <= UInt8(ascii: "z")) || b == UInt8(ascii: "_")
            || b == UInt8(ascii: ".") || b == UInt8(ascii: "-")
    }

    /// Fills the placeholders from `data`. `describe` names the template in errors.
    public func fill(_ data: TemplateData, describe: String) throws(JobRejection) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        for segment in segments {
            switch segment {
            case .literal(let bytes):
                out.append(contentsOf: bytes)
            case .value(let name):
                guard let v = data.values[name] else { throw missing(name, describe) }
                out.append(contentsOf: data.bytes[v.range])
            case .inString(let name):
                guard let v = data.values[name] else { throw missing(name, describe) }
                if v.kind == .string {
                    // A JSON string's inside is already escaped correctly for another string.
                    out.append(contentsOf: data.bytes[(v.range.lowerBound + 1)..<(v.range.upperBound - 1)])
                } else {
                    var quoted: [UInt8] = []
                    JSONWriter.appendEscaped(String(decoding: data.bytes[v.range], as: UTF8.self), to: &quoted)
                    out.append(contentsOf: quoted.dropFirst().dropLast())
                }
            }
        }
        return out
    }

    private func missing(_ name: String, _ describe: String) -> JobRejection {
        JobRejection(
            JobRejection.missingPlaceholder,
            "template \(describe) needs \"\(name)\", which template.data lacks (it uses: \(placeholders.joined(separator: ", ")))")
    }
}

/// A job's `template.data`: each top-level value's kind and byte range, unparsed.
public struct TemplateData {
    let bytes: UnsafeBufferPointer<UInt8>
    var values: [String: (kind: JSONKind, range: Range<Int>)] = [:]

    /// Reads the object at `range` of `bytes` (which must outlive this value).
    init(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>?) throws(JobRejection) {
        self.bytes = bytes
        guard let range else { return }
        var s = JSONScanner(UnsafeBufferPointer(rebasing: bytes[range]))
        let base = range.lowerBound
        var found: [String: (kind: JSONKind, range: Range<Int>)] = [:]
        do {
            try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                let (kind, r) = try s.skipValue()
                found[key] = (kind, (r.lowerBound + base)..<(r.upperBound + base))
            }
        } catch {
            throw JobRejection(JobRejection.malformedJSON, "template.data: \(error)")
        }
        values = found
    }
}

extension String {
    var trimmingSpaces: String {
        String(decoding: utf8.drop(while: { $0 == 0x20 }).reversed().drop(while: { $0 == 0x20 }).reversed(), as: UTF8.self)
    }
}

/// Templates by key: `name` or `name.locale` (for example `welcome.pt-BR`).
public struct TemplateLibrary: Sendable {
    public private(set) var templates: [String: Template] = [:]
    /// The source of each template, so that reloading skips unchanged ones.
    private var sources: [String: [UInt8]] = [:]

    public init() {}

    /// Adds or replaces a template; unchanged sources are not compiled again.
    public mutating func set(_ key: String, source: [UInt8]) throws(JobRejection) {
        if sources[key] == source { return }
        templates[key] = try Template(source)
        sources[key] = source
    }

    public mutating func remove(_ key: String) {
        templates[key] = nil
        sources[key] = nil
    }

    public var keys: [String] { Array(templates.keys) }

    /// The most specific template for the locale: pt-BR, then pt, then the default.
    public func lookup(name: String, locale: String?) -> (key: String, template: Template)? {
        for key in TemplateLibrary.candidates(name: name, locale: locale) {
            if let t = templates[key] { return (key, t) }
        }
        return nil
    }

    public static func candidates(name: String, locale: String?) -> [String] {
        guard let locale, !locale.isEmpty else { return [name] }
        let normalized = locale.replacingUnderscores
        var out = [name + "." + normalized]
        var parts = normalized.split(separator: "-")
        while parts.count > 1 {
            parts.removeLast()
            out.append(name + "." + parts.joined(separator: "-"))
        }
        out.append(name)
        return out
    }
}

extension String {
    var replacingUnderscores: String { String(decoding: utf8.map { $0 == UInt8(ascii: "_") ? UInt8(ascii: "-") : $0 }, as: UTF8.self) }
}
