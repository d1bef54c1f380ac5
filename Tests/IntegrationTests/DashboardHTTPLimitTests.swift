import Dashboard
import Foundation
import TestSupport
import XCTest

/// The dashboard's HTTP server against slow, oversized and malformed clients over real sockets:
/// each gets its status and is closed, and the server goes on serving.
final class DashboardHTTPLimitTests: XCTestCase {
    private var server: HTTPServer!

    override func setUpWithError() throws {
        var limits = HTTPLimits()
        limits.maxHeaderBytes = 4096
        limits.maxHeaders = 20
        limits.maxBodyBytes = 10_000
        limits.readTimeoutMs = 600
        limits.maxConnections = 4
        server = try HTTPServer(host: "127.0.0.1", port: 0, limits: limits) { request in
            HTTPResponse(status: 200, text: "\(request.method) \(request.path) \(request.body.count) bytes")
        }
        server.start()
    }

    override func tearDown() { server.stop() }

    /// A connected client socket with a 5 s read timeout.
    private func connect() throws -> Int32 {
        guard let fd = connectLoopback(port: server.port) else { throw NSError(domain: "connect", code: Int(errno)) }
        return fd
    }

    private func send(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Everything the server writes until it closes: the status and the body.
    private func readAll(_ fd: Int32) -> (status: Int, body: String) {
        var all = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            all += buf[0..<n]
        }
        close(fd)
        let text = String(decoding: all, as: UTF8.self)
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, text.components(separatedBy: "\r\n\r\n").dropFirst().joined())
    }

    private func exchange(_ request: String) throws -> (status: Int, body: String) {
        let fd = try connect()
        send(fd, request)
        return readAll(fd)
    }

    private func assertStillServing(file: StaticString = #filePath, line: UInt = #line) throws {
        let ok = try exchange("GET /still HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(ok.status, 200, file: file, line: line)
        XCTAssertEqual(ok.body, "GET /still 0 bytes\n", file: file, line: line)
    }

    func testAWholeRequestIsServedWithItsBodyArrivingInPieces() throws {
        let fd = try connect()
        send(fd, "POST /form?x=1 HTTP/1.1\r\nHost: x\r\nContent-")
        usleep(50_000)
        send(fd, "Length: 11\r\n\r\nhello")
        usleep(50_000)
        send(fd, " world")
        let answer = readAll(fd)
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.body, "POST /form 11 bytes\n")
    }

    func testASlowRequestIsCutOffWith408() throws {
        // A client that sends its head a byte at a time never finishes inside the read timeout.
        let fd = try connect()
        let started = Date()
        for c in "GET /slow HTTP/1.1\r\nHost: x\r\nX-Drip: ".map(String.init) {
            send(fd, c)
            usleep(20_000)
        }
        let answer = readAll(fd)
        XCTAssertEqual(answer.status, 408)
        XCTAssertLessThan(Date().timeIntervalSince(started), 3, "cut off near the 600 ms limit, not when the client stops")
        // A client that connects and says nothing is closed too, with nothing written.
        let silent = try connect()
        let quiet = readAll(silent)
        XCTAssertEqual(quiet.status, 0)
        try assertStillServing()
    }

    func testOversizedAndTooManyHeadersGet431() throws {
        let big = try exchange("GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 5000))\r\n\r\n")
        XCTAssertEqual(big.status, 431)
        XCTAssertTrue(big.body.contains("4096 bytes"), big.body)
        let many = try exchange("GET / HTTP/1.1\r\n" + (0..<25).map { "X-H\($0): v\r\n" }.joined() + "\r\n")
        XCTAssertEqual(many.status, 431)
        XCTAssertTrue(many.body.contains("more than 20 headers"), many.body)
        try assertStillServing()
    }

    func testABodyOverTheLimitGets413BeforeItIsRead() throws {
        let answer = try exchange("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n")
        XCTAssertEqual(answer.status, 413)
        XCTAssertEqual(try exchange("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").status, 411)
        try assertStillServing()
    }

    func testMalformedRequestsGet400() throws {
        let cases: [(String, Int)] = [
            ("HELLO\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nno colon here\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\nHost: x\r\nX-Bad: a\u{01}b\r\n\r\n", 400),
            ("get / HTTP/1.1\r\n\r\n", 400),
            ("GET relative HTTP/1.1\r\n\r\n", 400),
            ("GET / HTTP/2.0\r\n\r\n", 505),
            ("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
            ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
            ("GET / HTTP/1.1\r\n Folded: header\r\n\r\n", 400),
        ]
        for (request, status) in cases {
            XCTAssertEqual(try exchange(request).status, status, request.debugDescription)
        }
        try assertStillServing()
    }

    func testConnectionsOverTheLimitAreRefusedWith503AndTheServerRecovers() throws {
        let idle = try (0..<4).map { _ in try connect() }
        usleep(100_000)
        XCTAssertEqual(server.openConnections, 4)
        let refused = try exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        XCTAssertEqual(refused.status, 503)
        // The idle ones time out and are closed; then a new client is served.
        for fd in idle { XCTAssertEqual(readAll(fd).status, 0) }
        usleep(100_000)
        XCTAssertEqual(server.openConnections, 0)
        try assertStillServing()
    }
}
