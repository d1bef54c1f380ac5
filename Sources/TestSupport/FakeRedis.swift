import Foundation
import RedisClient

/// A server that speaks just enough RESP to test reply readers.
public enum FakeRedis {
    /// Answers every connection's first read with `answer`, then says nothing more; `inPieces`:
    /// a few bytes at a time, as a slow network would. Returns once it accepts connections.
    public static func start(answering answer: [UInt8], inPieces: Bool = false, port: Int, log: String) throws -> ChildProcess {
        let server = try ChildProcess(
            "/usr/bin/python3",
            [
                "-c",
                """
                import random, socket, sys, time
                data, pieces = bytes.fromhex(sys.argv[2]), sys.argv[3] == "1"
                s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(4)
                conns = []
                while True:
                    c, _ = s.accept(); conns.append(c)
                    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    if not c.recv(65536): continue # a probe that connected and left
                    i = 0
                    while i < len(data):
                        n = random.randint(1, 9) if pieces else len(data)
                        c.sendall(data[i:i + n]); i += n
                        if pieces: time.sleep(0.0002)
                """, String(port), answer.map { String(format: "%02x", $0) }.joined(), inPieces ? "1" : "0",
            ], outputFile: log)
        guard waitUntil(timeout: 10, { (try? BlockingRedisConnection(RedisEndpoint(host: "127.0.0.1", port: port), timeoutMs: 200)) != nil }) else {
            server.signal(SIGKILL)
            throw TestSupportError("the fake Redis on port \(port) did not start")
        }
        return server
    }
}

/// Replies of random shapes: strings holding CR LF and every byte, negative integers, nils,
/// nested arrays. The seed is fixed, so that a failure can be run again.
public struct RandomReplies {
    private indirect enum Element { case string([UInt8]), integer(Int64), null, array([Element]) }
    private var seed: UInt64 = 0x9E37_79B9_7F4A_7C15

    public init() {}

    /// One array reply of `elements` random elements, in RESP, and each of its items as a flat
    /// reading gives them back (`describe`).
    public mutating func array(of elements: Int) -> (resp: [UInt8], items: [String]) {
        let reply = Element.array((0..<elements).map { _ in element(depth: 1) })
        var bytes: [UInt8] = [], items: [String] = []
        Self.encode(reply, &bytes)
        Self.flatten(reply, &items)
        return (bytes, items)
    }

    /// An integer reply and its item.
    public static func integer(_ v: Int64) -> (resp: [UInt8], items: [String]) {
        var bytes: [UInt8] = [], items: [String] = []
        encode(.integer(v), &bytes)
        flatten(.integer(v), &items)
        return (bytes, items)
    }

    /// Item `i` of a flat reply as `array(of:)` lists it: array (with its count), integer, bytes, nil.
    public static func describe(_ reply: RedisFlatReply, _ i: Int) -> String {
        reply.isArray(i) ? "a\(reply.integer(i)!)" : reply.integer(i).map { "i\($0)" } ?? reply.bytes(i).map { "s\($0)" } ?? "-"
    }

    private mutating func next(_ n: Int) -> Int {
        seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int((seed >> 33) % UInt64(n))
    }

    private mutating func element(depth: Int) -> Element {
        switch next(depth < 3 ? 4 : 3) {
        case 0: return .string((0..<next(40)).map { _ in [13, 10, 36, 42, UInt8(next(256))][next(5)] })
        case 1: return .integer(Int64(next(2_000_000)) - 1_000_000)
        case 2: return .null
        default: return .array((0..<next(5)).map { _ in element(depth: depth + 1) })
        }
    }

    private static func encode(_ e: Element, _ out: inout [UInt8]) {
        switch e {
        case .string(let b): out += Array("$\(b.count)\r\n".utf8) + b + [13, 10]
        case .integer(let v): out += Array(":\(v)\r\n".utf8)
        case .null: out += Array("$-1\r\n".utf8)
        case .array(let items): out += Array("*\(items.count)\r\n".utf8); for i in items { encode(i, &out) }
        }
    }

    private static func flatten(_ e: Element, _ out: inout [String]) {
        switch e {
        case .string(let b): out.append("s\(b)")
        case .integer(let v): out.append("i\(v)")
        case .null: out.append("-")
        case .array(let items): out.append("a\(items.count)"); for i in items { flatten(i, &out) }
        }
    }
}
