import APNSCore
import Buffers
import Glibc

/// One request as the mock received it. A class, so that each header and body chunk is added in
/// place in the connection's stream table.
final class MockRequest {
    private(set) var stream: Int32
    /// Header names and values end to end as they arrived, then the body: one buffer, read in
    /// place. A String is made only for a value the validator keeps. 1 KB holds a request with a
    /// JWT and a payload of ordinary size.
    private var bytes = ByteBuffer(capacity: 1024)
    private var fields: [(name: Range<Int>, value: Range<Int>)] = []
    private var bodyRange = 0..<0

    init(stream: Int32, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.stream = stream
        fields.reserveCapacity(12)
        for h in headers { add(h.name, h.value) }
        body.withUnsafeBufferPointer { appendBody($0) }
    }

    /// Empties the request for another stream, keeping its buffers.
    func reuse(stream: Int32) {
        self.stream = stream
        bytes.removeAll()
        fields.removeAll(keepingCapacity: true)
        bodyRange = 0..<0
    }

    func add(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let start = bytes.count
        bytes.append(UnsafeRawBufferPointer(name))
        let middle = bytes.count
        bytes.append(UnsafeRawBufferPointer(value))
        fields.append((start..<middle, middle..<bytes.count))
    }

    func add(_ name: String, _ value: String) {
        name.withUTF8Bytes { n in value.withUTF8Bytes { v in add(name: n, value: v) } }
    }

    /// A chunk of the body. DATA frames come after the headers and before any trailers, so
    /// the body's chunks are adjacent.
    func appendBody(_ chunk: UnsafeBufferPointer<UInt8>) {
        if bodyRange.isEmpty { bodyRange = bytes.count..<bytes.count }
        bytes.append(UnsafeRawBufferPointer(chunk))
        bodyRange = bodyRange.lowerBound..<bytes.count
    }

    var bodyCount: Int { bodyRange.count }

    /// Lends the body's bytes to `body`.
    func withBody<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        withBytes { body(UnsafeBufferPointer(rebasing: $0[bodyRange])) }
    }

    /// A copy of the body (for the log).
    var body: [UInt8] { withBody { Array($0) } }

    /// The fields as text, in order (for the log).
    var headers: [(name: String, value: String)] {
        withBytes { all in
            fields.map { (String(decoding: all[$0.name], as: UTF8.self), String(decoding: all[$0.value], as: UTF8.self)) }
        }
    }

    private func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        body(bytes.bytes().assumingMemoryBound(to: UInt8.self))
    }

    /// Lends the first field named `name`'s value to `body` (nil when there is none).
    func withValue<R>(_ name: StaticString, _ body: (UnsafeBufferPointer<UInt8>?) -> R) -> R {
        withBytes { all in
            for f in fields where UnsafeBufferPointer(rebasing: all[f.name]).equals(name) {
                return body(UnsafeBufferPointer(rebasing: all[f.value]))
            }
            return body(nil)
        }
    }

    /// The first field named `name`'s value.
    func value(_ name: StaticString) -> String? {
        withValue(name) { $0.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Whether a field named `name` has the value `expected`.
    func value(_ name: StaticString, is expected: StaticString) -> Bool {
        withValue(name) { $0?.equals(expected) ?? false }
    }

    /// Whether a field named `name` has the value `expected` (false when either is missing).
    func value(_ name: StaticString, is expected: [UInt8]?) -> Bool {
        guard let expected else { return false }
        return withValue(name) { value in
            guard let value, value.count == expected.count else { return false }
            return value.isEmpty || expected.withUnsafeBytes { memcmp($0.baseAddress!, value.baseAddress!, value.count) == 0 }
        }
    }

    /// Some name comes twice. A dozen names at most: comparing pairs costs less than hashing them.
    var hasDuplicateNames: Bool {
        withBytes { all in
            for i in fields.indices {
                let a = UnsafeBufferPointer(rebasing: all[fields[i].name])
                for j in fields.indices
                where j > i && fields[j].name.count == a.count
                    && UnsafeBufferPointer(rebasing: all[fields[j].name]).elementsEqual(a)
                {
                    return true
                }
            }
            return false
        }
    }

    /// Lends the token's bytes from `/3/device/<token>` to `body` (nil for another path, or none).
    func withPathToken<R>(_ body: (UnsafeBufferPointer<UInt8>?) -> R) -> R {
        withValue(":path") { path in
            guard let path, path.count >= Self.devicePrefix.utf8CodeUnitCount,
                UnsafeBufferPointer(rebasing: path[..<Self.devicePrefix.utf8CodeUnitCount]).equals(Self.devicePrefix)
            else {
                return body(nil)
            }
            return body(UnsafeBufferPointer(rebasing: path[Self.devicePrefix.utf8CodeUnitCount...]))
        }
    }

    /// Whether `:path` starts with `prefix`.
    func pathStarts(with prefix: StaticString) -> Bool {
        withValue(":path") { path in
            guard let path, path.count >= prefix.utf8CodeUnitCount else { return false }
            return UnsafeBufferPointer(rebasing: path[..<prefix.utf8CodeUnitCount]).equals(prefix)
        }
    }

    /// The token from `/3/device/<token>`, or nil for another path.
    var pathToken: String? { withPathToken { $0.map { String(decoding: $0, as: UTF8.self) } } }

    private static let devicePrefix: StaticString = "/3/device/"
}

/// The mock's answer to one request.
struct MockDecision {
    var status: Int
    var reason: APNSReason?
    var timestamp: Int64?
    var delayMs: Int = 0
    /// A body sent as it is instead of the JSON reason (a fault).
    var rawBody: [UInt8]?
    /// The key id of a verified JWT, for the log.
    var keyID: String?
    /// The answer's id header: `apns-id`, or a broadcast's and channel request's `apns-request-id`.
    var idHeader = IDHeader.apnsID
    enum IDHeader { case apnsID, requestID, none }
    /// `rawBody` is JSON (FCM's answers), not a proxy's page.
    var rawIsJSON = false
    /// `retry-after`, in seconds.
    var retryAfterSeconds: Int?
    /// FCM: the message's target token (not in the path), and the name answered.
    var fcmToken: String?
    var messageName: String?
    /// The request's body stays out of the log (a token request's signed assertion).
    var hideBody = false
    /// A note for the log (validate_only).
    var fcmNote: String?
    /// A created channel's id, sent as `apns-channel-id`.
    var channelID: String?
    /// A JSON body for a success (a channel, the channel list).
    var body: [UInt8]?

    init(status: Int, reason: APNSReason? = nil, body: [UInt8]? = nil) {
        self.status = status
        self.reason = reason
        self.body = body
    }

    static func reject(_ status: Int, _ reason: APNSReason) -> MockDecision { MockDecision(status: status, reason: reason) }
    static let accepted = MockDecision(status: 200)
}
