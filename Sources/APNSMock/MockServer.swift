import APNSCore
import Foundation
import HTTP2
import IOLoop
import Synchronization
import TLS

/// A mock APNs: TLS + HTTP/2 server that validates like Apple's service and injects faults.
/// `threads` event loops serve the connections, each connection on one of them, taken in turn;
/// the first loop also accepts.
public final class MockServer: @unchecked Sendable {
    public let configuration: MockConfiguration
    public let port: Int
    /// The channel-management listener's port.
    public let managePort: Int
    let channels: MockChannels
    let loops: [EventLoop]
    let tls: TLSContext
    let validator: MockValidator
    /// The FCM side, when the configuration has one: then the listener speaks FCM.
    let fcm: MockFCM?
    let log: MockLog
    private let listenFD: Int32, manageFD: Int32
    private let running = DispatchGroup()
    /// Each loop's live connections, touched on that loop's thread only.
    private let served: [ServedConnections]
    /// Per-token attempt counts for faults, from every loop.
    private let attemptsByToken = Mutex<[String: Int]>([:])
    /// Requests received by the whole server, on every loop; connection faults count these.
    let requestsSeen = Atomic<Int>(0)
    /// The accepting loop's.
    private var nextConnectionID = 1
    /// Counters readable from any thread.
    public let stats: Mutex<MockStats>
    /// The storm blowing, and until when (monotonic ms).
    private let storm = Mutex<(kind: MockConfiguration.Storm.Kind, untilMs: UInt64)?>(nil)

    public init(configuration: MockConfiguration) throws {
        guard (1...64).contains(configuration.threads) else { throw MockError("threads must be in 1...64, got \(configuration.threads)") }
        self.configuration = configuration
        loops = try (0..<configuration.threads).map { _ in try EventLoop() }
        served = loops.map { _ in ServedConnections() }
        stats = Mutex(MockStats(threads: configuration.threads))
        tls = try TLSContext(
            serverCertificateFile: configuration.tls.certificate, keyFile: configuration.tls.key,
            clientCAFile: configuration.tls.clientCA)
        validator = try MockValidator(configuration: configuration, now: { Int64(Date().timeIntervalSince1970) })
        fcm = try configuration.fcm.map { try MockFCM(settings: $0, now: { Int64(Date().timeIntervalSince1970) }) }
        log = try MockLog(path: configuration.log)
        channels = MockChannels(limit: configuration.channelLimit)
        (listenFD, port) = try Socket.listen(host: configuration.listen, port: configuration.port)
        (manageFD, managePort) = try Socket.listen(host: configuration.listen, port: configuration.managePort)
        try loops[0].register(fd: listenFD, handler: Acceptor(server: self, fd: listenFD, management: false), writable: false)
        try loops[0].register(fd: manageFD, handler: Acceptor(server: self, fd: manageFD, management: true), writable: false)
        for loop in loops { loop.afterEvents = { [log] in log.flush() } }
        if let s = configuration.faults.storm { startStorm(s.kind, forMs: s.forMs) }
    }

    /// Misbehaves as `kind` says on every connection or request for `forMs`, from now.
    public func startStorm(_ kind: MockConfiguration.Storm.Kind, forMs: Int) {
        let until = MonotonicClock.nowMilliseconds() + UInt64(max(0, forMs))
        storm.withLock { $0 = (kind, until) }
    }

    /// Refuses (403 InvalidProviderToken) or accepts again the JWTs of a key, as when a key is
    /// revoked in Apple's developer account and restored.
    public func revoke(keyID: String, _ isRevoked: Bool = true) { validator.setRevoked(keyID, isRevoked) }

    /// FCM: refuses (or accepts again) a service account's assertions and its access tokens, as
    /// when its key is deleted in Google Cloud.
    public func revokeFCM(clientEmail: String, _ isRevoked: Bool = true) { fcm?.revoke(email: clientEmail, isRevoked) }
    /// FCM: the token endpoint answers `status` (nil: behaves again).
    public func failFCMTokenRequests(status: Int?) { fcm?.failTokenRequests(status: status) }
    /// FCM: every access token issued so far expires now.
    public func expireFCMAccessTokens() { fcm?.expireAccessTokens() }
    /// FCM: access tokens the token endpoint has issued.
    public var fcmTokensIssued: Int { fcm?.tokensIssued ?? 0 }

