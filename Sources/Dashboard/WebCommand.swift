import APNSAdmin
import Configuration
import FoundationEssentials
import Glibc
import IOLoop

/// `apnsctl web`: checks its settings (any mistake exits 2 before anything listens), then serves
/// the dashboard until it is killed.
public enum WebCommand {
    public struct Settings {
        public var host = "127.0.0.1"
        public var port = 8088
        public var secret: String?
        public var readOnly = false
        public var limits = HTTPLimits()

        public init() {}

        /// Loopback only (127.0.0.0/8): the one place a dashboard may listen with no secret.
        public var isLoopback: Bool { host.hasPrefix("127.") }

        /// `--listen HOST:PORT`, `--auth-file FILE`, APNSW_WEB_TOKEN(_FILE), `--read-only`.
        public static func parse(listen: String?, authFile: String?, readOnly: Bool, environment: [String: String]) throws(AdminError) -> Settings {
            var s = Settings()
            s.readOnly = readOnly
            if let listen {
                let parts = listen.split(separator: ":", omittingEmptySubsequences: false)
                guard parts.count == 2, let port = Int(parts[1]), (0...65535).contains(port) else {
                    throw .usage("--listen takes HOST:PORT (an IPv4 address and a port, such as 127.0.0.1:8088), not \(listen)")
                }
                s.host = parts[0] == "localhost" || parts[0].isEmpty ? "127.0.0.1" : String(parts[0])
                s.port = port
            }
            // Read as every other secret file is: trailing line ends dropped, empty refused.
            if let file = authFile ?? environment["APNSW_WEB_TOKEN_FILE"] {
                do { s.secret = try WorkerConfiguration.secret(from: file, for: authFile == nil ? "APNSW_WEB_TOKEN_FILE" : "--auth-file") } catch {
                    throw .usage("the dashboard's secret: \(error)")
                }
            } else {
                s.secret = environment["APNSW_WEB_TOKEN"]
            }
            if let secret = s.secret, secret.count < 16 {
                throw .usage("the dashboard's secret is \(secret.count) characters; use at least 16 (openssl rand -hex 16 makes one)")
            }
            if !s.isLoopback, s.secret == nil {
                throw .usage(
                    "apnsctl web will not listen on \(s.host) without authentication: give a secret (--auth-file FILE or APNSW_WEB_TOKEN), or listen on 127.0.0.1"
                )
            }
            return s
        }
    }

    public static func run(
        _ settings: Settings, data: DashboardData, queue: String, channelLister: (@Sendable (String) throws -> [String])?
    ) throws -> Never {
        let dashboard = DashboardServer(
            data: data, queue: queue, secret: settings.secret, readOnly: settings.readOnly, openReads: settings.isLoopback,
            channelLister: channelLister)
        let server = try HTTPServer(host: settings.host, port: settings.port, limits: settings.limits) { request in
            let started = MonotonicClock.nowMilliseconds()
            let response = dashboard.handle(request)
            FileStream.standardError.write(
                "\(request.method) \(request.path) \(response.status) \(MonotonicClock.nowMilliseconds() - started) ms\n")
            return response
        }
        server.start()
        let mode =
            settings.readOnly ? "read-only" : settings.secret == nil ? "no secret, so nothing can change data" : "actions need the secret"
        FileStream.standardOutput.write("apnsctl web: queue \(queue) on http://\(settings.host):\(server.port)/ (\(mode))\n")
        while true { sleep(3600) }
    }
}
