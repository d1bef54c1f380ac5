import APNSCore
import QueueContract
import XCTest

@testable import Dashboard

/// The dashboard's pure parts: the charts' per-minute figures, escaping, forms, CSV.
final class DashboardUnitTests: XCTestCase {
    private func snap(_ seconds: Int64, _ delivered: Int64, failed: Int64 = 0, dead: Int64 = 0) -> CounterHistory.Snapshot {
        CounterHistory.Snapshot(slotMs: seconds * 1000, delivered: delivered, failed: failed, deadLettered: dead, retried: 0)
    }

    func testEachMinuteCountsWhatFinishedInItFromTheSnapshotBefore() {
        // Minute 0 starts at 600 s. The first snapshot is only a base; a reset counts from zero.
        let snapshots = [snap(590, 100), snap(600, 110), snap(650, 130, failed: 2), snap(660, 150, dead: 1), snap(720, 5)]
        let minutes = CounterHistory.minutes(snapshots, count: 3, nowMs: 725_000)
        XCTAssertEqual(minutes.map(\.startMs), [600_000, 660_000, 720_000])
        XCTAssertEqual(minutes.map(\.delivered), [30, 20, 5])
        XCTAssertEqual(minutes.map(\.failed), [2, 0, 0])
        XCTAssertEqual(minutes.map(\.deadLettered), [0, 1, 0])
    }

    func testSnapshotMembersParseAndShardsSumBySlot() {
        XCTAssertEqual(
            CounterHistory.Snapshot(member: "10000:5:1:2:3"),
            CounterHistory.Snapshot(slotMs: 10_000, delivered: 5, failed: 1, deadLettered: 2, retried: 3))
        XCTAssertNil(CounterHistory.Snapshot(member: "10000:5:x:2:3"))
        XCTAssertNil(CounterHistory.Snapshot(member: "10000:5"))
        let merged = CounterHistory.merge([[snap(10, 1), snap(20, 2)], [snap(10, 10), snap(30, 30)]])
        XCTAssertEqual(merged.map(\.slotMs), [10_000, 20_000, 30_000])
        XCTAssertEqual(merged.map(\.delivered), [11, 2, 30])
    }

    func testEverythingShownIsEscaped() {
        XCTAssertEqual(HTML.escape(#"<script>alert("x")</script> & 'y'"#), "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;")
        let table = HTML.table(["A"], [[e("<img src=x onerror=1>")]])
        XCTAssertFalse(table.contains("<img"))
    }

    /// Every header value is checked where the answer is written: one with CR, LF or NUL is
    /// never sent (issue 45, item 1).
    func testAnAnswerWithAnUnsafeHeaderIsNeverWritten() {
        for bad in ["/\r\nX-Injected: yes", "a\nb", "a\u{0}b", "a\u{7F}"] {
            let bytes = String(decoding: HTTPResponse.redirect(bad).bytes, as: UTF8.self)
            XCTAssertTrue(bytes.hasPrefix("HTTP/1.1 500 "), bad)
            XCTAssertFalse(bytes.contains("X-Injected"), bad)
        }
        let fine = String(decoding: HTTPResponse.redirect("/dead?reason=a\tb").bytes, as: UTF8.self)
        XCTAssertTrue(fine.hasPrefix("HTTP/1.1 303 ") && fine.contains("Location: /dead?reason=a\tb\r\n"), fine)
    }

    func testFormsAndQueriesDecode() {
        XCTAssertEqual(FormDecoding.fields("a=1&b=two+words&c=%3Cx%3E&d&a=again"), ["a": "1", "b": "two words", "c": "<x>", "d": ""])
        XCTAssertEqual(FormDecoding.decode("%zz%4", plusIsSpace: false), "%zz%4", "a malformed escape stays as it is")
        XCTAssertEqual(FormDecoding.encode("a b/ü"), "a%20b%2F%C3%BC")
        let request = HTTPRequest(method: "GET", target: "/dead%20x?reason=Bad+Token&app=", headers: [("cookie", "a=1; apnsw_session=abc")], body: [])
        XCTAssertEqual(request.path, "/dead x")
        XCTAssertEqual(request.query, ["reason": "Bad Token", "app": ""])
        XCTAssertEqual(request.cookie("apnsw_session"), "abc")
    }

    func testCSVQuotesAndDefusesFormulas() {
        XCTAssertEqual(FeedPages.csvCell("plain"), "plain")
        XCTAssertEqual(FeedPages.csvCell("a,b"), "\"a,b\"")
        XCTAssertEqual(FeedPages.csvCell("say \"hi\""), "\"say \"\"hi\"\"\"")
        XCTAssertEqual(FeedPages.csvCell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"")
        XCTAssertEqual(FeedPages.csvCell("@sum"), "'@sum")
    }

    func testBasicAuthNumbersAndClock() {
        XCTAssertEqual(Base64URL.decode("b3BzOnNlY3JldA==", standardAlphabet: true), Array("ops:secret".utf8))
        XCTAssertEqual(Base64URL.decode("Pz8/Pz4+", standardAlphabet: true), Array("????>>".utf8), "+ and / decode")
        XCTAssertNil(Base64URL.decode("b3B*", standardAlphabet: true))
        XCTAssertEqual(HTML.grouped(1_234_567), "1,234,567")
        XCTAssertEqual(HTML.clock(1_796_298_840_622), "2026-12-03 11:54:00")
    }
}
