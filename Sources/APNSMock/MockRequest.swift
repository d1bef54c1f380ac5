import APNSCore

/// One request as the mock received it. A class, so that each header and body chunk is added in
/// place in the connection's stream table.
final class MockRequest {
    let stream: Int32
    var headers: [(name: String, value: String)]
    var body: [UInt8]

    init(stream: Int32, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.stream = stream
        self.headers = headers
        self.headers.reserveCapacity(12)
        self.body = body
    }

    func value(_ name: String) -> String? { headers.first { $0.name == name }?.value }

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
