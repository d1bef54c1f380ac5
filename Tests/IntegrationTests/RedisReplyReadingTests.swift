import Foundation
import RedisClient
import TestSupport
import XCTest

/// Replies counted or read flat instead of built, against a real Redis.
final class RedisReplyReadingTests: XCTestCase {
    func testAScriptReplyReadFlatHasEveryElementInOrder() throws {
        let redis = try TestRedis()
        let r = try redis.connect()
        let script = RedisScript("return {7, ARGV[1], {8, 'inner'}, false, ''}")
        var args = RedisArgs(script: script, keys: [])
        args.append("outer")
        let items = try r.run(script, args) { (reply) throws(RedisError) in
            (0..<reply.count).map { i in
                reply.isArray(i)
                    ? "[\(reply.integer(i)!)]"
                    : reply.integer(i).map(String.init)
                        ?? reply.bytes(i).map { "'" + String(decoding: $0, as: UTF8.self) + "'" } ?? "nil"
            }
        }
        XCTAssertEqual(items, ["[5]", "7", "'outer'", "[2]", "8", "'inner'", "nil", "''"])
        let failing = RedisScript("return redis.error_reply('ERR made to fail')")
        XCTAssertThrowsError(try r.run(failing, RedisArgs(script: failing, keys: [])) { (_) throws(RedisError) in 0 }) {
            XCTAssertTrue("\($0)".contains("made to fail"), "\($0)")
        }
    }

    /// A flat reply many reads long (a fetch of a large batch) comes back whole, each string in
    /// place and in order, with the reply sent after it in the same write.
    func testAFlatReplyManyReadsLongComesBackWhole() throws {
        let redis = try TestRedis()
        let r = try redis.connect()
        let script = RedisScript("local t = {} for i = 1, 20000 do t[i] = string.rep(string.char(97 + i % 26), i % 300) end return t")
        let lengths = try r.run(script, RedisArgs(script: script, keys: []), then: RedisArgs(["ECHO", "after"])) { (reply) throws(RedisError) in
            let (bytes, ranges) = reply.sharedStrings(0..<reply.count)
            let strings = ranges.map { bytes[$0] }
            XCTAssertEqual(reply.integer(0), 20_000, "the array's element count")
            XCTAssertEqual(strings.last.map { String(decoding: $0, as: UTF8.self) }, "after")
            for (i, s) in strings.dropLast().enumerated() where !(s.count == (i + 1) % 300 && s.allSatisfy { $0 == UInt8(97 + (i + 1) % 26) }) {
                XCTFail("string \(i + 1) is wrong")
                break
            }
            return strings.count
        }
        XCTAssertEqual(lengths, 20_001)
    }

