/// Where request headers go: nghttp2's header list in production, an array in tests. Names are
/// lowercase literals, which live as long as the program: nghttp2 sends them without a copy.
public protocol HeaderSink {
    mutating func add(_ name: StaticString, _ value: String, sensitive: Bool)
    /// A value in two parts, so that the hot path builds no joined string.
    mutating func add(_ name: StaticString, _ prefix: String, _ value: String, sensitive: Bool)
    /// A value of a prefix and bytes (a token's digits), without building a String of them.
    mutating func add(_ name: StaticString, _ prefix: String, utf8 value: UnsafeBufferPointer<UInt8>, sensitive: Bool)
}

extension HeaderSink {
    public mutating func add(_ name: StaticString, _ prefix: String, _ value: String, sensitive: Bool) {
        add(name, prefix + value, sensitive: sensitive)
    }

    public mutating func add(_ name: StaticString, _ prefix: String, utf8 value: UnsafeBufferPointer<UInt8>, sensitive: Bool) {
        add(name, prefix, String(decoding: value, as: UTF8.self), sensitive: sensitive)
    }
}

/// The HTTP/2 headers of one device push (apns-protocol.md §2.1, §2.3).
public enum APNSRequestHeaders {
    /// Writes the request's headers. Values that change per request (`:path`, `apns-id`) are
    /// marked sensitive so they never enter the HPACK table. `authorization` is not marked, but
    /// nghttp2 never indexes it either: the JWT goes out as a literal in every request, as
    /// Apple's "Sending notification requests" page asks (§2.3), and is Huffman-coded each time.
    public static func write<S: HeaderSink>(job: Job, token: DeviceToken, topic: String, authority: String, bearer: String?, into sink: inout S) {
        sink.add(":method", "POST", sensitive: false)
        sink.add(":scheme", "https", sensitive: false)
        token.withHex { sink.add(":path", "/3/device/", utf8: $0, sensitive: true) }
        sink.add(":authority", authority, sensitive: false)
        if let bearer { sink.add("authorization", "bearer ", bearer, sensitive: false) }
        sink.add("apns-push-type", job.pushType.rawValue, sensitive: false)
        sink.add("apns-topic", topic, sensitive: false)
        if let p = job.priority { sink.add("apns-priority", String(p.value), sensitive: false) }
        if let e = job.expiration { sink.add("apns-expiration", String(e), sensitive: false) }
        if let c = job.collapseID { sink.add("apns-collapse-id", c, sensitive: false) }
        if let id = job.apnsID { sink.add("apns-id", id, sensitive: true) }
    }
}
