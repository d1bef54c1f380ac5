import Foundation
import HTTP2
import IOLoop
import Synchronization
import TLS
import TestSupport
import XCTest

/// Reaching a server: names looked up off the loop, addresses tried in turn, deadlines.
final class ConnectingTests: XCTestCase {
    /// While a name is being looked up, the loop goes on with its other work (here a timer), and
    /// the answer comes back on the loop's thread.
    func testALookupRunsOffTheLoopAndAnswersOnIt() throws {
        let loop = try EventLoop()
        let lookupOnLoop = Atomic<Bool>(true)
        let resolver = HostResolver { _, port throws(SystemError) in
            lookupOnLoop.store(loop.isCurrentThread, ordering: .relaxed)
            usleep(500_000)  // a slow DNS server
            return try Socket.addresses(of: "192.0.2.7", port: port)
        }
        var events: [String] = []
        var answer: [SocketAddress] = []
        var answeredOnLoop = false
        loop.schedule(afterMilliseconds: 0) {
            resolver.resolve("apns.test", port: 443, on: loop) { result in
                events.append("answer")
                answer = (try? result.get()) ?? []
                answeredOnLoop = loop.isCurrentThread
                loop.stop()
            }
            events.append("asked")
        }
        loop.schedule(afterMilliseconds: 50) { events.append("timer") }
        loop.schedule(afterMilliseconds: 10_000) { loop.stop() }
        loop.run()
        XCTAssertEqual(events, ["asked", "timer", "answer"], "the timer ran while the name was being looked up")
        XCTAssertEqual(answer.map(\.description), ["192.0.2.7"])
        XCTAssertTrue(answeredOnLoop)
        XCTAssertFalse(lookupOnLoop.load(ordering: .relaxed), "the lookup ran on another thread")
    }

    /// An address in numbers is answered within the call, with no lookup.
    func testNumbersNeedNoLookup() throws {
        let loop = try EventLoop()
        let lookups = Atomic<Int>(0)
        let resolver = HostResolver { _, _ throws(SystemError) in
            lookups.add(1, ordering: .relaxed)
            return []
        }
        var answers: [String] = []
        for host in ["127.0.0.1", "::1"] {
            resolver.resolve(host, port: 2197, on: loop) { answers += ((try? $0.get()) ?? []).map(\.description) }
        }
        XCTAssertEqual(answers, ["127.0.0.1", "::1"], "both answered before resolve returned")
        XCTAssertEqual(lookups.load(ordering: .relaxed), 0)
    }

    /// A lookup's failure comes back as the error, with the name in it.
    func testAFailedLookupAnswersItsError() throws {
        let loop = try EventLoop()
        let resolver = HostResolver { host, _ throws(SystemError) in
            throw SystemError(operation: "resolving \(host)", code: EHOSTUNREACH, reason: "no such host")
        }
        var message = ""
        loop.schedule(afterMilliseconds: 0) {
            resolver.resolve("nowhere.test", port: 443, on: loop) { result in
                if case .failure(let e) = result { message = e.description }
                loop.stop()
            }
        }
        loop.schedule(afterMilliseconds: 10_000) { loop.stop() }
        loop.run()
        XCTAssertEqual(message, "resolving nowhere.test: no such host")
    }

    /// A lookup's error says what the resolver answered, not an errno's text beside it.
    func testALookupErrorReadsAsTheResolversAnswer() {
        XCTAssertThrowsError(try Socket.addresses(of: "apns.test", port: 443, numericOnly: true)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.hasPrefix("resolving apns.test: "), text)
            XCTAssertFalse(text.contains(String(cString: strerror(EHOSTUNREACH))), text)
        }
    }

    /// An address that never takes the connect (its SYNs go unanswered) gives way to the next
    /// once its time is up, instead of waiting out the kernel's retries.
    func testAConnectWithNoAnswerMovesToTheNextAddress() throws {
        let mock = try MockFixture()
        let silent = try SilentListener()
        let loop = try EventLoop()
        let probe = Probe(loop)
        let started = Date()
        let c = try HTTP2Connection(
            connectingTo: Socket.addresses(of: "127.0.0.1", port: silent.port) + Socket.addresses(of: "127.0.0.1", port: mock.port),
            tls: TLSContext(clientWithCAFile: mock.files.caFile), serverName: "localhost", loop: loop, delegate: probe, timeoutMs: 300)
        loop.schedule(afterMilliseconds: 10_000) { loop.stop() }
        withExtendedLifetime(c) { loop.run() }
        XCTAssertTrue(probe.ready, "the second address answered: \(String(describing: probe.closedError))")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.3, "the first address had its 300 ms")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    /// A server that takes the connect but never answers the TLS handshake is given up on.
    func testAHandshakeWithNoAnswerIsGivenUp() throws {
        let listening = try Socket.listen(host: "127.0.0.1", port: 0)  // never accepted: the kernel takes the connect, nobody speaks TLS
        defer { close(listening.fd) }
        let loop = try EventLoop()
        let probe = Probe(loop)
        let c = try HTTP2Connection(
            connectingTo: Socket.addresses(of: "127.0.0.1", port: listening.port), tls: TLSContext(clientWithCAFile: nil),
            serverName: "apns.test", loop: loop, delegate: probe, timeoutMs: 300)
        loop.schedule(afterMilliseconds: 10_000) { loop.stop() }
        withExtendedLifetime(c) { loop.run() }
        XCTAssertFalse(probe.ready)
        XCTAssertTrue(String(describing: probe.closedError).contains("no answer in 300 ms"), String(describing: probe.closedError))
        // The address dialled, not only the TLS name (issue 28, item 2).
        XCTAssertTrue(String(describing: probe.closedError).contains("apns.test (127.0.0.1)"), String(describing: probe.closedError))
    }

    private final class Probe: ConnectionProbe {
        let loop: EventLoop
        var ready = false
        var closedError: Error?
        init(_ loop: EventLoop) { self.loop = loop }
        func connectionReady(_ c: HTTP2Connection) { ready = true; loop.stop() }
        func connectionClosed(_ c: HTTP2Connection, error: Error?) { closedError = error; loop.stop() }
    }
}

/// A listening socket whose queue of connections is full and never drained: Linux drops
/// further SYNs, so a connect to it stays pending, as one to a black-holed address does.
final class SilentListener {
    let fd: Int32
    let port: Int
    private let fillers: [Int32]

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard bound, listen(fd, 0) == 0 else { throw TestSupportError("cannot listen: errno \(errno)") }
        port = Int(UInt16(bigEndian: addr.sin_port))
        var fillers: [Int32] = []
        // A backlog of 0 holds one connection; the ones after it fill the SYN side.
        for _ in 0..<3 {
            let f = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = Glibc.connect(f, $0, len) } }
            fillers.append(f)
        }
        self.fillers = fillers
        usleep(100_000)
    }

    deinit {
        fillers.forEach { close($0) }
        close(fd)
    }
}
