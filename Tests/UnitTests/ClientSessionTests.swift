import APNSCore
import Buffers
import XCTest

@testable import HTTP2

/// The client's own HTTP/2 session against nghttp2's server session (a real peer that checks
/// every frame and header block), in memory, and against frames written by hand for what
/// nghttp2's server never sends (small windows, padding, CONTINUATION, a smaller HPACK table).
final class ClientSessionTests: XCTestCase {
    func testRequestsReachNghttp2WithTheirFieldsAndSharedValuesGoAsIndexes() throws {
        let (client, server, up, down) = try Self.connected(maxConcurrentStreams: 100)
        XCTAssertEqual(up.settings, 1)
        XCTAssertEqual(up.maxConcurrentStreams, 100)

        var h = HeaderList()
        let shared = Self.share(&h)
        var sizes: [Int] = []
        let bodies = [Array(#"{"aps":{"alert":"one"}}"#.utf8), Array(#"{"aps":{"alert":"two"}}"#.utf8), Array(#"{"aps":{"alert":"three"}}"#.utf8)]
        for (i, body) in bodies.enumerated() {
            Self.request(
                &h, shared, token: String(repeating: "ab", count: 31) + String(format: "%02x", i),
                apnsID: i == 1 ? "123e4567-e89b-12d3-a456-426614174000" : nil, expiration: i == 2 ? "1700000000" : nil)
            let stream = try body.withUnsafeBytes { try client.submitRequest(h, body: $0) }
            XCTAssertEqual(stream, Int32(2 * i + 1))
            let written = Self.frames(try Self.drain(client))
            sizes.append(written.first { $0.type == 1 }!.payload.count)
            try written.flatMap { Self.frame($0.type, $0.flags, $0.stream, $0.payload) }.withUnsafeBytes { try server.receive($0) }
        }
        try Self.pump(client, server)
        for (i, body) in bodies.enumerated() {
            let stream = Int32(2 * i + 1)
            let fields = down.fields[stream] ?? []
            XCTAssertEqual(
                fields.map(\.0),
                [":method", ":scheme", ":path", ":authority", "authorization", "apns-push-type", "apns-topic"]
                    + (i == 2 ? ["apns-expiration"] : []) + (i == 1 ? ["apns-id"] : []))
            XCTAssertEqual(fields.first { $0.0 == "authorization" }?.1, "bearer " + Self.jwt)
            XCTAssertEqual(fields.first { $0.0 == ":path" }?.1, "/3/device/" + String(repeating: "ab", count: 31) + String(format: "%02x", i))
            XCTAssertEqual(down.bodies[stream], body)
            XCTAssertTrue(down.ended.contains(stream))
        }
        // The first request carries the token; the others name it by its index (the path, 74
        // bytes, is the largest part of them).
        XCTAssertGreaterThan(sizes[0], Self.jwt.utf8.count + 74)
        XCTAssertLessThan(sizes[1], 74 + 60)
        XCTAssertLessThan(sizes[2], 74 + 40)

        // A new token enters the table too, and decodes as itself.
        Self.request(&h, Self.share(&h, bearer: Self.jwt + "x"), token: String(repeating: "cd", count: 32))
        let fourth = try [UInt8]("{}".utf8).withUnsafeBytes { try client.submitRequest(h, body: $0) }
        try Self.pump(client, server)
        XCTAssertEqual(down.fields[fourth]?.first { $0.0 == "authorization" }?.1, "bearer " + Self.jwt + "x")

        // The answers come back to the client's delegate, and each stream closes once.
        var response = HeaderList()
        response.add(":status", "200")
        response.add("apns-id", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
        server.submitResponse(stream: 1, response, body: nil)
        var rejection = HeaderList()
        rejection.add(":status", "400")
        server.submitResponse(stream: 3, rejection, body: Array(#"{"reason":"BadDeviceToken"}"#.utf8))
        try Self.pump(client, server)
        XCTAssertEqual(up.fields[1]?.map(\.1), ["200", "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"])
        XCTAssertEqual(up.fields[3]?.first?.1, "400")
        XCTAssertEqual(up.bodies[3], Array(#"{"reason":"BadDeviceToken"}"#.utf8))
        XCTAssertEqual(up.ended, [1, 3])
        XCTAssertEqual(up.closed.map(\.0), [1, 3])
        XCTAssertEqual(up.closed.map(\.1), [0, 0])
    }

    /// A write carries every new request's HEADERS before any body (as nghttp2 orders them).
    func testAWriteCarriesHeadersBeforeBodies() throws {
        let client = try Self.settledClient(Recorder())
        for _ in 0..<3 { try Self.submitOne(client) }
        XCTAssertEqual(Self.frames(try Self.drain(client)).map(\.type), [1, 1, 1, 0, 0, 0])
    }

    /// A body waits for both windows, goes out in frames no larger than the server allows,
    /// and the rest follows each WINDOW_UPDATE.
    func testABodyWaitsForTheStreamAndConnectionWindows() throws {
        let up = Recorder()
        let client = try Self.settledClient(up, serverSettings: [(4, 10)])  // INITIAL_WINDOW_SIZE 10
        var h = HeaderList()
        Self.request(&h, Self.share(&h), token: "0123456789abcdef")
        let body = [UInt8](repeating: 0x61, count: 25)
        let stream = try body.withUnsafeBytes { try client.submitRequest(h, body: $0) }
        var data = Self.frames(try Self.drain(client)).filter { $0.type == 0 }
        XCTAssertEqual(data.map(\.payload.count), [10])
        XCTAssertEqual(data[0].flags & 1, 0)
        try (Self.frame(8, 0, stream, Self.uint32(100))).withUnsafeBytes { try client.receive($0) }
        data = Self.frames(try Self.drain(client)).filter { $0.type == 0 }
        XCTAssertEqual(data.map(\.payload.count), [15])
        XCTAssertEqual(data[0].flags & 1, 1, "the last frame ends the stream")

        // The connection's window (65,535 at first) holds a large body back too, and frames
        // stay within 16,384 bytes.
        let large = try Self.settledClient(up, serverSettings: [(4, 1 << 20)])
        let big = [UInt8](repeating: 0x62, count: 70_000)
        _ = try big.withUnsafeBytes { try large.submitRequest(h, body: $0) }
        data = Self.frames(try Self.drain(large)).filter { $0.type == 0 }
        XCTAssertEqual(data.map(\.payload.count), [16_384, 16_384, 16_384, 16_383])
        try (Self.frame(8, 0, 0, Self.uint32(10_000))).withUnsafeBytes { try large.receive($0) }
        data = Self.frames(try Self.drain(large)).filter { $0.type == 0 }
        XCTAssertEqual(data.map(\.payload.count), [4_465])
        XCTAssertEqual(data[0].flags & 1, 1)

        // A window lowered by SETTINGS holds back what would have fit (RFC 9113 §6.9.2).
        let lowered = try Self.settledClient(up, serverSettings: [(4, 100)])
        _ = try body.withUnsafeBytes { try lowered.submitRequest(h, body: $0) }
        _ = try Self.drain(lowered)
        try Self.settings([(4, 90)]).withUnsafeBytes { try lowered.receive($0) }
        let more = [UInt8](repeating: 0x63, count: 95)
        _ = try more.withUnsafeBytes { try lowered.submitRequest(h, body: $0) }
        data = Self.frames(try Self.drain(lowered)).filter { $0.type == 0 }
        XCTAssertEqual(data.map(\.payload.count), [90])
    }

    /// A server that wants a smaller HPACK table gets a size update first, and nothing larger
    /// than it allows is indexed; nghttp2 decodes every request the same.
    func testASmallerTableIsAnnouncedAndRespected() throws {
        let (client, server, _, down) = try Self.connected()
        var h = HeaderList()
        let shared = Self.share(&h)
        Self.request(&h, shared, token: "00ff")
        _ = try [UInt8]("{}".utf8).withUnsafeBytes { try client.submitRequest(h, body: $0) }
        try Self.pump(client, server)
        try Self.settings([(1, 200)]).withUnsafeBytes { try client.receive($0) }  // HEADER_TABLE_SIZE 200
        for token in ["11ff", "22ff", "33ff"] {
            Self.request(&h, shared, token: token)  // the same kept values: what the encoder remembers of them must be checked
            _ = try [UInt8]("{}".utf8).withUnsafeBytes { try client.submitRequest(h, body: $0) }
        }
        // The ACK of SETTINGS nghttp2 never sent would be an error to it: it stays out.
        let written = Self.frames(try Self.drain(client)).filter { !($0.type == 4 && $0.flags == 1) }
        let headers = written.filter { $0.type == 1 }
        XCTAssertEqual(headers[0].payload.first, 0x20 | 0x1F, "a size update starts the first block after the change")
        XCTAssertTrue(headers[1...].allSatisfy { $0.payload.count > Self.jwt.utf8.count }, "the token no longer fits the table")
        try written.flatMap { Self.frame($0.type, $0.flags, $0.stream, $0.payload) }.withUnsafeBytes { try server.receive($0) }
        try Self.pump(client, server)
        for stream: Int32 in [3, 5, 7] {
            XCTAssertEqual(down.fields[stream]?.first { $0.0 == "authorization" }?.1, "bearer " + Self.jwt)
            XCTAssertEqual(down.fields[stream]?.first { $0.0 == "apns-topic" }?.1, "com.example.app")
        }
    }

    /// A response split anywhere across reads, with padding and a CONTINUATION, arrives whole.
    func testAResponseArrivesWholeWhateverItsFramingAndReads() throws {
        let up = Recorder()
        let client = try Self.settledClient(up)
        let stream = try Self.submitOne(client)
        let id = Array("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee".utf8)
        // :status 400 (static index 12), then apns-id as a literal without indexing, new name.
        let block: [UInt8] = [0x8C, 0x00, 7] + Array("apns-id".utf8) + [UInt8(id.count)] + id
        let body = Array(#"{"reason":"BadDeviceToken"}"#.utf8)
        var bytes = Self.frame(1, 0x08, stream, [3] + block[..<5] + [0, 0, 0])  // PADDED, no END_HEADERS
        bytes += Self.frame(9, 0x04, stream, Array(block[5...]))  // CONTINUATION, END_HEADERS
        bytes += Self.frame(0, 0x09, stream, [2] + body + [0, 0])  // PADDED, END_STREAM
        bytes += Self.frame(6, 0, 0, [1, 2, 3, 4, 5, 6, 7, 8])  // PING
        for b in bytes { try [b].withUnsafeBytes { try client.receive($0) } }
        XCTAssertEqual(up.fields[stream]?.map(\.0), [":status", "apns-id"])
        XCTAssertEqual(up.fields[stream]?.map(\.1), ["400", String(decoding: id, as: UTF8.self)])
        XCTAssertEqual(up.bodies[stream], body)
        XCTAssertEqual(up.ended, [stream])
        XCTAssertEqual(up.closed.map(\.0), [stream])
        XCTAssertEqual(up.pings, 1)
        let written = Self.frames(try Self.drain(client))
        XCTAssertTrue(written.contains { $0.type == 6 && $0.flags == 1 && $0.payload == [1, 2, 3, 4, 5, 6, 7, 8] }, "the PING is answered")
    }

    /// Streams above GOAWAY's last are closed as refused (to be sent again), no new stream
    /// opens, and once the rest are answered the session wants nothing more.
    func testGoAwayRefusesTheStreamsAboveItsLast() throws {
        let up = Recorder()
        let client = try Self.settledClient(up)
        for _ in 0..<3 { try Self.submitOne(client) }
        _ = try Self.drain(client)
        try Self.frame(7, 0, 0, Self.uint32(3) + Self.uint32(0) + Array("bye".utf8)).withUnsafeBytes { try client.receive($0) }
        XCTAssertEqual(up.goAways, [3])
        XCTAssertEqual(up.closed.map(\.0), [5])
        XCTAssertEqual(up.closed.map(\.1), [7])
        XCTAssertThrowsError(try Self.submitOne(client))
        XCTAssertTrue(client.wantsRead)
        for s: Int32 in [1, 3] { try Self.frame(1, 0x05, s, [0x88]).withUnsafeBytes { try client.receive($0) } }  // :status 200, END_STREAM
        XCTAssertEqual(up.closed.map(\.0), [5, 1, 3])
        XCTAssertFalse(client.wantsRead)
    }

    /// The last stream id is used, then no request opens another: the client says GOAWAY and
    /// wants nothing more once its streams are answered.
    func testStreamIDsRunOutAtTheLastOne() throws {
        let up = Recorder()
        let client = try HTTP2ClientSession(delegate: up, firstStream: Int32.max - 2)
        _ = try Self.drain(client)
        try Self.settings([]).withUnsafeBytes { try client.receive($0) }
        XCTAssertEqual(try Self.submitOne(client), Int32.max - 2)
        XCTAssertTrue(client.canOpenStreams)
        XCTAssertEqual(try Self.submitOne(client), Int32.max)
        XCTAssertFalse(client.canOpenStreams)
        XCTAssertThrowsError(try Self.submitOne(client))
        client.goAway()
        XCTAssertTrue(Self.frames(try Self.drain(client)).contains { $0.type == 7 && $0.payload == Self.uint32(0) + Self.uint32(0) })
        XCTAssertTrue(client.wantsRead, "its streams are still open")
        for s in [Int32.max - 2, Int32.max] { try Self.frame(1, 0x05, s, [0x88]).withUnsafeBytes { try client.receive($0) } }
        XCTAssertEqual(up.closed.map(\.0), [Int32.max - 2, Int32.max])
        XCTAssertFalse(client.wantsRead)
    }

    /// A stream we reset is reported closed with our code once frames are produced, and its
    /// late answer is read (to keep the HPACK state) but not handed on.
    func testAResetStreamClosesOnceAndItsLateAnswerIsDropped() throws {
        let up = Recorder()
        let client = try Self.settledClient(up)
        let stream = try Self.submitOne(client)
        _ = try Self.drain(client)
        client.resetStream(stream, errorCode: .cancel)
        XCTAssertTrue(up.closed.isEmpty)
        let written = Self.frames(try Self.drain(client))
        XCTAssertTrue(written.contains { $0.type == 3 && $0.stream == stream && $0.payload == Self.uint32(8) })
        XCTAssertEqual(up.closed.map(\.1), [8])
        try Self.frame(1, 0x05, stream, [0x88]).withUnsafeBytes { try client.receive($0) }
        XCTAssertNil(up.fields[stream])
        XCTAssertEqual(up.closed.count, 1)
    }

    /// What breaks the protocol ends the connection with an error, not a crash.
    func testFramesThatBreakTheProtocolAreConnectionErrors() throws {
        let cases: [(String, [UInt8])] = [
            ("first frame not SETTINGS", Self.frame(6, 0, 0, [0, 0, 0, 0, 0, 0, 0, 0])),
            ("frame over 16,384 bytes", Self.settings([]) + Self.frame(0, 0, 1, [UInt8](repeating: 0, count: 16_385))),
            ("SETTINGS not in 6-byte entries", Self.frame(4, 0, 0, [0, 4, 0])),
            ("PUSH_PROMISE", Self.settings([]) + Self.frame(5, 0x04, 1, Self.uint32(2))),
            ("CONTINUATION without HEADERS", Self.settings([]) + Self.frame(9, 0x04, 1, [0x88])),
            ("a frame inside a header block", Self.settings([]) + Self.frame(1, 0, 1, [0x88]) + Self.frame(6, 0, 0, [0, 0, 0, 0, 0, 0, 0, 0])),
            ("a header block that does not decode", Self.settings([]) + Self.frame(1, 0x05, 1, [0xFF, 0xFF, 0xFF, 0xFF, 0x7F])),
            ("padding longer than the frame", Self.settings([]) + Self.frame(0, 0x08, 1, [9, 0, 0])),
            ("a zero connection WINDOW_UPDATE", Self.settings([]) + Self.frame(8, 0, 0, Self.uint32(0))),
            ("a window past 2^31-1", Self.settings([]) + Self.frame(8, 0, 0, Self.uint32(0x7FFF_FFFF))),
            (
                "a header block without end",
                Self.settings([]) + Self.frame(1, 0, 1, [0x88])
                    + (0..<5).flatMap { _ in Self.frame(9, 0, 1, [UInt8](repeating: 0x88, count: 16_000)) }
            ),
        ]
        for (what, bytes) in cases {
            let client = try HTTP2ClientSession(delegate: Recorder())
            try Self.submitOne(client)
            XCTAssertThrowsError(try bytes.withUnsafeBytes { try client.receive($0) }, what)
        }
    }

    /// A server that sends PINGs and reads nothing gets its answers queued up to a bound, then
    /// the connection ends (2,000,000 PINGs grew the worker from 22 to 147 MB).
    func testAnswersQueuedForAServerThatDoesNotReadAreBounded() throws {
        let client = try Self.settledClient(Recorder())
        let pings = (0..<2000).flatMap { _ in Self.frame(6, 0, 0, [UInt8](repeating: 1, count: 8)) }
        XCTAssertThrowsError(try pings.withUnsafeBytes { try client.receive($0) }) { error in
            XCTAssertEqual((error as? HTTP2ProtocolError)?.code, .enhanceYourCalm)
        }
        XCTAssertLessThan(client.pending.count, 1001 * 17 + 1024, "what waits for the server is bounded")
        // A server that reads gets every answer.
        let reading = try Self.settledClient(Recorder())
        for _ in 0..<3 {
            try Array(pings.prefix(500 * 17)).withUnsafeBytes { try reading.receive($0) }
            XCTAssertEqual(Self.frames(try Self.drain(reading)).filter { $0.type == 6 && $0.flags == 1 }.count, 500)
        }
    }

    /// RFC 9113: stream errors reset the stream and leave the connection up; frames on streams
    /// never opened and DATA past the window are errors; a connection error is told in GOAWAY.
    func testStreamAndConnectionErrorsAreAnsweredAsTheRFCAsks() throws {
        func session() throws -> (HTTP2ClientSession, Recorder, Int32) {
            let up = Recorder()
            let client = try Self.settledClient(up)
            let stream = try Self.submitOne(client)
            _ = try Self.drain(client)
            return (client, up, stream)
        }
        let streamErrors: [(String, (Int32) -> [UInt8], UInt32)] = [
            ("a WINDOW_UPDATE of 0 on a stream", { Self.frame(8, 0, $0, Self.uint32(0)) }, 1),
            ("a stream window past 2^31-1", { Self.frame(8, 0, $0, Self.uint32(0x7FFF_FFFF)) }, 3),
            ("PRIORITY of 4 bytes", { Self.frame(2, 0, $0, Self.uint32(0)) }, 6),
            ("DATA past the stream's window", { s in (0..<65).flatMap { _ in Self.frame(0, 0, s, [UInt8](repeating: 0, count: 16_384)) } }, 3),
        ]
        for (what, bytes, code) in streamErrors {
            let (client, up, stream) = try session()
            XCTAssertNoThrow(try bytes(stream).withUnsafeBytes { try client.receive($0) }, what)
            let written = Self.frames(try Self.drain(client))
            XCTAssertTrue(written.contains { $0.type == 3 && $0.stream == stream && $0.payload == Self.uint32(code) }, what)
            XCTAssertEqual(up.closed.map(\.1), [code], what)
            XCTAssertTrue(client.canOpenStreams, "\(what): the connection goes on")
        }
        let connectionErrors: [(String, (Int32) -> [UInt8])] = [
            ("DATA on a stream never opened", { Self.frame(0, 0, $0 + 2, [1]) }),
            ("HEADERS on a server's stream", { _ in Self.frame(1, 0x05, 2, [0x88]) }),
            ("RST_STREAM on a stream never opened", { Self.frame(3, 0, $0 + 40, Self.uint32(0)) }),
            ("WINDOW_UPDATE on a stream never opened", { Self.frame(8, 0, $0 + 2, Self.uint32(1)) }),
            ("PRIORITY on stream 0", { _ in Self.frame(2, 0, 0, [0, 0, 0, 0, 0]) }),
        ]
        for (what, bytes) in connectionErrors {
            let (client, _, stream) = try session()
            XCTAssertThrowsError(try bytes(stream).withUnsafeBytes { try client.receive($0) }, what) { error in
                XCTAssertEqual((error as? HTTP2ProtocolError)?.code, .protocolError, what)
                client.sayGoAway(after: error as! HTTP2ProtocolError)
            }
            let goAway = Self.frames(try Self.drain(client)).first { $0.type == 7 }
            XCTAssertEqual(goAway.map { Array($0.payload[4..<8]) }, Self.uint32(1), "\(what): GOAWAY carries PROTOCOL_ERROR")
        }
        // A frame on a stream that was opened and has closed is not an error.
        let (client, _, stream) = try session()
        try Self.frame(1, 0x05, stream, [0x88]).withUnsafeBytes { try client.receive($0) }
        XCTAssertNoThrow(try Self.frame(0, 0x01, stream, [1]).withUnsafeBytes { try client.receive($0) })
    }

    /// A GOAWAY the client says before the server's SETTINGS (its stream ids ran out on the
    /// first requests) leaves the server's first frame still bound to be SETTINGS.
    func testTheFirstFrameMustBeSettingsEvenAfterTheClientSaidGoAway() throws {
        let client = try HTTP2ClientSession(delegate: Recorder())
        try Self.submitOne(client)
        client.goAway()
        XCTAssertFalse(client.canOpenStreams)
        XCTAssertThrowsError(try Self.frame(6, 0, 0, [0, 0, 0, 0, 0, 0, 0, 0]).withUnsafeBytes { try client.receive($0) })
        let settled = try HTTP2ClientSession(delegate: Recorder())
        settled.goAway()
        try (Self.settings([]) + Self.frame(6, 0, 0, [0, 0, 0, 0, 0, 0, 0, 0])).withUnsafeBytes { try settled.receive($0) }
        XCTAssertFalse(settled.canOpenStreams, "SETTINGS after our GOAWAY open no streams")
    }

    /// Whatever a server sends, the session throws or goes on: 20,000 random frames (types,
    /// flags, streams, lengths and bytes drawn from a fixed seed), after SETTINGS and three
    /// requests, never crash it.
    func testRandomFramesNeverCrashTheSession() throws {
        var rng = SplitMix64(seed: 7)
        var errors = 0, sessions = 0, created = 0
        var client = try Self.settledClient(Recorder())
        for _ in 0..<20_000 {
            if sessions == 0 || rng.next() % 50 == 0 {
                client = try Self.settledClient(Recorder())
                for _ in 0..<3 { try Self.submitOne(client) }
                _ = try Self.drain(client)
                sessions += 1
                created += 1
            }
            let type = UInt8(rng.next() % 11), flags = UInt8(truncatingIfNeeded: rng.next())
            let stream = Int32(rng.next() % 8)
            let payload = (0..<Int(rng.next() % 48)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            do {
                try Self.frame(type, flags, stream, payload).withUnsafeBytes { try client.receive($0) }
                _ = try Self.drain(client)
            } catch {
                errors += 1
                sessions = 0
            }
        }
        XCTAssertGreaterThan(errors, 100, "broken frames are refused")
        XCTAssertGreaterThan(20_000 - errors, 2000, "and the rest are read")
        XCTAssertGreaterThan(created, 100)
    }

    /// The encoder's table against nghttp2's decoder over many requests: new tokens push old
    /// entries out, and every request still decodes to its own fields.
    func testTheTableStaysInStepWithTheDecoderAsEntriesAreEvicted() throws {
        let (client, server, _, down) = try Self.connected()
        var h = HeaderList()
        var shared = Self.share(&h)
        for i in 0..<120 {
            // A new token every 7 requests: 17 tokens of 250 bytes do not fit in 4,096.
            if i % 7 == 0 { shared = Self.share(&h, bearer: Self.jwt + String(i / 7)) }
            Self.request(&h, shared, token: String(format: "%08x", i), expiration: i % 3 == 0 ? String(i) : nil)
            _ = try [UInt8]("{}".utf8).withUnsafeBytes { try client.submitRequest(h, body: $0) }
            if i % 10 == 9 { try Self.pump(client, server) }
        }
        try Self.pump(client, server)
        XCTAssertEqual(down.fields.count, 120)
        for i in 0..<120 {
            let fields = down.fields[Int32(2 * i + 1)] ?? []
            XCTAssertEqual(fields.first { $0.0 == "authorization" }?.1, "bearer " + Self.jwt + String(i / 7), "request \(i)")
            XCTAssertEqual(fields.first { $0.0 == ":path" }?.1, "/3/device/" + String(format: "%08x", i))
            XCTAssertEqual(fields.first { $0.0 == "apns-expiration" }?.1, i % 3 == 0 ? String(i) : nil)
            XCTAssertEqual(fields.count, i % 3 == 0 ? 8 : 7)
        }
    }
}
