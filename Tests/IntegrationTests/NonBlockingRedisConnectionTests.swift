import Foundation
import RedisClient
import TestSupport
import XCTest

/// The non-blocking connection an I/O thread fetches on, driven with poll(2) as an event loop
/// drives it: replies arriving in pieces, groups in order, the handshake, errors.
final class NonBlockingRedisConnectionTests: XCTestCase {
    /// Replies of random shapes, arriving a few bytes at a time, come back group by group, each
    /// whole; a group's skipped replies are read and dropped.
    func testGroupsComeBackWholeAndInOrderAsRepliesArriveInPieces() throws {
        var random = RandomReplies()
        let first = random.array(of: 60), skipped = RandomReplies.integer(-7), second = random.array(of: 40)
        let directory = try TemporaryDirectory("apnsw-pipe")
        let port = freePort()
        let server = try FakeRedis.start(
            answering: first.resp + skipped.resp + second.resp, inPieces: true, port: port,
            log: directory.file("server.log"))
        defer { server.signal(SIGKILL); _ = server.wait(timeout: 5) }
        let pipe = try NonBlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port))
        try pipe.send([RedisArgs(["PING"])])
        try pipe.send([RedisArgs(["PING"]), RedisArgs(["PING"])], skipping: 1)
        var groups: [[String]] = []
        try pump(pipe, replies: 2) { reply in groups.append((0..<reply.count).map { RandomReplies.describe(reply, $0) }) }
        XCTAssertEqual(groups, [first.items, second.items])
        XCTAssertFalse(pipe.isWaiting)
    }

    /// Against a real Redis with a password: the handshake rides ahead of the first group, a
    /// wrong password is reported without the password, and an error among skipped replies
    /// is thrown.
    func testHandshakeAndErrorsAgainstARealRedis() throws {
        let password = "pipe-secret-7f3a"
        let redis = try TestRedis(dedicated: true, password: password)
        var endpoint = redis.endpoint
        let pipe = try NonBlockingRedisConnection(endpoint)
        try pipe.send([RedisArgs(["SET", "pipe:k", "v"]), RedisArgs(["GET", "pipe:k"])], skipping: 1)
        try pump(pipe, replies: 1) { reply in XCTAssertEqual(reply.bytes(0), Array("v".utf8)) }

        try pipe.send([RedisArgs(["SCRIPT", "LOAD", "return (("]), RedisArgs(["PING"])], skipping: 1)
        XCTAssertThrowsError(try pump(pipe, replies: 1) { _ in XCTFail("no reply after a failed skipped one") }) {
            XCTAssertTrue("\($0)".contains("Error compiling script"), "\($0)")
        }

        endpoint.password = "wrong"
        let refused = try NonBlockingRedisConnection(endpoint)
        try refused.send([RedisArgs(["PING"])])
        XCTAssertThrowsError(try pump(refused, replies: 1) { _ in XCTFail("no reply without authentication") }) {
            XCTAssertTrue("\($0)".contains("authentication to \(endpoint) failed"), "\($0)")
            XCTAssertFalse("\($0)".contains("wrong"), "the password stays out of the error")
        }
    }

    /// A transaction sent with commands after it: EXEC's reply is only scanned, and whether it
    /// ran (an array) or was aborted by a WATCHed key (nil) comes with the next replies; an error
    /// inside it is thrown. Without commands after it, EXEC's reply itself comes back.
    func testATransactionTellsWhetherItRanAndThrowsItsErrors() throws {
        let redis = try TestRedis()
        let key = "pipe-t\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let other = try redis.connect()
        defer { _ = try? other.command(["DEL", key, key + ":w"]) }
        let pipe = try NonBlockingRedisConnection(redis.endpoint)
        var t = RedisTransaction()
        t.append(RedisArgs(["RPUSH", key, "a"]))
        try pipe.send(&t, then: [RedisArgs(["LLEN", key])])
        try pump(pipe, replies: 1) { reply in
            XCTAssertTrue(reply.skippedArray, "EXEC ran")
            XCTAssertEqual(reply.integer(0), 1)
        }

        try pipe.send([RedisArgs(["WATCH", key + ":w"])])
        try pump(pipe, replies: 1) { _ in }
        _ = try other.command(["SET", key + ":w", "changed"])
        t.removeAll()
        t.append(RedisArgs(["RPUSH", key, "b"]))
        try pipe.send(&t, then: [RedisArgs(["LLEN", key])])
        try pump(pipe, replies: 1) { reply in
            XCTAssertFalse(reply.skippedArray, "a WATCHed key changed: EXEC answered nil")
            XCTAssertEqual(reply.integer(0), 1, "nothing ran")
        }

        t.removeAll()
        t.append(RedisArgs(["RPUSH", key, "c"]))
        try pipe.send(&t, then: [])
        try pump(pipe, replies: 1) { reply in
            XCTAssertTrue(reply.isArray(0), "EXEC's own reply")
            XCTAssertEqual(reply.integer(1), 2)
        }

        t.removeAll()
        t.append(RedisArgs(["INCR", key]))  // a list: fails when EXEC runs it
        try pipe.send(&t, then: [RedisArgs(["PING"])])
        XCTAssertThrowsError(try pump(pipe, replies: 1) { _ in XCTFail("the error comes first") }) {
            XCTAssertTrue("\($0)".contains("WRONGTYPE"), "\($0)")
        }
    }

    /// Nothing listening: the connect fails as an I/O error, whether at once or once polled.
    func testAConnectToNothingIsAnIOError() throws {
        XCTAssertThrowsError(
            try {
                let pipe = try NonBlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: freePort()))
                try pipe.send([RedisArgs(["PING"])])
                try pump(pipe, replies: 1) { _ in }
            }()
        ) { error in
            guard let e = error as? RedisError, e.code == .io else { return XCTFail("\(error)") }
        }
    }

    /// What an event loop does: waits with poll(2), writes when writable, reads when readable,
    /// and hands over each complete group.
    private func pump(_ pipe: NonBlockingRedisConnection, replies n: Int, timeout: Double = 10, _ take: (RedisFlatReply) -> Void) throws {
        var got = 0
        let deadline = Date(timeIntervalSinceNow: timeout)
        while got < n {
            guard Date() < deadline else { throw TestSupportError("no reply in \(timeout) s") }
            var p = pollfd(fd: pipe.fd, events: Int16(POLLIN) | (pipe.wantsWrite ? Int16(POLLOUT) : 0), revents: 0)
            _ = poll(&p, 1, 100)
            if p.revents & Int16(POLLOUT | POLLERR) != 0 { try pipe.writable() }
            if p.revents & Int16(POLLIN | POLLHUP) != 0 { try pipe.readable() }
            while got < n, let reply = try pipe.nextReply() {
                take(reply)
                got += 1
            }
        }
    }
}
