import APNSCore
import Glibc
import IOLoop
import Synchronization

public enum LogLevel: Int, Sendable, Comparable {
    case debug, info, warning, error

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    public var name: String { ["debug", "info", "warning", "error"][rawValue] }

    /// The level a setting names (`warn` too), nil for anything else.
    public init?(name: String) {
        switch name.lowercased() {
        case "debug": self = .debug
        case "info": self = .info
        case "warning", "warn": self = .warning
        case "error": self = .error
        default: return nil
        }
    }
}

/// Writes one JSON object per line: time, level, message, fields. Passed in, never global.
/// Callers never hand it secrets (keys, JWTs, passwords).
public final class Logger: Sendable {
    public let level: LogLevel
    private let output: Mutex<FileStream>

    public init(level: LogLevel, output: FileStream = .standardError) {
        self.level = level
        self.output = Mutex(output)
    }

    public func log(_ level: LogLevel, _ message: String, _ fields: [String: LogValue] = [:]) {
        guard level >= self.level else { return }
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        w.field("time", Logger.timestamp())
        w.field("level", level.name)
        w.field("msg", message)
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) {
            switch value {
            case .string(let s): w.field(key, s)
            case .int(let i): w.field(key, i)
            }
        }
        w.endObject()
        w.bytes.append(0x0A)
        output.withLock { $0.write(w.bytes) }
    }

    /// Logs the first of a kind (`key`) at once, then at most once per `everyMs`, with how many
    /// were left out since (`repeated`): a fault that will not fix itself is said once, not
    /// in a tight loop, whichever thread meets it.
    public func limited(_ level: LogLevel, key: String, everyMs: UInt64 = 60_000, _ m: String, _ f: [String: LogValue] = [:]) {
        let now = MonotonicClock.nowMilliseconds()
        let left: Int? = limits.withLock { all in
            var entry = all[key] ?? (lastMs: 0, left: 0, said: false)
            defer { all[key] = entry }
            guard !entry.said || now >= entry.lastMs + everyMs else {
                entry.left += 1
                return nil
            }
            defer { entry = (now, 0, true) }
            return entry.left
        }
        guard let left else { return }
        var fields = f
        if left > 0 { fields["repeated"] = .int(left) }
        log(level, m, fields)
    }
    private let limits = Mutex<[String: (lastMs: UInt64, left: Int, said: Bool)]>([:])

    public func debug(_ m: String, _ f: [String: LogValue] = [:]) { log(.debug, m, f) }
    public func info(_ m: String, _ f: [String: LogValue] = [:]) { log(.info, m, f) }
    public func warning(_ m: String, _ f: [String: LogValue] = [:]) { log(.warning, m, f) }
    public func error(_ m: String, _ f: [String: LogValue] = [:]) { log(.error, m, f) }

    static func timestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        var t = tv.tv_sec
        var parts = tm()
        gmtime_r(&t, &parts)
        // Digits written by hand: String(format:) looks up CVarArg conformances at run time.
        func digits(_ n: Int32, _ width: Int) -> String {
            let text = String(n)
            return String(repeating: "0", count: max(0, width - text.utf8.count)) + text
        }
        return digits(parts.tm_year + 1900, 4) + "-" + digits(parts.tm_mon + 1, 2) + "-" + digits(parts.tm_mday, 2) + "T"
            + digits(parts.tm_hour, 2) + ":" + digits(parts.tm_min, 2) + ":" + digits(parts.tm_sec, 2) + "."
            + digits(Int32(tv.tv_usec / 1000), 3) + "Z"
    }
}

public enum LogValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case string(String)
    case int(Int)
    public init(stringLiteral s: String) { self = .string(s) }
    public init(integerLiteral i: Int) { self = .int(i) }
}
