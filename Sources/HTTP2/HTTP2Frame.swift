import Buffers

/// HTTP/2's frame vocabulary (RFC 9113 §6, §11.2), and the byte layouts the client session
/// writes and reads.
enum HTTP2Frame {
    enum Kind: UInt8 {
        case data = 0, headers, priority, rstStream, settings, pushPromise, ping, goAway, windowUpdate, continuation
    }

    enum Flag {
        static let endStream: UInt8 = 0x1, ack: UInt8 = 0x1, endHeaders: UInt8 = 0x4, padded: UInt8 = 0x8, priority: UInt8 = 0x20
    }

    enum Setting: UInt16 {
        case headerTableSize = 1, enablePush, maxConcurrentStreams, initialWindowSize, maxFrameSize
    }

    /// The big-endian 32-bit number at `at`.
    static func uint32(_ bytes: UnsafeRawBufferPointer, _ at: Int) -> UInt32 {
        UInt32(bytes[at]) << 24 | UInt32(bytes[at + 1]) << 16 | UInt32(bytes[at + 2]) << 8 | UInt32(bytes[at + 3])
    }
}

extension ByteBuffer {
    /// A frame's nine-byte header: length (24 bits), type, flags, stream (31 bits).
    mutating func appendFrameHeader(length: Int, type: HTTP2Frame.Kind, flags: UInt8, stream: Int32) {
        var header: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (
                UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length),
                type.rawValue, flags, UInt8(truncatingIfNeeded: stream >> 24), UInt8(truncatingIfNeeded: stream >> 16),
                UInt8(truncatingIfNeeded: stream >> 8), UInt8(truncatingIfNeeded: stream)
            )
        withUnsafeBytes(of: &header) { append($0) }
    }

    /// Sets the length and flags of the frame header at `start`, once its payload is written.
    mutating func patchFrameHeader(at start: Int, length: Int, flags: UInt8) {
        self[start] = UInt8(truncatingIfNeeded: length >> 16)
        self[start + 1] = UInt8(truncatingIfNeeded: length >> 8)
        self[start + 2] = UInt8(truncatingIfNeeded: length)
        self[start + 4] = flags
    }

    mutating func appendUInt32(_ value: UInt32) {
        var big = value.bigEndian
        withUnsafeBytes(of: &big) { append($0) }
    }

    /// One SETTINGS entry: its id (16 bits) and value (32 bits).
    mutating func appendSetting(_ id: HTTP2Frame.Setting, _ value: UInt32) {
        var big = id.rawValue.bigEndian
        withUnsafeBytes(of: &big) { append($0) }
        appendUInt32(value)
    }
}

/// Whole frames as bytes, for a server that must misbehave (the mock's storms): written with
/// `HTTP2Connection.writeRaw`, past the session.
public enum RawFrame {
    public static func ping(ack: Bool) -> [UInt8] {
        var b = ByteBuffer(capacity: 17)
        b.appendFrameHeader(length: 8, type: .ping, flags: ack ? HTTP2Frame.Flag.ack : 0, stream: 0)
        b.appendUInt32(0)
        b.appendUInt32(0)
        return Array(b.bytes().assumingMemoryBound(to: UInt8.self))
    }

    /// PUSH_PROMISE with an empty header block, which a client that disabled push must refuse.
    public static func pushPromise(stream: Int32, promised: Int32) -> [UInt8] {
        var b = ByteBuffer(capacity: 13)
        b.appendFrameHeader(length: 4, type: .pushPromise, flags: HTTP2Frame.Flag.endHeaders, stream: stream)
        b.appendUInt32(UInt32(bitPattern: promised))
        return Array(b.bytes().assumingMemoryBound(to: UInt8.self))
    }
}
