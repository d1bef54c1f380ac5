import APNSTransport
import XCTest

final class CircuitBreakerTests: XCTestCase {
    private func breaker() -> CircuitBreaker {
        CircuitBreaker(credentialPauseMs: 1000, transportPauseMs: 500, maxCredentialPauseMs: 8000, maxTransportPauseMs: 2000, probeTimeoutMs: 10_000)
    }

    func testAPauseEndsInOneProbeAndASuccessCloses() {
        var b = breaker()
        XCTAssertEqual(b.allowance(nowMs: 0), .max)
        XCTAssertEqual(b.failed(.credential, nowMs: 100, sentAtMs: 90), 1000, "the first refusal pauses for the configured time")
        XCTAssertEqual(b.allowance(nowMs: 1099), 0)
        XCTAssertEqual(b.allowance(nowMs: 1100), 1, "one probe once the pause is over")
        XCTAssertEqual(b.allowance(nowMs: 1101), 0, "and only one")
        XCTAssertEqual(b.allowance(nowMs: 1100 + 10_000), 1, "a probe lost with its connection is replaced")
        b.succeeded()
        XCTAssertEqual(b.allowance(nowMs: 11_200), .max, "the first success resumes at once")
    }

    /// Every request in flight comes back refused at once when a key is revoked: one outage,
    /// one pause (100 answers made a pause of 20 minutes, past the cap).
    func testAnswersToRequestsAlreadyInFlightChangeNothing() {
        var b = breaker()
        XCTAssertEqual(b.failed(.credential, nowMs: 100, sentAtMs: 50), 1000)
        for i in 0..<100 { XCTAssertNil(b.failed(.credential, nowMs: 100 + UInt64(i), sentAtMs: 60), "answer \(i)") }
        XCTAssertEqual(b.state, .open(untilMs: 1100))
        XCTAssertEqual(b.allowance(nowMs: 1100), 1)
        XCTAssertNil(b.failed(.credential, nowMs: 1150, sentAtMs: 99), "sent before the pause: not the probe")
        XCTAssertEqual(b.state, .probing(sinceMs: 1100))
    }

    func testEachFailedProbeDoublesThePauseUpToTheCap() {
        var b = breaker()
        var now: UInt64 = 0
        XCTAssertEqual(b.failed(.credential, nowMs: now, sentAtMs: now), 1000)
        var pauses: [Int] = []
        for _ in 0..<6 {
            guard case .open(let until) = b.state else { return XCTFail("\(b.state)") }
            now = until
            XCTAssertEqual(b.allowance(nowMs: now), 1)
            pauses.append(b.failed(.credential, nowMs: now + 20, sentAtMs: now) ?? -1)
            now += 20
        }
        XCTAssertEqual(pauses, [2000, 4000, 8000, 8000, 8000, 8000])
    }

    /// A credential refusal outranks trouble on the way: its pause replaces the shorter one.
    func testACredentialRefusalDuringATransportPauseTakesItsPlace() {
        var b = breaker()
        XCTAssertEqual(b.failed(.transport, nowMs: 0, sentAtMs: 0), 500)
        XCTAssertEqual(b.cause, .transport)
        XCTAssertNil(b.failed(.transport, nowMs: 10, sentAtMs: 0))
        XCTAssertEqual(b.failed(.credential, nowMs: 20, sentAtMs: 0), 1000)
        XCTAssertEqual(b.cause, .credential)
        XCTAssertNil(b.failed(.transport, nowMs: 30, sentAtMs: 25), "trouble on the way does not shorten a credential pause")
        XCTAssertEqual(b.state, .open(untilMs: 1020))
    }

    /// A probe refused for its credential after failed transport probes pauses for the
    /// credential's base, not for a pause doubled by the transport's failures (it was 8 minutes).
    func testACredentialRefusalOfATransportProbeStartsAtItsBase() {
        var b = breaker()
        var now: UInt64 = 0
        XCTAssertEqual(b.failed(.transport, nowMs: now, sentAtMs: now), 500)
        for _ in 0..<3 {
            guard case .open(let until) = b.state else { return XCTFail() }
            now = until
            XCTAssertEqual(b.allowance(nowMs: now), 1)
            XCTAssertNotNil(b.failed(.transport, nowMs: now, sentAtMs: now))
        }
        guard case .open(let until) = b.state else { return XCTFail() }
        XCTAssertEqual(b.allowance(nowMs: until), 1)
        XCTAssertEqual(b.failed(.credential, nowMs: until + 5, sentAtMs: until), 1000)
    }
}
