internal import COpenSSL

/// An OpenSSL failure with the library's error queue drained into text.
public struct OpenSSLError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let details: String

    public var description: String { details.isEmpty ? "\(operation) failed" : "\(operation) failed: \(details)" }

    public init(operation: String, details: String) {
        self.operation = operation
        self.details = details
    }

    /// Drains OpenSSL's thread-local error queue. Never includes key material, only error strings.
    package static func drain(_ operation: String) -> OpenSSLError {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            parts.append(String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return OpenSSLError(operation: operation, details: parts.joined(separator: "; "))
    }

    /// Checks the usual "1 is success" convention.
    package static func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(OpenSSLError) {
        if result != 1 { throw drain(operation()) }
    }

    package static func clear() { ERR_clear_error() }
}
