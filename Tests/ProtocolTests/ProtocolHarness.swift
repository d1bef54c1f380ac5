import APNSCore
import APNSMock
import APNSTransport
import Configuration
import Delivery
import Foundation
import HTTP2
import IOLoop
import QueueContract
import Synchronization
import Telemetry
import TestSupport
import XCTest

@testable import APNSWorker

/// The worker's I/O thread talking to an in-process mock APNs over real TLS + HTTP/2.
final class ProtocolHarness: @unchecked Sendable {
    let mock: MockFixture
    let app: AppRuntime
    let ioThread: IOThread
    let sender: APNSSender
    private final class Outcomes: DecidedSink, @unchecked Sendable {
        let list = Mutex<[FinishedJob]>([])
        func add(_ decided: consuming FinishedJob) { list.withLock { [decided] in $0.append(decided) } }
        func turnEnded(decided: Int) {}
        func dropped(_ n: Int) {}
    }
    private let finished = Outcomes()

    init(
        connections: Int = 1, streams: Int = 100, requestTimeoutMs: Int = 30_000, bundleID: String = "com.example.app",
        credentialPauseMs: Int = 60_000, pingIntervalMs: Int = 60_000, pingTimeoutMs: Int = 10_000, connectTimeoutMs: Int = 10_000,
        host: String = "127.0.0.1", port: Int? = nil, mock given: MockFixture? = nil, resolver: HostResolver = HostResolver(),
        ratePerConnection: Int? = nil, appRate: Int? = nil,
        configureMock: (inout MockConfiguration) -> Void = { _ in }
    ) throws {
        mock = try given ?? MockFixture(configure: configureMock)
        let files = mock.files
        // `port`: another server than the mock, serving `given`'s certificate.
        let endpoint = APNSEndpoint(host: host, port: port ?? mock.port, caFile: files.caFile, serverName: "localhost")
        let config = APNSApp(
            name: "default", bundleID: bundleID, endpoint: endpoint, channelsEndpoint: endpoint.channelsEndpoint(port: nil),
            credential: .token(teamID: files.teamID, keyID: files.keyID, keyFile: files.p8File), maxRate: appRate)
        app = try AppRuntime(config, jwt: try JWTProvider(teamID: files.teamID, keyID: files.keyID, p8File: files.p8File))
        let logger = Logger(level: .error)
        let loop = try EventLoop()
        var settings = APNSSender.Settings(
            connectionsPerApp: connections, streamsPerConnection: streams, requestTimeoutMs: requestTimeoutMs,
            credentialPauseMs: credentialPauseMs, pingIntervalMs: pingIntervalMs, pingTimeoutMs: pingTimeoutMs,
            connectTimeoutMs: connectTimeoutMs)
        settings.ratePerConnection = ratePerConnection
        sender = APNSSender(
            name: "test-io", apps: [app],
            settings: settings,
            logger: logger, loop: loop, sink: finished, resolver: resolver)
        ioThread = IOThread(name: "test-io", loop: loop, transport: sender)
        ioThread.start()
    }

    deinit { ioThread.stop() }

    static func token(_ i: Int, prefix: String = "") -> String {
        let hex = String(i, radix: 16)
        return prefix + String(repeating: "0", count: 64 - prefix.count - hex.count) + hex
    }

    /// A job parsed and rendered, as the fetcher hands it over.
    func job(_ json: String) throws -> Job { try PayloadRenderer.render(Job.parse(Array(json.utf8)), templates: TemplateLibrary()) }

    func send(_ jobs: [Job]) {
        let batch = TakenBatch(id: "b", number: 1, jobs: jobs.count)
        let requests = jobs.enumerated().map { i, job in
            SendRequest(
                ticket: QueueTicket(
                    handle: Int64(i), batch: batch, index: i, takenAtNs: 0, sinceMs: Int64(Date().timeIntervalSince1970 * 1000), attempts: [],
                    recoveries: 0, fanout: 1),
                job: job, token: job.tokens[0], app: 0, topic: job.topic ?? job.pushType.topic(forBundle: app.configuration.bundleID))
        }
        let sender = sender
        sender.loop.execute { sender.accept(requests) }
    }

    /// Waits for `count` outcomes; fails the test on timeout.
    func waitForOutcomes(_ count: Int, timeout: Double = 30, file: StaticString = #filePath, line: UInt = #line) -> [FinishedJob] {
        let ok = waitUntil(timeout: timeout) { finished.list.withLock { $0.count } >= count }
        let all = finished.list.withLock { $0 }
        XCTAssertTrue(ok, "only \(all.count) of \(count) outcomes arrived", file: file, line: line)
        return all
    }

    var outcomes: [FinishedJob] { finished.list.withLock { $0 } }
}

extension FinishedJob {
    var deliveredID: String? {
        if case .delivered(let id) = self.outcome { return id.description }
        return nil
    }

    var rejection: Rejection? {
        if case .rejected(let r, _) = self.outcome { return r }
        return nil
    }
}

/// A connection delegate that ignores frames unless it says otherwise, for tests that watch a
/// connection's life, not its streams.
protocol ConnectionProbe: HTTP2ConnectionDelegate {}

extension ConnectionProbe {
    func http2Header(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {}
    func http2Data(stream: Int32, bytes: UnsafeBufferPointer<UInt8>) {}
    func http2EndStream(_ stream: Int32) {}
    func http2StreamClosed(_ stream: Int32, errorCode: HTTP2ErrorCode) {}
    func http2RemoteSettings(maxConcurrentStreams: Int) {}
    func http2GoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) {}
}
