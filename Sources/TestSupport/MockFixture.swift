import APNSMock
import Foundation

/// Credentials, a configuration and a running in-process mock APNs for one test.
public final class MockFixture: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let files: MockCredentials.Files
    public let server: MockServer
    public let logFile: String

    /// `configure` adjusts the mock's settings (faults, stream limit) before it starts.
    public init(configure: (inout MockConfiguration) -> Void = { _ in }) throws {
        directory = try TemporaryDirectory("apnsw-mock")
        logFile = directory.file("mock-log.jsonl")
        files = try MockCredentials.make(in: directory.path, logFile: logFile)
        var config = try MockConfiguration.load(path: files.mockConfigFile)
        configure(&config)
        server = try MockServer(configuration: config)
        server.start()
    }

    public var port: Int { server.port }

    /// The mock's request log, one parsed JSON object per request.
    public func logEntries() throws -> [[String: Any]] { try Self.stopAndReadLog(server, logFile) }

    /// Stops `server` and reads its request log, one parsed JSON object per request.
    static func stopAndReadLog(_ server: MockServer, _ logFile: String) throws -> [[String: Any]] {
        server.stop()
        server.waitUntilStopped()
        let text = try String(contentsOfFile: logFile, encoding: .utf8)
        return try text.split(separator: "\n").map {
            guard let o = try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] else { throw TestSupportError("bad log line") }
            return o
        }
    }

    deinit {
        server.stop()
        server.waitUntilStopped()
    }
}
