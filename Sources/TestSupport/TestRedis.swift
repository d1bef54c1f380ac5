import Foundation
import RedisClient

/// A real redis-server for tests: the one scripts/test started (APNSW_TEST_REDIS=host:port),
/// or one started here on a free port. A test that cannot reach Redis fails; it never skips.
public final class TestRedis: @unchecked Sendable {
    public private(set) var endpoint: RedisEndpoint
    private var server: ChildProcess?
    private let directory: TemporaryDirectory
    private let persistent: Bool

    /// `dedicated` always starts a private server (for tests that stop or restart it);
    /// `persistent` turns on the append-only file so a restart keeps the data.
    private let password: String?

    /// `password` turns on `requirepass` (dedicated servers only); `unixSocket` starts a dedicated
    /// server that listens on a unix socket only, with no TCP port.
    public init(dedicated: Bool = false, persistent: Bool = false, password: String? = nil, unixSocket: Bool = false) throws {
        directory = try TemporaryDirectory("apnsw-redis")
        self.persistent = persistent
        self.password = password
        if unixSocket {
            endpoint = RedisEndpoint(socket: directory.file("redis.sock"), password: password)
            try startServer()
        } else if !dedicated, password == nil, let shared = ProcessInfo.processInfo.environment["APNSW_TEST_REDIS"] {
            let parts = shared.split(separator: ":")
            endpoint = RedisEndpoint(host: String(parts[0]), port: Int(parts.last!) ?? 6379)
        } else {
            endpoint = RedisEndpoint(host: "127.0.0.1", port: freePort(), password: password)
            try startServer()
        }
        guard waitUntil(timeout: 10, { (try? BlockingRedisConnection(endpoint, timeoutMs: 500)) != nil }) else {
            throw TestSupportError("redis-server at \(endpoint) is not reachable (is redis-server installed? run scripts/test)")
        }
    }

    private func startServer() throws {
        let binary = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else { throw TestSupportError("redis-server is not installed; scripts/test installs it") }
        let listen =
            endpoint.socket.map { ["--port", "0", "--unixsocket", $0, "--unixsocketperm", "700"] }
            ?? ["--port", String(endpoint.port), "--bind", "127.0.0.1"]
        server = try ChildProcess(
            binary,
            listen + [
                "--dir", directory.path,
                "--save", "", "--appendonly", persistent ? "yes" : "no", "--appendfsync", "always",
            ]
                + (password.map { ["--requirepass", $0] } ?? []),
            outputFile: directory.file("redis.log"))
    }

    /// Stops a dedicated server (SIGTERM, so an append-only file is complete).
    public func stop() {
        server?.signal(SIGTERM)
        _ = server?.wait(timeout: 10)
    }

    /// Sends `signal` to a dedicated server (SIGSTOP: a Redis that hangs, SIGCONT: back).
    public func signal(_ signal: Int32) { server?.signal(signal) }

    /// Starts a dedicated server again on the same port, with the same data directory.
    public func restart() throws {
        try startServer()
        guard waitUntil(timeout: 10, { (try? BlockingRedisConnection(endpoint, timeoutMs: 500)) != nil }) else {
            throw TestSupportError("redis-server did not come back")
        }
    }

    public func connect() throws -> BlockingRedisConnection { try BlockingRedisConnection(endpoint, timeoutMs: 5000) }

    /// Deletes every key of `queue` (shared servers are used by many tests, each on its own queue).
    public func reset(queue: String) throws {
        let r = try connect()
        let keys = try r.command(["KEYS", "apns:{\(queue)}:*"]).array.compactMap(\.text)
        if !keys.isEmpty { _ = try r.command(["DEL"] + keys) }
    }

    deinit {
        server?.signal(SIGKILL)
        _ = server?.wait(timeout: 5)
    }
}
