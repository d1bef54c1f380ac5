/// One HTTP/1.1 request, read whole (the server caps its size before it gets here).
public struct HTTPRequest: Sendable {
    public let method: String
    /// The path and query as sent.
    public let target: String
    /// The path, percent-decoded, without the query.
    public let path: String
    public let query: [String: String]
    /// Header names in lower case, in the order sent.
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    /// The peer's address, for logs.
    public let peer: String

    public init(method: String, target: String, headers: [(name: String, value: String)], body: [UInt8], peer: String = "") {
        self.method = method
        self.target = target
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        path = FormDecoding.decode(parts[0], plusIsSpace: false)
        query = parts.count > 1 ? FormDecoding.fields(parts[1]) : [:]
        self.headers = headers
        self.body = body
        self.peer = peer
    }

    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The same request, from `peer`.
    func from(_ peer: String) -> HTTPRequest { HTTPRequest(method: method, target: target, headers: headers, body: body, peer: peer) }

    /// A query parameter that was given a value (an empty one counts as not given).
    public func parameter(_ name: String) -> String? { query[name].flatMap { $0.isEmpty ? nil : $0 } }

    /// The body's fields, for a form POST (application/x-www-form-urlencoded, or no type at all,
    /// as a script's bare `-d` may send); empty otherwise.
    public var form: [String: String] {
        let type = header("content-type")?.lowercased()
        guard type == nil || type!.hasPrefix("application/x-www-form-urlencoded") else { return [:] }
        return FormDecoding.fields(Substring(String(decoding: body, as: UTF8.self)))
    }

    /// The cookie named `name`, if the request carries it.
    public func cookie(_ name: String) -> String? {
        for header in headers where header.name == "cookie" {
            for pair in header.value.split(separator: ";") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                if kv.count == 2, kv[0].trimmingSpaces == name { return String(kv[1].trimmingSpaces) }
            }
        }
        return nil
    }
}

/// What the server writes back; it adds Content-Length and Connection: close.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// An answer to HEAD: the head as GET's, without the body.
    public var omitsBody = false

    public init(status: Int, type: String, body: [UInt8], headers: [(name: String, value: String)] = []) {
        self.status = status
        self.headers = [("Content-Type", type)] + headers
        self.body = body
    }

    public init(status: Int, text: String) {
        self.init(status: status, type: "text/plain; charset=utf-8", body: Array((text + "\n").utf8))
    }

    public static func redirect(_ location: String, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(
            status: 303, type: "text/plain; charset=utf-8", body: Array("see \(location)\n".utf8), headers: [("Location", location)] + headers)
    }

    static let reasons: [Int: String] = [
        200: "OK", 204: "No Content", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
        405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 411: "Length Required", 413: "Content Too Large",
        422: "Unprocessable Content", 431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
        502: "Bad Gateway", 503: "Service Unavailable", 505: "HTTP Version Not Supported",
    ]

    /// Whether a header's name or value may be written: no CR, LF, NUL or other control
    /// character (a tab inside a value aside), which would end the header and start one of the
    /// sender's (issue 45, item 1: a sign-in link's `next` put a header of its own into a redirect).
    static func isSafe(_ text: String) -> Bool {
        !text.utf8.contains { $0 == 0x7F || ($0 < 0x20 && $0 != 0x09) }
    }

    /// The status line, headers and body as sent. Every header is checked here, in one place:
    /// a response with an unsafe one is never written; a 500 goes instead.
    var bytes: [UInt8] {
        guard headers.allSatisfy({ Self.isSafe($0.name) && Self.isSafe($0.value) }) else {
            return HTTPResponse(status: 500, text: "the answer had a header value with a control character, and was not sent").bytes
        }
        var head = "HTTP/1.1 \(status) \(Self.reasons[status] ?? "Unknown")\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + (omitsBody ? [] : body)
    }
}

/// Percent-decoding of paths, queries and form bodies.
public enum FormDecoding {
    public static func fields(_ text: Substring) -> [String: String] {
        var out: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = decode(kv[0], plusIsSpace: true)
            if out[name] == nil { out[name] = kv.count > 1 ? decode(kv[1], plusIsSpace: true) : "" }
        }
        return out
    }

    /// `%41` → `A`; a malformed escape stays as it is; bytes that are not UTF-8 become U+FFFD.
    public static func decode(_ text: Substring, plusIsSpace: Bool) -> String {
        var bytes: [UInt8] = []
        var i = text.utf8.startIndex
        let utf8 = text.utf8
        while i < utf8.endIndex {
            let c = utf8[i]
            if c == UInt8(ascii: "%"), let h = utf8.index(i, offsetBy: 2, limitedBy: utf8.endIndex), h < utf8.endIndex,
                let hi = hex(utf8[utf8.index(after: i)]), let lo = hex(utf8[h])
            {
                bytes.append(hi << 4 | lo)
                i = utf8.index(after: h)
                continue
            }
            bytes.append(plusIsSpace && c == UInt8(ascii: "+") ? UInt8(ascii: " ") : c)
            i = utf8.index(after: i)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Percent-encodes everything but unreserved characters, for links and query strings.
    public static func encode(_ text: String) -> String {
        var out = ""
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                let digits = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [digits[Int(b >> 4)], digits[Int(b & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    /// `name=value&...` with each part encoded, in the order given; empty values are left out.
    public static func query(_ pairs: [(String, String?)]) -> String {
        pairs.compactMap { name, value in value.flatMap { $0.isEmpty ? nil : "\(encode(name))=\(encode($0))" } }.joined(separator: "&")
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
