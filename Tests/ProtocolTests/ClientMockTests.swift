import APNSCore
import APNSMock
import Foundation
import TestSupport
import XCTest

@testable import APNSWorker
@testable import HTTP2

final class ClientMockTests: XCTestCase {
    func testDeliversWithExactHeadersAndPayloadBytes() throws {
        let h = try ProtocolHarness()
        let token = ProtocolHarness.token(1)
        let payload = #"{"aps":{"alert":{"title":"Hé \"q\"","body":"line\nbreak 😀 שלום"}},"custom":[1,2.5,null]}"#
        let job = try h.job(
            #"{"token":"\#(token)","push_type":"alert","priority":5,"expiration":0,"collapse_id":"c-1","apns_id":"123e4567-e89b-12d3-a456-426655440000","payload":\#(payload)}"#
        )
        h.send([job])
        let out = h.waitForOutcomes(1)
        XCTAssertEqual(out.first?.deliveredID, "123e4567-e89b-12d3-a456-426655440000")
        let log = try h.mock.logEntries()
        XCTAssertEqual(log.count, 1)
        let entry = log[0]
        XCTAssertEqual(entry["status"] as? Int, 200)
        XCTAssertEqual(entry["payload_bytes"] as? Int, payload.utf8.count, "the payload arrives byte for byte")
        let headers = try XCTUnwrap(entry["headers"] as? [String: String])
        XCTAssertEqual(headers[":path"], "/3/device/\(token)")
        XCTAssertEqual(headers["apns-topic"], "com.example.app")
        XCTAssertEqual(headers["apns-push-type"], "alert")
        XCTAssertEqual(headers["apns-priority"], "5")
        XCTAssertEqual(headers["apns-expiration"], "0")
        XCTAssertEqual(headers["apns-collapse-id"], "c-1")
        XCTAssertEqual(headers["authorization"], "bearer <redacted>")
        let sent = try JSONSerialization.jsonObject(with: Data(payload.utf8)) as! NSDictionary
        XCTAssertEqual(entry["payload"] as? NSDictionary, sent)
    }

