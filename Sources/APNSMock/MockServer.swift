import APNSCore
import Foundation
import HTTP2TLS
import Synchronization

/// A mock APNs: TLS + HTTP/2 server that validates like Apple's service and injects faults.
/// One event-loop thread serves every connection.
public final class MockServer: @unchecked Sendable {
    public let configuration: MockConfiguration
    public let port: Int
    let loop: EventLoop
    let tls: TLSContext
    let validator: MockValidator
    let log: MockLog
    private let listenFD: Int32
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    /// Loop-thread state: live connections and per-token attempt counts for faults.
    var connections: [ObjectIdentifier: MockConnection] = [:]
    var attemptsByToken: [String: Int] = [:]
    /// Requests received by the whole server; connection faults count these.
    var requestsSeen = 0
    var nextConnectionID = 1
    /// Counters readable from any thread.
    public let stats = Mutex(MockStats())

    public init(configuration: MockConfiguration) throws {
        self.configuration = configuration
        loop = try EventLoop()
        tls = try TLSContext(serverCertificateFile: configuration.tls.certificate, keyFile: configuration.tls.key,
                             clientCAFile: configuration.tls.clientCA)
        validator = try MockValidator(configuration: configuration, now: { Int64(Date().timeIntervalSince1970) })
        log = try MockLog(path: configuration.log)
        (listenFD, port) = try Socket.listen(host: configuration.listen, port: configuration.port)
        try loop.register(fd: listenFD, handler: Acceptor(server: self), writable: false)
        loop.afterEvents = { [log] in log.flush() }
    }

    /// Serves on a background thread until `stop()`.
    public func start() {
        let t = Thread { [self] in
            self.loop.run()
            self.log.flush()
            self.finished.signal()
        }
        t.name = "apns-mock"
        thread = t
        t.start()
    }

    /// Serves on the calling thread until `stop()`.
    public func run() {
        loop.run()
        log.flush()
    }

    /// Closes every connection and ends the loop. Safe from any thread, and more than once.
    public func stop() {
        loop.execute { [self] in
            for c in connections.values { c.connection?.shutdown(error: nil) }
            loop.stop()
        }
    }

    /// Waits for the loop thread started by `start()` to end.
    public func waitUntilStopped() {
        finished.wait()
        finished.signal()
        let first = listenerOpen.withLock { open in defer { open = false }; return open }
        if first { close(listenFD) }
    }
    private let listenerOpen = Mutex(true)

    fileprivate func accept() {
        while let fd = Socket.accept(listenFD) {
            let id = nextConnectionID
            nextConnectionID += 1
            let initialLimit = configuration.oneStreamUntilAuthenticated ? 1 : configuration.maxConcurrentStreams
            let handler = MockConnection(server: self, id: id, streamLimit: initialLimit)
            do {
                handler.connection = try HTTP2Connection(accepted: fd, tls: tls, loop: loop, delegate: handler,
                                                         maxConcurrentStreams: initialLimit,
                                                         answerPings: configuration.faults.answerPings)
                connections[ObjectIdentifier(handler)] = handler
                stats.withLock { $0.connections += 1 }
            } catch {
                close(fd)
            }
        }
    }

    func connectionClosed(_ handler: MockConnection) {
        connections[ObjectIdentifier(handler)] = nil
    }

    /// The fault rule for a token, if any, and whether it applies to this attempt.
    func fault(for token: String) -> MockConfiguration.TokenFault? {
        guard let rule = configuration.faults.tokens.first(where: { $0.matches(token) }) else { return nil }
        let attempt = (attemptsByToken[token] ?? 0) + 1
        attemptsByToken[token] = attempt
        if let limit = rule.attempts, attempt > limit { return nil }
        return rule
    }
}

/// What the mock has seen, for tests and the summary printed at exit.
public struct MockStats: Sendable, Equatable {
    public var connections = 0
    public var requests = 0
    public var byStatus: [Int: Int] = [:]
    public var byReason: [String: Int] = [:]
    public var maxConcurrentStreams = 0
    /// Requests that arrived while more streams were open than the mock had allowed.
    public var streamLimitViolations = 0
    public var goawaysSent = 0
    /// SETTINGS frames that moved a connection's stream limit.
    public var settingsChanges = 0
    public var pingsReceived = 0
    public var drops = 0
    /// TLS handshakes that resumed an earlier session (no certificate chain sent).
    public var resumedHandshakes = 0
}

private final class Acceptor: EventHandler {
    unowned let server: MockServer
    init(server: MockServer) { self.server = server }
    func handleEvents(readable: Bool, writable: Bool, hangup: Bool) { server.accept() }
}