    /// Makes a channel for `bundle` as the management API would, for tests and demos.
    public func createChannel(bundle: String, storage: ChannelStorage) -> String? { channels.create(bundle: bundle, storage: storage) }
    public func deleteChannel(bundle: String, id: String) -> Bool { channels.delete(bundle: bundle, id: id) }

    /// The storm blowing now, if any.
    var currentStorm: MockConfiguration.Storm.Kind? {
        let now = MonotonicClock.nowMilliseconds()
        return storm.withLock { s in s.flatMap { $0.untilMs > now ? $0.kind : nil } }
    }

    /// Serves on background threads until `stop()`.
    public func start() {
        for (i, loop) in loops.enumerated() {
            running.enter()
            let t = Thread { [self] in
                loop.run()
                log.flush()
                running.leave()
            }
            t.name = loops.count == 1 ? "apns-mock" : "apns-mock-\(i)"
            t.start()
        }
    }

    /// Closes every connection and ends the loops. Safe from any thread, and more than once.
    public func stop() {
        for (i, loop) in loops.enumerated() {
            loop.execute { [self] in
                for c in served[i].all.values { c.connection?.shutdown(error: nil) }
                loop.stop()
            }
        }
    }

    /// Waits for the loop threads started by `start()` to end.
    public func waitUntilStopped() {
        running.wait()
        let first = listenerOpen.withLock { open in
            defer { open = false }; return open
        }
        if first {
            close(listenFD)
            close(manageFD)
        }
    }
    private let listenerOpen = Mutex(true)

    fileprivate func accept(from listener: Int32, management: Bool) {
        while let fd = Socket.accept(listener) {
            let id = nextConnectionID
            nextConnectionID += 1
            let index = (id - 1) % loops.count
            if index == 0 {
                serve(fd, id: id, loop: 0, management: management)
            } else {
                loops[index].execute { [self] in serve(fd, id: id, loop: index, management: management) }
            }
        }
    }

    /// On loop `index`'s thread: a connection accepted there is served by that loop.
    private func serve(_ fd: Int32, id: Int, loop index: Int, management: Bool) {
        let initialLimit = configuration.oneStreamUntilAuthenticated ? 1 : configuration.maxConcurrentStreams
        let handler = MockConnection(server: self, id: id, loopIndex: index, streamLimit: initialLimit, isManagement: management)
        do {
            handler.connection = try HTTP2Connection(
                accepted: fd, tls: tls, loop: loops[index], delegate: handler,
                maxConcurrentStreams: initialLimit,
                answerPings: configuration.faults.answerPings)
            served[index].all[ObjectIdentifier(handler)] = handler
            stats.withLock { $0.connections += 1 }
        } catch {
            close(fd)
        }
    }

    /// On the connection's loop thread.
    func connectionClosed(_ handler: MockConnection) {
        served[handler.loopIndex].all[ObjectIdentifier(handler)] = nil
    }

    /// The fault rule for a token, if any, and whether it applies to this attempt.
    func fault(for token: String) -> MockConfiguration.TokenFault? {
        guard let rule = configuration.faults.tokens.first(where: { $0.matches(token) }) else { return nil }
        let attempt = attemptsByToken.withLock { counts in
            let n = (counts[token] ?? 0) + 1
            counts[token] = n
            return n
        }
        if let limit = rule.attempts, attempt > limit { return nil }
        return rule
    }
}

/// One loop's connections.
private final class ServedConnections {
    var all: [ObjectIdentifier: MockConnection] = [:]
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
    /// GOAWAYs clients sent, by error code (a client says why it closes on a protocol error).
    public var goawaysReceived: [UInt32: Int] = [:]
    /// Connections and requests a storm misbehaved on.
    public var stormEvents = 0
    /// Requests refused by `refuse_first_connections`.
    public var refusedStreams = 0
    /// TLS handshakes that resumed an earlier session (no certificate chain sent).
    public var resumedHandshakes = 0
    /// Requests answered by each of the server's threads.
    public var requestsPerThread: [Int]

    public init(threads: Int = 1) { requestsPerThread = Array(repeating: 0, count: threads) }
}

private final class Acceptor: EventHandler {
    unowned let server: MockServer
    let fd: Int32, management: Bool
    init(server: MockServer, fd: Int32, management: Bool) {
        self.server = server
        self.fd = fd
        self.management = management
    }
    func handleEvents(readable: Bool, writable: Bool, hangup: Bool) { server.accept(from: fd, management: management) }
}
