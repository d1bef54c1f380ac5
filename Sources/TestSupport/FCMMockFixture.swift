import APNSCore
import APNSMock
import Foundation

/// A running in-process mock FCM, with a service account whose token_uri is the mock's, for one
/// test. The port is picked first: the account's file names it.
public final class FCMMockFixture: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let files: MockCredentials.Files
    public let server: MockServer
    public let logFile: String
    public let serviceAccountFile: String
    public let account: FCMServiceAccount

    public init(projectID: String = "demo-project", configure: (inout MockConfiguration) -> Void = { _ in }) throws {
        directory = try TemporaryDirectory("apnsw-fcm")
        logFile = directory.file("fcm-log.jsonl")
        files = try MockCredentials.make(in: directory.path, logFile: logFile)
        var config = try MockConfiguration.load(path: files.mockConfigFile)
        config.fcm = MockFCMSettings(accounts: [])
        config.port = freePort()
        (serviceAccountFile, account) = try MockCredentials.addFCMAccount(in: directory.path, to: &config, port: config.port, projectID: projectID)
        configure(&config)
        server = try MockServer(configuration: config)
        server.start()
    }

    public var port: Int { server.port }

    /// The mock's request log, one parsed JSON object per request.
    public func logEntries() throws -> [[String: Any]] { try MockFixture.stopAndReadLog(server, logFile) }

    deinit {
        server.stop()
        server.waitUntilStopped()
    }
}
