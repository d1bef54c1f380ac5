import APNSCore
import APNSMock
import Foundation
import IOLoop
import Synchronization
import TestSupport
import XCTest

@testable import APNSWorker

/// Issue #4's connection behaviour: GOAWAY and drops, the live stream limit, PING health checks.
final class ConnectionResilienceTests: XCTestCase {
    func testTenThousandThroughGoAwaysAndDropsEachDeliveredOnce() throws {
        let h = try ProtocolHarness(connections: 4, streams: 100) { config in
            config.faults.goawayAfter = 1000
            config.faults.dropAfter = 3333
        }
        let n = 10_000
        h.send(
            try (0..<n).map { i in
                try h.job(
                    #"{"token":"\#(ProtocolHarness.token(i))","apns_id":"\#(String(format: "00000000-0000-4000-8000-%012x", i))","payload":{"n":\#(i)}}"#
                )
            })
        let out = h.waitForOutcomes(n, timeout: 120)
        XCTAssertEqual(Set(out.compactMap(\.deliveredID)).count, n, "every notification delivered")
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertGreaterThanOrEqual(stats.goawaysSent, 9)
        XCTAssertEqual(stats.drops, 3)
        XCTAssertEqual(stats.streamLimitViolations, 0, "no request over the live stream limit")
        let accepted = try h.mock.logEntries().filter { $0["status"] as? Int == 200 }.compactMap { $0["apns_id"] as? String }
        XCTAssertEqual(accepted.count, n, "none delivered twice")
        XCTAssertEqual(Set(accepted).count, n)
    }