    /// A job that gives no priority is sent with the one its checks used: APNs reads a missing
    /// apns-priority as 10, which background pushes must not have.
    func testBackgroundPushesCarryTheirPriorityInBothForms() throws {
        let h = try ProtocolHarness()
        h.send([
            try h.job(#"{"token":"\#(ProtocolHarness.token(1))","push_type":"background","payload":{"aps":{"content-available":1}}}"#),
            try h.job(#"{"token":"\#(ProtocolHarness.token(2))","push_type":"background","notification":{"content_available":true}}"#),
            try h.job(#"{"token":"\#(ProtocolHarness.token(3))","payload":{"aps":{"alert":"x"}}}"#),
        ])
        let out = h.waitForOutcomes(3)
        XCTAssertEqual(out.compactMap(\.deliveredID).count, 3, "\(out.map { $0.rejection.map(\.description) ?? "ok" })")
        let priorities = try h.mock.logEntries().map { ($0["headers"] as? [String: String])?["apns-priority"] }
        XCTAssertEqual(priorities.sorted { ($0 ?? "") < ($1 ?? "") }, ["10", "5", "5"])
    }

    /// The optional cap of the seed documents, 100 requests a second per connection, holds over a
    /// 10 s run as the mock saw it; the jobs over it wait, none is given up.
    func testARateCapPerConnectionHoldsOverTenSeconds() throws {
        let h = try ProtocolHarness(connections: 1, streams: 100, ratePerConnection: 100)
        let started = Date()
        h.send(try (0..<1010).map { try h.job(#"{"token":"\#(ProtocolHarness.token($0))","payload":{"n":\#($0)}}"#) })
        let out = h.waitForOutcomes(1010, timeout: 30)
        XCTAssertEqual(out.compactMap(\.deliveredID).count, 1010)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 9.5, "1,010 at 100 a second take 10 s")
        let perSecond = try Self.requestsPerSecond(h.mock.logEntries())
        XCTAssertGreaterThanOrEqual(perSecond.count, 10)
        XCTAssertTrue(perSecond.values.allSatisfy { $0 <= 110 }, "per second: \(perSecond.sorted { $0.key < $1.key }.map(\.value))")
    }

    /// An app's cap (`max_rate`) holds across its connections.
    func testAnAppsRateCapHoldsAcrossItsConnections() throws {
        let h = try ProtocolHarness(connections: 3, streams: 100, appRate: 200)
        let started = Date()
        h.send(try (0..<610).map { try h.job(#"{"token":"\#(ProtocolHarness.token($0))","payload":{"n":\#($0)}}"#) })
        XCTAssertEqual(h.waitForOutcomes(610, timeout: 30).compactMap(\.deliveredID).count, 610)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 2.8)
        let perSecond = try Self.requestsPerSecond(h.mock.logEntries())
        XCTAssertTrue(perSecond.values.allSatisfy { $0 <= 220 }, "per second: \(perSecond.sorted { $0.key < $1.key }.map(\.value))")
    }

    /// Requests the mock logged in each second from the first.
    private static func requestsPerSecond(_ log: [[String: Any]]) -> [Int: Int] {
        let times = log.map { $0["time_ms"] as! Int }
        let first = times.min() ?? 0
        return Dictionary(times.map { (($0 - first) / 1000, 1) }, uniquingKeysWith: +)
    }

    func testGeneratedApnsIDWhenNoneIsGiven() throws {
        let h = try ProtocolHarness()
        h.send([try h.job(#"{"token":"\#(ProtocolHarness.token(2))","payload":{"aps":{"alert":"x"}}}"#)])
        let id = try XCTUnwrap(h.waitForOutcomes(1).first?.deliveredID)
        XCTAssertTrue(UUIDText.isValid(id), id)
    }

    func testRejectionsKeepStatusReasonAndTimestamp() throws {
        let h = try ProtocolHarness { config in
            config.faults.tokens = [
                .init(tokenPrefix: "dead", status: 410),
                .init(tokenPrefix: "baad", status: 400, reason: "DeviceTokenNotForTopic"),
                .init(tokenPrefix: "5e", status: 503, reason: "ServiceUnavailable"),
            ]
        }
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        h.send([
            try h.job(#"{"token":"\#(ProtocolHarness.token(1, prefix: "dead"))","payload":{"a":1}}"#),
            try h.job(#"{"token":"\#(ProtocolHarness.token(2, prefix: "baad"))","payload":{"a":1}}"#),
            try h.job(#"{"token":"\#(ProtocolHarness.token(3, prefix: "5e"))","payload":{"a":1}}"#),
            // A 40-digit token passes our checks; the strict mock wants 64: 400 BadDeviceToken.
            try h.job(#"{"token":"\#(String(repeating: "ab", count: 20))","payload":{"a":1}}"#),
        ])
        let out = Dictionary(uniqueKeysWithValues: h.waitForOutcomes(4).map { ($0.token!.hex.prefix(4), $0.rejection) })
        let after = Int64(Date().timeIntervalSince1970 * 1000)
        let gone = try XCTUnwrap(out["dead"] ?? nil)
        XCTAssertEqual(gone.status, 410)
        XCTAssertEqual(gone.reason, .unregistered)
        XCTAssertTrue((before...after).contains(gone.timestamp ?? 0), "410 carries a millisecond timestamp")
        XCTAssertEqual(out["baad"]??.reason, .deviceTokenNotForTopic)
        XCTAssertEqual(out["baad"]??.status, 400)
        XCTAssertEqual(out["5e00"]??.status, 503)
        XCTAssertEqual(out["abab"]??.reason, .badDeviceToken)
    }

    func testNeverExceedsTheServersStreamLimit() throws {
        let h = try ProtocolHarness(connections: 2, streams: 100) { config in
            config.maxConcurrentStreams = 3
            config.faults.tokens = [.init(tokenPrefix: "", delayMs: 5)]
        }
        let jobs = try (0..<300).map { try h.job(#"{"token":"\#(ProtocolHarness.token($0))","payload":{"a":\#($0)}}"#) }
        h.send(jobs)
        let out = h.waitForOutcomes(300)
        XCTAssertEqual(out.filter { $0.deliveredID != nil }.count, 300)
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertEqual(stats.streamLimitViolations, 0)
        XCTAssertEqual(stats.maxConcurrentStreams, 3, "uses the whole allowance, and no more")
        let log = try h.mock.logEntries()
        for e in log { XCTAssertLessThanOrEqual(e["concurrent"] as! Int, e["stream_limit"] as! Int) }
        // Each connection starts with one stream until its first success.
        for conn in Set(log.map { $0["conn"] as! Int }) {
            let first = log.first { $0["conn"] as! Int == conn }!
            XCTAssertEqual(first["stream_limit"] as? Int, 1)
            XCTAssertEqual(first["concurrent"] as? Int, 1)
        }
    }

    func testGoAwayResendsWhatWasNotProcessedAndNothingTwice() throws {
        let h = try ProtocolHarness(connections: 2, streams: 50) { config in config.faults.goawayAfter = 100 }
        let jobs = try (0..<1000).map { i in
            try h.job(
                #"{"token":"\#(ProtocolHarness.token(i))","apns_id":"\#(String(format: "00000000-0000-4000-8000-%012x", i))","payload":{"n":\#(i)}}"#)
        }
        h.send(jobs)
        let out = h.waitForOutcomes(1000)
        XCTAssertEqual(Set(out.compactMap(\.deliveredID)).count, 1000)
        XCTAssertGreaterThanOrEqual(h.mock.server.stats.withLock { $0.goawaysSent }, 9)
        let accepted = try h.mock.logEntries().filter { $0["status"] as? Int == 200 }.compactMap { $0["apns_id"] as? String }
        XCTAssertEqual(accepted.count, 1000, "every notification accepted exactly once")
        XCTAssertEqual(Set(accepted).count, 1000)
    }

    /// The mock, like APNs, drops a connection's stream limit to one on a rejection and raises it
    /// on the next success. Requests written HEADERS first have all opened their streams by then:
    /// nothing is refused, so nothing is sent twice (written whole one after another, 19,912
    /// were refused and 142 jobs ran out of resends).
    func testARejectionThatLowersTheStreamLimitRefusesNothing() throws {
        let h = try ProtocolHarness(connections: 4, streams: 500) { config in
            config.throttleAfterRejection = true
            config.faults.tokens = [.init(tokenPrefix: "baad", status: 400, reason: "DeviceTokenNotForTopic")]
        }
        let jobs = try (0..<5000).map { i in
            try h.job(#"{"token":"\#(ProtocolHarness.token(i, prefix: i % 100 == 5 ? "baad" : ""))","payload":{"n":\#(i)}}"#)
        }
        h.send(jobs)
        let out = h.waitForOutcomes(5000)
        XCTAssertEqual(out.compactMap(\.deliveredID).count, 4950)
        XCTAssertEqual(out.compactMap { $0.rejection?.reason.rawValue }, Array(repeating: "DeviceTokenNotForTopic", count: 50))
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertEqual(stats.requests, 5000, "each job reached the mock once")
        XCTAssertGreaterThanOrEqual(stats.settingsChanges, 50, "the limit went down and up again")
        XCTAssertEqual(stats.streamLimitViolations, 0)
    }

    /// A connection whose stream ids run out (here after 40 requests, not 2^30) takes no more:
    /// it finishes what it has and closes, a new one takes over, and nothing is lost or sent
    /// twice.
    func testAConnectionThatRunsOutOfStreamIDsIsReplaced() throws {
        HTTP2Connection.firstClientStream = Int32.max - 2 * 39
        defer { HTTP2Connection.firstClientStream = 1 }
        let h = try ProtocolHarness(connections: 1, streams: 10)
        let jobs = try (0..<200).map { i in
            try h.job(
                #"{"token":"\#(ProtocolHarness.token(i))","apns_id":"\#(String(format: "00000000-0000-4000-8000-%012x", i))","payload":{"n":\#(i)}}"#)
        }
        h.send(jobs)
        XCTAssertEqual(Set(h.waitForOutcomes(200).compactMap(\.deliveredID)).count, 200)
        XCTAssertGreaterThanOrEqual(h.mock.server.stats.withLock { $0.connections }, 5, "40 requests a connection")
        let accepted = try h.mock.logEntries().filter { $0["status"] as? Int == 200 }.compactMap { $0["apns_id"] as? String }
        XCTAssertEqual(accepted.count, 200, "every notification accepted exactly once")
    }

    /// A mock on three threads serves its connections on all of them, counts every thread's
    /// requests towards its faults, and logs each request once.
    func testAMockOnSeveralThreadsServesAndCountsAcrossThem() throws {
        let h = try ProtocolHarness(connections: 4, streams: 50) { config in
            config.threads = 3
            config.faults.goawayAfter = 100
        }
        let jobs = try (0..<1000).map { i in
            try h.job(
                #"{"token":"\#(ProtocolHarness.token(i))","apns_id":"\#(String(format: "00000000-0000-4000-8000-%012x", i))","payload":{"n":\#(i)}}"#)
        }
        h.send(jobs)
        XCTAssertEqual(Set(h.waitForOutcomes(1000).compactMap(\.deliveredID)).count, 1000)
        let stats = h.mock.server.stats.withLock { $0 }
        XCTAssertGreaterThanOrEqual(stats.goawaysSent, 9, "every 100th request of all threads")
        XCTAssertEqual(stats.requestsPerThread.count, 3)
        XCTAssertTrue(stats.requestsPerThread.allSatisfy { $0 > 0 }, "\(stats.requestsPerThread)")
        XCTAssertEqual(stats.requestsPerThread.reduce(0, +), stats.requests)
        let accepted = try h.mock.logEntries().filter { $0["status"] as? Int == 200 }.compactMap { $0["apns_id"] as? String }
        XCTAssertEqual(accepted.count, 1000, "every notification accepted and logged exactly once")
        XCTAssertEqual(Set(accepted).count, 1000)
        XCTAssertThrowsError(
            try MockServer(
                configuration: {
                    var c = h.mock.server.configuration; c.threads = 0; c.port = 0; return c
                }()))
    }

    func testDroppedConnectionsAreResent() throws {
        let h = try ProtocolHarness(connections: 1, streams: 20) { config in config.faults.dropAfter = 50 }
        h.send(try (0..<300).map { try h.job(#"{"token":"\#(ProtocolHarness.token($0))","payload":{"n":\#($0)}}"#) })
        let out = h.waitForOutcomes(300)
        XCTAssertEqual(out.filter { $0.deliveredID != nil }.count, 300)
        XCTAssertGreaterThan(h.mock.server.stats.withLock { $0.drops }, 0)
    }

    func testUnansweredRequestTimesOutAndIsSentAgain() throws {
        let slow = ProtocolHarness.token(7, prefix: "5105")
        let h = try ProtocolHarness(requestTimeoutMs: 300) { config in
            config.faults.tokens = [.init(token: slow, attempts: 1, delayMs: 5000)]
        }
        h.send([try h.job(#"{"token":"\#(slow)","payload":{"a":1}}"#)])
        let out = h.waitForOutcomes(1, timeout: 10)
        XCTAssertNotNil(out.first?.deliveredID)
        let tries = try h.mock.logEntries().filter { $0["token"] as? String == slow }
        XCTAssertEqual(tries.count, 2, "the first try went unanswered; the second was accepted")
    }

    func testRefusedCredentialsPauseTheAppAndProbeWithoutLosingTheJob() throws {
        let h = try ProtocolHarness(credentialPauseMs: 200)
        // Topic com.example.other is outside the mock key's topics: 403 InvalidProviderToken.
        // (The worker's fetcher would refuse it; this harness sends it as given.)
        h.send([try h.job(#"{"token":"\#(ProtocolHarness.token(4))","topic":"com.example.other","payload":{"a":1}}"#)])
        usleep(1_500_000)
        XCTAssertTrue(h.outcomes.isEmpty, "the job waits; it is not dead-lettered")
        let tries = try h.mock.logEntries().filter { $0["token"] as? String == ProtocolHarness.token(4) }
        XCTAssertGreaterThanOrEqual(tries.count, 2, "the paused app is probed again")
        XCTAssertLessThanOrEqual(tries.count, 5, "probes back off instead of hammering APNs")
        XCTAssertTrue(tries.allSatisfy { $0["reason"] as? String == "InvalidProviderToken" })
    }
}
