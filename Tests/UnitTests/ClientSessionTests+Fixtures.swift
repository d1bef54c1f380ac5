import APNSCore
import Buffers
import XCTest

@testable import HTTP2

/// The client session against nghttp2's server session in memory, and hand-written frames.
extension ClientSessionTests {
    /// Records what a session hands its delegate.
    final class Recorder: HTTP2SessionDelegate {
        var fields: [Int32: [(String, String)]] = [:]
        var bodies: [Int32: [UInt8]] = [:]
        var ended: [Int32] = []
        var closed: [(Int32, UInt32)] = []
        var goAways: [Int32] = []
        var pings = 0, pingAcks = 0, settings = 0, acks = 0
        var maxConcurrentStreams = 0

        func http2BeginStream(_ stream: Int32) { fields[stream] = [] }
        func http2Header(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
            fields[stream, default: []].append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        func http2Data(stream: Int32, bytes: UnsafeBufferPointer<UInt8>) { bodies[stream, default: []].append(contentsOf: bytes) }
        func http2EndStream(_ stream: Int32) { ended.append(stream) }
        func http2StreamClosed(_ stream: Int32, errorCode: HTTP2ErrorCode) { closed.append((stream, errorCode.rawValue)) }
        func http2RemoteSettings(maxConcurrentStreams: Int) {
            settings += 1
            self.maxConcurrentStreams = maxConcurrentStreams
        }
        func http2GoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) { goAways.append(lastStreamID) }
        func http2PingAck() { pingAcks += 1 }
        func http2PingReceived() { pings += 1 }
        func http2SettingsAcknowledged() { acks += 1 }
    }

    static let jwt =
        "eyJhbGciOiJFUzI1NiIsImtpZCI6IktFWTEyMzQ1NjcifQ." + String(repeating: "eyJpc3MiOiJURUFNMTIzNDU2IiwiaWF0IjoxNzY0NTQwMDAwfQ", count: 2)
        + "." + String(repeating: "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_", count: 2)

    /// The values a run of requests shares, kept in the list as the worker keeps them.
    struct Shared {
        let method, scheme, authority, authorization, pushType, topic: HeaderList.Kept
    }

    static func share(_ h: inout HeaderList, bearer: String = jwt) -> Shared {
        h.clearAll()
        return Shared(
            method: h.keep("POST"), scheme: h.keep("https"), authority: h.keep("localhost"), authorization: h.keep("bearer " + bearer),
            pushType: h.keep("alert"), topic: h.keep("com.example.app"))
    }

    /// A request as the worker writes one: shared values kept, the path and any id per request.
    static func request(_ h: inout HeaderList, _ s: Shared, token: String, apnsID: String? = nil, expiration: String? = nil) {
        h.clear()
        h.add(":method", kept: s.method)
        h.add(":scheme", kept: s.scheme)
        h.add(":path", "/3/device/" + token, sensitive: true)
        h.add(":authority", kept: s.authority)
        h.add("authorization", kept: s.authorization)
        h.add("apns-push-type", kept: s.pushType)
        h.add("apns-topic", kept: s.topic)
        if let expiration { h.add("apns-expiration", expiration) }
        if let apnsID { h.add("apns-id", apnsID, sensitive: true) }
    }

    static func drain(_ session: HTTP2Framing) throws -> [UInt8] {
        var out = ByteBuffer(capacity: 1024)
        try session.produce(into: &out, target: 1 << 30)
        return Array(out.bytes())
    }

    /// Moves bytes both ways until neither side has anything to send.
    static func pump(_ client: HTTP2ClientSession, _ server: HTTP2ServerSession) throws {
        for _ in 0..<50 {
            let up = try drain(client), down = try drain(server)
            if up.isEmpty && down.isEmpty { return }
            if !up.isEmpty { try up.withUnsafeBytes { try server.receive($0) } }
            if !down.isEmpty { try down.withUnsafeBytes { try client.receive($0) } }
        }
        XCTFail("the sessions kept talking")
    }

    /// Frames as (type, flags, stream, payload), read from bytes a client wrote after its preface.
    static func frames(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: Int32, payload: [UInt8])] {
        var out: [(UInt8, UInt8, Int32, [UInt8])] = [], at = 0
        while at + 9 <= bytes.count {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            let stream = Int32(bytes[at + 5] & 0x7F) << 24 | Int32(bytes[at + 6]) << 16 | Int32(bytes[at + 7]) << 8 | Int32(bytes[at + 8])
            out.append((bytes[at + 3], bytes[at + 4], stream, Array(bytes[(at + 9)..<(at + 9 + length)])))
            at += 9 + length
        }
        return out
    }

    static func frame(_ type: UInt8, _ flags: UInt8, _ stream: Int32, _ payload: [UInt8]) -> [UInt8] {
        [
            UInt8(payload.count >> 16), UInt8(payload.count >> 8 & 0xFF), UInt8(payload.count & 0xFF), type, flags,
            UInt8(stream >> 24), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF),
        ] + payload
    }

    static func settings(_ entries: [(UInt16, UInt32)]) -> [UInt8] {
        frame(
            4, 0, 0,
            entries.flatMap { id, v in
                [UInt8(id >> 8), UInt8(id & 0xFF), UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
            })
    }

    static func uint32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Opens a stream with a small request; returns its id.
    @discardableResult
    static func submitOne(_ client: HTTP2ClientSession) throws -> Int32 {
        var h = HeaderList()
        request(&h, share(&h), token: "abcd")
        return try [UInt8]("{}".utf8).withUnsafeBytes { try client.submitRequest(h, body: $0) }
    }

    /// A client and nghttp2's server, each through the other's SETTINGS, and what each hands
    /// its delegate.
    static func connected(maxConcurrentStreams: Int? = nil) throws -> (HTTP2ClientSession, HTTP2ServerSession, up: Recorder, down: Recorder) {
        let up = Recorder(), down = Recorder()
        let client = try HTTP2ClientSession(delegate: up)
        let server = try HTTP2ServerSession(delegate: down, maxConcurrentStreams: maxConcurrentStreams)
        try pump(client, server)
        return (client, server, up, down)
    }

    /// A client that has read `serverSettings` as the server's first frame, and what it wrote
    /// up to then taken off.
    static func settledClient(_ recorder: Recorder, serverSettings: [(UInt16, UInt32)] = []) throws -> HTTP2ClientSession {
        let client = try HTTP2ClientSession(delegate: recorder)
        _ = try drain(client)
        try settings(serverSettings).withUnsafeBytes { try client.receive($0) }
        _ = try drain(client)  // the ACK
        return client
    }
}
