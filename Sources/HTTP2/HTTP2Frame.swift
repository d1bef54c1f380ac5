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