    /// A connection ended after a GOAWAY leaves its TLS session resumable: the replacement
    /// resumes it (no certificate chain to send and check). Both sides close with close_notify;
    /// without it, the mock's OpenSSL dropped the session and no replacement resumed.
    func testReplacementsAfterGoAwayResumeTheTLSSession() throws {
        let h = try ProtocolHarness { config in config.faults.goawayAfter = 1 }
        for i in 1...3 {
            h.send([try h.job(#"{"token":"\#(ProtocolHarness.token(i))","payload":{"a":1}}"#)])
            XCTAssertEqual(h.waitForOutcomes(i).compactMap(\.deliveredID).count, i)
            XCTAssertTrue(waitUntil(timeout: 5) { h.mock.server.stats.withLock { $0.connections } > i }, "the connection was replaced")
        }
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertGreaterThanOrEqual(stats.goawaysSent, 3)
        XCTAssertEqual(stats.resumedHandshakes, stats.connections - 1, "every connection after the first resumed")
    }

    func testStreamLimitFollowsSettingsDownToOneAndBackUp() throws {
        let h = try ProtocolHarness(connections: 2, streams: 200) { config in
            config.maxConcurrentStreams = 50
            config.throttleAfterRejection = true
            config.faults.tokens = [
                .init(tokenPrefix: "baad", status: 400, reason: "BadDeviceToken"),
                .init(tokenPrefix: "", delayMs: 2),
            ]
        }
        let jobs = try (0..<2000).map { i in
            try h.job(#"{"token":"\#(ProtocolHarness.token(i, prefix: i % 20 == 0 ? "baad" : ""))","payload":{"n":\#(i)}}"#)
        }
        h.send(jobs)
        let out = h.waitForOutcomes(2000, timeout: 120)
        XCTAssertEqual(out.filter { $0.deliveredID != nil }.count, 1900)
        XCTAssertEqual(out.filter { $0.rejection?.reason == .badDeviceToken }.count, 100)
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertGreaterThan(stats.settingsChanges, 20, "the limit went down to 1 and back up many times")
        XCTAssertEqual(stats.streamLimitViolations, 0, "never above the limit the worker had acknowledged")
    }

    func testUnansweredPingReplacesTheConnection() throws {
        let h = try ProtocolHarness(pingIntervalMs: 200, pingTimeoutMs: 300) { config in config.faults.answerPings = false }
        h.send([try h.job(#"{"token":"\#(ProtocolHarness.token(1))","payload":{"a":1}}"#)])
        _ = h.waitForOutcomes(1)
        XCTAssertTrue(waitUntil(timeout: 5) { h.mock.server.stats.withLock { $0.connections } >= 3 }, "dead connections are replaced")
        XCTAssertGreaterThan(h.mock.server.stats.withLock { $0.pingsReceived }, 0)
        // And the replacement still works.
        h.send([try h.job(#"{"token":"\#(ProtocolHarness.token(2))","payload":{"a":2}}"#)])
        XCTAssertEqual(h.waitForOutcomes(2).compactMap(\.deliveredID).count, 2)
    }

    func testAnsweredPingsKeepTheConnection() throws {
        let h = try ProtocolHarness(pingIntervalMs: 200, pingTimeoutMs: 300)
        h.send([try h.job(#"{"token":"\#(ProtocolHarness.token(1))","payload":{"a":1}}"#)])
        _ = h.waitForOutcomes(1)
        usleep(1_200_000)
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertGreaterThanOrEqual(stats.pingsReceived, 2)
        XCTAssertEqual(stats.connections, 1, "a healthy idle connection is kept, never churned")
    }

    /// An endpoint given by name is looked up by the resolver, and an address that refuses the
    /// connect gives way to the next one the name has.
    func testANamedEndpointIsLookedUpAndARefusingAddressGivesWayToTheNext() throws {
        let asked = Mutex<[String]>([])
        let refusing = freePort()  // nothing listens there
        let resolver = HostResolver { host, port throws(SystemError) in
            asked.withLock { $0.append("\(host):\(port)") }
            return try Socket.addresses(of: "127.0.0.1", port: refusing) + Socket.addresses(of: "127.0.0.1", port: port)
        }
        let h = try ProtocolHarness(host: "apns.test", resolver: resolver)
        h.send(try (1...3).map { try h.job(#"{"token":"\#(ProtocolHarness.token($0))","payload":{"a":1}}"#) })
        XCTAssertEqual(h.waitForOutcomes(3).compactMap(\.deliveredID).count, 3)
        XCTAssertEqual(asked.withLock { $0 }, ["apns.test:\(h.mock.port)"], "one lookup, of the endpoint's name and port")
        XCTAssertEqual(h.mock.server.stats.withLock { $0.connections }, 1)
    }

    /// `connect_timeout_ms` is each address's time: an address whose SYNs go unanswered gives
    /// way to the next after it, not after the default 10 s.
    func testTheConnectTimeoutSettingBoundsEachAddress() throws {
        let silent = try SilentListener()
        let silentPort = silent.port
        let resolver = HostResolver { _, port throws(SystemError) in
            try Socket.addresses(of: "127.0.0.1", port: silentPort) + Socket.addresses(of: "127.0.0.1", port: port)
        }
        let started = Date()
        let h = try ProtocolHarness(connectTimeoutMs: 400, host: "apns.test", resolver: resolver)
        h.send(try (1...3).map { try h.job(#"{"token":"\#(ProtocolHarness.token($0))","payload":{"a":1}}"#) })
        XCTAssertEqual(h.waitForOutcomes(3).compactMap(\.deliveredID).count, 3)
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertGreaterThanOrEqual(elapsed, 0.4, "the silent address had its 400 ms")
        XCTAssertLessThan(elapsed, 9, "well before the default 10 s")
        XCTAssertEqual(h.mock.server.stats.withLock { $0.connections }, 1)
        withExtendedLifetime(silent) {}
    }

    /// A name that does not resolve leaves the pool without a connection, and lookups go on
    /// (with backoff) until one succeeds.
    func testALookupThatFailsIsTriedAgain() throws {
        let lookups = Atomic<Int>(0)
        let resolver = HostResolver { host, port throws(SystemError) in
            if lookups.add(1, ordering: .relaxed).newValue < 3 {
                throw SystemError(operation: "resolving \(host)", code: EAGAIN, reason: "temporary failure")
            }
            return try Socket.addresses(of: "127.0.0.1", port: port)
        }
        let h = try ProtocolHarness(host: "apns.test", resolver: resolver)
        h.send([try h.job(#"{"token":"\#(ProtocolHarness.token(1))","payload":{"a":1}}"#)])
        XCTAssertEqual(h.waitForOutcomes(1).compactMap(\.deliveredID).count, 1)
        XCTAssertGreaterThanOrEqual(lookups.load(ordering: .relaxed), 3)
    }

    /// A server whose first three connections refuse every stream (a bad front-end node; a new
    /// connection lands on a good one): each refusing connection is closed with GOAWAY NO_ERROR
    /// and replaced, and every job is delivered once (issue 43, item 2: the worker kept its two
    /// refusing connections, and 0 of 200 jobs went in 30 s).
    func testAConnectionThatRefusesEveryStreamIsReplaced() throws {
        let h = try ProtocolHarness(connections: 2, streams: 50) { config in config.faults.refuseFirstConnections = 3 }
        let started = Date()
        let tokens = (0..<200).map { ProtocolHarness.token($0) }
        h.send(try tokens.map { try h.job(#"{"token":"\#($0)","payload":{"aps":{"alert":"x"}}}"#) })
        let out = h.waitForOutcomes(tokens.count, timeout: 30)
        XCTAssertEqual(out.compactMap(\.deliveredID).count, tokens.count, "\(out.compactMap(\.rejection).prefix(3))")
        XCTAssertTrue(out.allSatisfy { $0.attemptCount == 0 }, "refusals cost no attempt")
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertGreaterThan(stats.refusedStreams, 0)
        XCTAssertGreaterThanOrEqual(stats.connections, 4, "the refusing connections were replaced")
        XCTAssertLessThanOrEqual(stats.connections, 8, "at the pool's reconnect pace, not in a storm")
        XCTAssertGreaterThanOrEqual(stats.goawaysReceived[0] ?? 0, 1, "closed with GOAWAY NO_ERROR: \(stats.goawaysReceived)")
        let accepted = try h.mock.logEntries().filter { $0["status"] as? Int == 200 }.compactMap { $0["token"] as? String }
        XCTAssertEqual(accepted.sorted(), tokens.sorted(), "each delivered exactly once")
        print(
            "refusing connections: \(stats.connections) connections, \(stats.refusedStreams) refusals, \(Int(Date().timeIntervalSince(started) * 1000)) ms"
        )
    }
}
