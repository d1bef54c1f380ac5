import APNSCore

/// One request as the mock received it. A class, so that each header and body chunk is added in
/// place in the connection's stream table.
final class MockRequest {
    let stream: Int32
    /// Header names and values end to end, as they arrived: a String is made only for a value the
    /// validator reads. Two Strings for each of a request's nine fields cost about a tenth of the
    /// mock's CPU per request (callgrind).
    private var fieldBytes: [UInt8] = []
    private var fields: [(name: Range<Int>, value: Range<Int>)] = []
    var body: [UInt8]

    init(stream: Int32, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.stream = stream
        fieldBytes.reserveCapacity(512)
        fields.reserveCapacity(12)
        self.body = body
        for h in headers { add(h.name, h.value) }
    }

    func add(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let start = fieldBytes.count
        fieldBytes.append(contentsOf: name)
        let middle = fieldBytes.count
        fieldBytes.append(contentsOf: value)
        fields.append((start..<middle, middle..<fieldBytes.count))
    }

    func add(_ name: String, _ value: String) {
        name.withUTF8Bytes { n in value.withUTF8Bytes { v in add(name: n, value: v) } }
    }

    /// The fields as text, in order (for the log).
    var headers: [(name: String, value: String)] {
        fields.map { (String(decoding: fieldBytes[$0.name], as: UTF8.self), String(decoding: fieldBytes[$0.value], as: UTF8.self)) }
    }

    /// The first field named `name`'s value.
    func value(_ name: StaticString) -> String? {
        let wanted = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        return fieldBytes.withUnsafeBufferPointer { bytes in
            for f in fields where f.name.count == wanted.count && UnsafeBufferPointer(rebasing: bytes[f.name]).elementsEqual(wanted) {
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[f.value]), as: UTF8.self)
            }
            return nil
        }
    }

    /// Some name comes twice. A dozen names at most: comparing pairs costs less than hashing them.
    var hasDuplicateNames: Bool {
        fieldBytes.withUnsafeBufferPointer { bytes in
            for i in fields.indices {
                let a = UnsafeBufferPointer(rebasing: bytes[fields[i].name])
                for j in fields.indices where j > i && fields[j].name.count == a.count
                    && UnsafeBufferPointer(rebasing: bytes[fields[j].name]).elementsEqual(a) {
                    return true
                }
            }
            return false
        }
    }

    /// The token from `/3/device/<token>`, or nil for another path.
    var pathToken: Substring? {
        guard let path = value(":path"), path.hasPrefix(Self.devicePrefix) else { return nil }
        // utf8 offsets: String.count would walk the characters.
        return Substring(path.utf8.dropFirst(Self.devicePrefix.utf8.count))
    }

    private static let devicePrefix = "/3/device/"
}

/// The mock's answer to one request.
struct MockDecision {
    var status: Int
    var reason: APNSReason?
    var timestamp: Int64?
    var delayMs: Int = 0
    /// The key id of a verified JWT, for the log.
    var keyID: String?

    static func reject(_ status: Int, _ reason: APNSReason) -> MockDecision { MockDecision(status: status, reason: reason) }
    static let accepted = MockDecision(status: 200)
}
