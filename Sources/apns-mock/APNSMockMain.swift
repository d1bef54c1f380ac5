import APNSMock
import Foundation
import Telemetry

// apns-mock: a strict mock of Apple's push service for tests, demos and benchmarks.
// This file parses arguments and wires things up; state lives in `main()`, not in globals.

let usage = """
    usage:
      apns-mock serve --config FILE [--listen ADDR] [--port N] [--port-file FILE] [--manage-port N]
                      [--manage-port-file FILE] [--log FILE] [--threads N]
          Serve until SIGTERM/SIGINT, then print a JSON summary to stdout. --threads: event loops
          serving the connections (default 1). --manage-port: the channel-management listener
          (default: a free port).
      apns-mock make-credentials --dir DIR [--team-id T] [--key-id K] [--topic BUNDLE] [--log FILE] [--hosts a,b]
          (--hosts: more names for the server certificate, e.g. a container's service name)
          Write a test CA, a server certificate, a provider .p8 key and DIR/mock.json.
      apns-mock make-fcm-account --dir DIR --port N [--project ID]
          After make-credentials: a Firebase service account (DIR/service-account-<ID>-fcmkey1.json,
          its token_uri https://127.0.0.1:N/token) and DIR/fcm-mock.json, the mock FCM that knows it,
          to serve on port N.
    """

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("apns-mock: \(message)\n".utf8))
    exit(2)
}

@main
struct APNSMockMain {
    static func main() {
        var args = Array(CommandLine.arguments.dropFirst())
        guard let command = args.first else { print(usage); exit(2) }
        if command == "--help" || command == "-h" || command == "help" { print(usage); exit(0) }
        if command == "--version" { print(BuildInfo.line("apns-mock")); exit(0) }
        args.removeFirst()
        var options: [String: String] = [:]
        while !args.isEmpty {
            let flag = args.removeFirst()
            guard flag.hasPrefix("--") else { fail("unexpected argument \(flag)\n\(usage)") }
            if flag == "--help" { print(usage); exit(0) }
            guard !args.isEmpty else { fail("\(flag) needs a value") }
            options[String(flag.dropFirst(2))] = args.removeFirst()
        }

        switch command {
        case "make-credentials":
            guard let dir = options["dir"] else { fail("make-credentials needs --dir") }
            do {
                let files = try MockCredentials.make(
                    in: dir, teamID: options["team-id"] ?? "TEAM123456",
                    keyID: options["key-id"] ?? "KEY1234567",
                    topic: options["topic"] ?? "com.example.app", logFile: options["log"],
                    extraHostNames: options["hosts"].map { $0.split(separator: ",").map(String.init) } ?? [])
                print(files.mockConfigFile)
            } catch {
                fail("cannot make credentials: \(error)")
            }
        case "make-fcm-account":
            guard let dir = options["dir"], let port = options["port"].flatMap({ Int($0) }) else { fail("make-fcm-account needs --dir and --port") }
            do {
                var config = try MockConfiguration.load(path: (dir as NSString).appendingPathComponent("mock.json"))
                config.port = port
                let (file, _) = try MockCredentials.addFCMAccount(in: dir, to: &config, port: port, projectID: options["project"] ?? "demo-project")
                let mockFile = (dir as NSString).appendingPathComponent("fcm-mock.json")
                try config.encoded().write(to: URL(fileURLWithPath: mockFile))
                print(file)
                print(mockFile)
            } catch {
                fail("cannot make the FCM account (run make-credentials on --dir first): \(error)")
            }
        case "serve":
            guard let configPath = options["config"] else { fail("serve needs --config") }
            var config: MockConfiguration
            do { config = try MockConfiguration.load(path: configPath) } catch { fail("cannot read \(configPath): \(error)") }
            if let port = options["port"] { config.port = Int(port) ?? 0 }
            if let port = options["manage-port"] { config.managePort = Int(port) ?? 0 }
            if let listen = options["listen"] { config.listen = listen }
            if let log = options["log"] { config.log = log }
            if let threads = options["threads"] {
                guard let n = Int(threads) else { fail("--threads takes a number, got \(threads)") }
                config.threads = n
            }
            signal(SIGPIPE, SIG_IGN)
            let server: MockServer
            do { server = try MockServer(configuration: config) } catch { fail("cannot start: \(error)") }
            if let portFile = options["port-file"] {
                try? String(server.port).write(toFile: portFile, atomically: true, encoding: .utf8)
            }
            if let portFile = options["manage-port-file"] {
                try? String(server.managePort).write(toFile: portFile, atomically: true, encoding: .utf8)
            }
            FileHandle.standardError.write(
                Data("apns-mock: listening on \(config.listen):\(server.port), channel management on port \(server.managePort)\n".utf8))
            var sources: [DispatchSourceSignal] = []
            for sig in [SIGTERM, SIGINT] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler { server.stop() }
                source.resume()
                sources.append(source)
            }
            server.start()
            server.waitUntilStopped()
            let s = server.stats.withLock { $0 }
            let summary: [String: Any] = [
                "connections": s.connections, "requests": s.requests,
                "by_status": Dictionary(uniqueKeysWithValues: s.byStatus.map { (String($0.key), $0.value) }),
                "by_reason": s.byReason, "max_concurrent_streams": s.maxConcurrentStreams,
                "stream_limit_violations": s.streamLimitViolations, "goaways": s.goawaysSent, "drops": s.drops,
                "requests_per_thread": s.requestsPerThread,
            ]
            let data = try! JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        default:
            fail("unknown command \(command)\n\(usage)")
        }
    }
}