    /// Replies of random shapes (strings holding CR LF and every byte, negative integers, nils,
    /// nested arrays) that arrive a few bytes at a time are read flat as they were sent, and the
    /// reply after them starts where they end.
    func testRepliesArrivingInPiecesAreReadWhole() throws {
        var random = RandomReplies()
        let reply = random.array(of: 80), after = RandomReplies.integer(42)
        let bytes = reply.resp + after.resp, expected = reply.items + after.items

        let directory = try TemporaryDirectory("apnsw-pieces")
        let port = freePort()
        let server = try FakeRedis.start(answering: bytes, inPieces: true, port: port, log: directory.file("server.log"))
        defer { server.signal(SIGKILL); _ = server.wait(timeout: 5) }
        let r = try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 10_000)
        let items = try r.commands([RedisArgs(["PING"]), RedisArgs(["PING"])]) { (reply) throws(RedisError) in
            (0..<reply.count).map { RandomReplies.describe(reply, $0) }
        }
        XCTAssertEqual(items.count, expected.count)
        XCTAssertEqual(items, expected)
    }

    /// A reply cut short by a timeout is an I/O error, and the connection can then be dropped:
    /// hiredis must not be left holding a reply object that our readers never built.
    func testAReplyCutShortLeavesAConnectionThatCanBeDropped() throws {
        let directory = try TemporaryDirectory("apnsw-stall")
        let port = freePort()
        // The start of a two-element array.
        let server = try FakeRedis.start(answering: Array("*2\r\n:1\r\n".utf8), port: port, log: directory.file("server.log"))
        defer { server.signal(SIGKILL); _ = server.wait(timeout: 5) }
        let script = RedisScript("return 1")
        var flat: BlockingRedisConnection? = try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 200)
        XCTAssertThrowsError(try flat!.run(script, RedisArgs(script: script, keys: [])) { (_) throws(RedisError) in 0 }) {
            guard let e = $0 as? RedisError, e.isConnectionLost else { return XCTFail("\($0)") }
        }
        flat = nil
        var counted: BlockingRedisConnection? = try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 200)
        var t = RedisTransaction()
        var ping = RedisArgs()
        ping.append("PING")
        t.append(ping)
        XCTAssertThrowsError(try counted!.exec(&t))
        counted = nil
    }

    /// Bytes that are not RESP are a protocol error, thrown as an I/O error: the connection is
    /// dropped, never read on from a place that is not a reply's start.
    func testBytesThatAreNotRESPAreAnErrorOfTheConnection() throws {
        let directory = try TemporaryDirectory("apnsw-garbage")
        let port = freePort()
        let server = try FakeRedis.start(answering: Array("+OK\r\n*2\r\n:1\r\n!what\r\n".utf8), port: port, log: directory.file("server.log"))
        defer { server.signal(SIGKILL); _ = server.wait(timeout: 5) }
        let r = try BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 2000)
        var t = RedisTransaction()
        t.append(RedisArgs(["PING"]))
        XCTAssertThrowsError(try r.exec(&t)) {
            guard let e = $0 as? RedisError, e.code == .protocol, e.message.contains("Protocol error") else { return XCTFail("\($0)") }
        }
    }

    /// A command of 16 KB or more is written straight from its buffer, unless smaller ones are
    /// still queued in hiredis: either way the commands reach Redis, and answer, in order.
    func testLargeAndSmallCommandsMixedInOnePipelineKeepTheirOrder() throws {
        let redis = try TestRedis()
        let r = try redis.connect()
        let key = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max)):order"
        defer { _ = try? r.command(["DEL", key]) }
        let big = String(repeating: "x", count: 40_000)
        func push(_ value: String) -> RedisArgs { RedisArgs(["RPUSH", key, value]) }
        let counts = try r.commands([push("a"), push(big), push("b"), push(big), push("c")]) { (reply) throws(RedisError) in
            (0..<reply.count).compactMap { reply.integer($0) }
        }
        XCTAssertEqual(counts, [1, 2, 3, 4, 5])
        let lengths = try r.command(["LRANGE", key, "0", "-1"]).array.compactMap(\.text).map(\.count)
        XCTAssertEqual(lengths, [1, 40_000, 1, 40_000, 1])
        // A large command first, while nothing is queued, then a small one after it.
        let more = try r.commands([push(big), push("d")]) { (reply) throws(RedisError) in (0..<reply.count).compactMap { reply.integer($0) } }
        XCTAssertEqual(more, [6, 7])
    }

    func testATransactionRunsWholeUnlessAWatchedKeyChangedAndErrorsAreThrown() throws {
        let redis = try TestRedis()
        let a = try redis.connect(), b = try redis.connect()
        let list = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max)):list", watched = list + ":watched"
        defer { _ = try? a.command(["DEL", list, watched]) }
        func command(_ words: String...) -> RedisArgs { RedisArgs(words) }
        func items() throws -> [String] { try a.command(["LRANGE", list, "0", "-1"]).array.compactMap(\.text) }

        var t = RedisTransaction()
        t.append(command("RPUSH", list, "1"))
        t.append(prefix: command("RPUSH", list).prefix) { $0.append(UInt8(ascii: "2")) }
        XCTAssertEqual(t.count, 2)
        XCTAssertTrue(try a.exec(&t))
        XCTAssertEqual(try items(), ["1", "2"])

        _ = try a.command(["WATCH", watched])
        _ = try b.command(["SET", watched, "changed"])
        t.removeAll()
        t.append(command("RPUSH", list, "3"))
        XCTAssertFalse(try a.exec(&t), "a watched key changed: nothing runs")
        XCTAssertEqual(try items(), ["1", "2"])

        t.removeAll()
        t.append(command("RPUSH", list, "4"))
        t.append(command("INCR", list))  // WRONGTYPE when it runs
        XCTAssertThrowsError(try a.exec(&t)) { XCTAssertTrue("\($0)".contains("WRONGTYPE"), "\($0)") }
        XCTAssertEqual(try items(), ["1", "2", "4"], "Redis does not roll back what ran before the error")
        XCTAssertEqual(try a.command(["PING"]).text, "PONG", "the connection stays usable")
    }

    /// A transaction's replies are scanned in place: an EXEC reply many reads long, with
    /// nested arrays, nils, integers and strings in it, then the replies after it, all come out
    /// right; an error at queueing time aborts it and the connection stays usable.
    func testTransactionRepliesOfEveryKindAndSizeAreScannedWhole() throws {
        let redis = try TestRedis()
        let r = try redis.connect()
        let list = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max)):scanned", missing = list + ":missing"
        defer { _ = try? r.command(["DEL", list]) }
        var t = RedisTransaction()
        for i in 0..<30_000 {
            t.append(RedisArgs(["RPUSH", list, String(repeating: "v", count: i % 50)]))
            if i % 1000 == 0 {
                t.append(RedisArgs(["LRANGE", list, "0", "2"]))
                t.append(RedisArgs(["GET", missing]))
                t.append(RedisArgs(["LINDEX", list, "-1"]))
            }
        }
        let (ran, next) = try r.exec(&t, then: [RedisArgs(["LLEN", list]), RedisArgs(["GET", missing]), RedisArgs(["EXISTS", list])])
        XCTAssertTrue(ran)
        XCTAssertEqual(next, [30_000, nil, 1])
        XCTAssertEqual(try r.command(["LLEN", list]).integer, 30_000)

        t.removeAll()
        t.append(RedisArgs(["RPUSH", list, "x"]))
        t.append(RedisArgs(["NOSUCHCOMMAND", list]))
        XCTAssertThrowsError(try r.exec(&t)) { XCTAssertTrue("\($0)".contains("unknown command"), "\($0)") }
        XCTAssertEqual(try r.command(["LLEN", list]).integer, 30_000, "an aborted transaction runs nothing")
        XCTAssertEqual(try r.command(["PING"]).text, "PONG")
    }

    /// An argument written in place gets its length put in front afterwards: lengths of one to
    /// five digits (room is kept for three) all reach Redis whole, next to the other forms.
    func testArgumentsWrittenInPlaceReachRedisWholeWhateverTheirLength() throws {
        let redis = try TestRedis()
        let r = try redis.connect()
        let list = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max)):written"
        defer { _ = try? r.command(["DEL", list]) }
        let lengths = [0, 1, 9, 10, 99, 100, 101, 999, 1000, 1001, 9999, 10_000, 54_321]
        var t = RedisTransaction()
        let prefix = RedisArgs(["RPUSH", list]).prefix
        for (i, n) in lengths.enumerated() {
            t.append(prefix: prefix) { out in (0..<n).map { UInt8(ascii: "a") + UInt8(($0 + i) % 26) }.withUnsafeBytes { out.append($0) } }
            t.append(RedisArgs(["RPUSH", list, "-"]))  // each followed by a command written the usual way
        }
        XCTAssertEqual(t.count, 2 * lengths.count)
        XCTAssertTrue(try r.exec(&t))
        let items = try r.command(["LRANGE", list, "0", "-1"]).array.compactMap(\.text)
        let expected = lengths.enumerated().flatMap { i, n in
            [String(decoding: (0..<n).map { UInt8(ascii: "a") + UInt8(($0 + i) % 26) }, as: UTF8.self), "-"]
        }
        XCTAssertEqual(items, expected)
    }

    /// Replies are read into the reader's buffer up to 256 KiB at a time: one of several reads,
    /// and small replies queued behind it, come back whole and in order.
    func testRepliesLargerThanOneReadComeBackWhole() throws {
        let redis = try TestRedis()
        let r = try redis.connect()
        let key = "t\(getpid())-\(UInt32.random(in: 0...UInt32.max)):large"
        defer { _ = try? r.command(["DEL", key]) }
        let value = String((0..<1_300_000).map { Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8($0 % 26))) })
        _ = try r.command(["SET", key, value])
        let replies = try r.pipeline([["GET", key], ["STRLEN", key], ["GET", key]].map { $0.map { Array($0.utf8) } })
        XCTAssertEqual(replies.count, 3)
        XCTAssertTrue(replies[0].text == value && replies[2].text == value, "both copies whole")
        XCTAssertEqual(replies[1].integer, Int64(value.utf8.count))
        XCTAssertEqual(try r.command(["PING"]).text, "PONG")
    }
}
