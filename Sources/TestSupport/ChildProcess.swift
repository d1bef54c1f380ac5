import Foundation

/// A program started by a test, with its output going to a file the test can read.
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    public let outputFile: String

    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], outputFile: String) throws {
        self.outputFile = outputFile
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        _ = FileManager.default.createFile(atPath: outputFile, contents: nil)  // the open below reports a failure
        let handle = FileHandle(forWritingAtPath: outputFile)!
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public var output: String { (try? String(contentsOfFile: outputFile, encoding: .utf8)) ?? "" }

    public func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits for exit; returns the status, or nil on timeout.
    public func wait(timeout: Double) -> Int32? {
        guard waitUntil(timeout: timeout, { !process.isRunning }) else { return nil }
        return process.terminationStatus
    }

    /// CPU time (user + system) the process has used, in microseconds, from /proc.
    public var cpuMicroseconds: Int? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let u = Int(fields[11]), let s = Int(fields[12]) else { return nil }
        return (u + s) * 1_000_000 / Int(sysconf(Int32(_SC_CLK_TCK)))
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }

    /// The directory holding the executables the tests start: `APNSW_TEST_PRODUCTS` if set (the
    /// release build that ships, in `scripts/test`), else the build's own, next to the test bundle.
    public static var productsDirectory: String {
        if let dir = ProcessInfo.processInfo.environment["APNSW_TEST_PRODUCTS"], !dir.isEmpty { return dir }
        let bundle = Bundle.main.bundleURL
        // The .xctest bundle (or runner) lives in the build products directory.
        var dir = bundle.deletingLastPathComponent()
        if FileManager.default.fileExists(atPath: dir.appendingPathComponent("apns-worker").path) { return dir.path }
        for candidate in [bundle, bundle.deletingLastPathComponent().deletingLastPathComponent()] {
            dir = candidate
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("apns-worker").path) { return dir.path }
        }
        return bundle.deletingLastPathComponent().path
    }
}
