import APNSMock
import Foundation
import RedisClient
import TLS

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

    /// A dedicated server's TLS: its files, made by a test CA, and whether it asks clients for
    /// certificates of that CA (`--tls-auth-clients`).
    public struct TLSFiles: Sendable {
        public let caFile: String
        public let certificateFile: String
        public let keyFile: String
        /// A client certificate and key the CA signed, for mutual TLS.
        public let clientCertificateFile: String
        public let clientKeyFile: String
        public let requiresClientCertificates: Bool
    }
    public private(set) var tlsFiles: TLSFiles?

    /// `password` turns on `requirepass` (dedicated servers only); `unixSocket` starts a dedicated
    /// server that listens on a unix socket only, with no TCP port. `tls` starts a dedicated
    /// server that speaks TLS only, with a certificate for 127.0.0.1 and `localhost` from a new
    /// CA; `clientCertificates` makes it refuse clients without one of that CA's certificates.
    public init(
        dedicated: Bool = false, persistent: Bool = false, password: String? = nil, unixSocket: Bool = false, tls: Bool = false,
        clientCertificates: Bool = false
    ) throws {
        directory = try TemporaryDirectory("apnsw-redis")
        self.persistent = persistent
        self.password = password
        if tls {
            let files = try Self.makeTLSFiles(in: directory, clientCertificates: clientCertificates)
            tlsFiles = files
            let client = clientCertificates ? (files.clientCertificateFile, files.clientKeyFile) : nil
            endpoint = RedisEndpoint(
                host: "127.0.0.1", port: freePort(), password: password,
                tls: RedisTLS(caFile: files.caFile, certificateFile: client?.0, keyFile: client?.1))
            try startServer()
        } else if unixSocket {
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

    /// Servers started elsewhere (a Sentinel group, a cluster), reached at `endpoint`.
    public init(serving endpoint: RedisEndpoint) throws {
        directory = try TemporaryDirectory("apnsw-redis")
        persistent = false
        password = nil
        self.endpoint = endpoint
        guard waitUntil(timeout: 10, { (try? BlockingRedisConnection(endpoint, timeoutMs: 1000)) != nil }) else {
            throw TestSupportError("\(endpoint) is not reachable")
        }
    }

    private func startServer() throws {
        let binary = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let binary else { throw TestSupportError("redis-server is not installed; scripts/test installs it") }
        var listen =
            endpoint.socket.map { ["--port", "0", "--unixsocket", $0, "--unixsocketperm", "700"] }
            ?? ["--port", String(endpoint.port), "--bind", "127.0.0.1"]
        if let t = tlsFiles {
            listen = [
                "--port", "0", "--tls-port", String(endpoint.port), "--bind", "127.0.0.1", "--tls-cert-file", t.certificateFile,
                "--tls-key-file", t.keyFile, "--tls-ca-cert-file", t.caFile, "--tls-auth-clients", t.requiresClientCertificates ? "yes" : "no",
            ]
        }
        server = try ChildProcess(
            binary,
            listen + [
                "--dir", directory.path,
                "--save", "", "--appendonly", persistent ? "yes" : "no", "--appendfsync", "always",
            ]
                + (password.map { ["--requirepass", $0] } ?? []),
            outputFile: directory.file("redis.log"))
    }

    private static func makeTLSFiles(in directory: TemporaryDirectory, clientCertificates: Bool) throws -> TLSFiles {
        let pki = try TestPKI(commonName: "apns-worker test Redis CA")
        let serverKey = try ES256PrivateKey(), clientKey = try ES256PrivateKey()
        let files = TLSFiles(
            caFile: directory.file("ca.pem"), certificateFile: directory.file("redis.pem"), keyFile: directory.file("redis.key"),
            clientCertificateFile: directory.file("client.pem"), clientKeyFile: directory.file("client.key"),
            requiresClientCertificates: clientCertificates)
        try pki.caCertificatePEM().write(toFile: files.caFile, atomically: true, encoding: .utf8)
        try pki.issue(key: serverKey, commonName: "localhost", dnsNames: ["localhost"], ips: ["127.0.0.1"])
            .write(toFile: files.certificateFile, atomically: true, encoding: .utf8)
        try serverKey.pkcs8PEM().write(toFile: files.keyFile, atomically: true, encoding: .utf8)
        try pki.issue(key: clientKey, commonName: "apns-worker", serial: 3).write(
            toFile: files.clientCertificateFile, atomically: true, encoding: .utf8)
        try clientKey.pkcs8PEM().write(toFile: files.clientKeyFile, atomically: true, encoding: .utf8)
        for key in [files.keyFile, files.clientKeyFile] { chmod(key, 0o600) }
        return files
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
