import Glibc

/// A failed system call, with errno's text.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let operation: String
    public let code: Int32
    /// What went wrong, where errno's text would not say it (a name lookup's answer).
    public let reason: String?
    public var description: String { "\(operation): \(reason ?? String(cString: strerror(code)))" }

    public init(operation: String, code: Int32, reason: String? = nil) {
        self.operation = operation
        self.code = code
        self.reason = reason
    }

    public static func errno(_ operation: String) -> SystemError { SystemError(operation: operation, code: Glibc.errno) }
}
