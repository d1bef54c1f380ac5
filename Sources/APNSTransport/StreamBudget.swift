/// How many more requests one HTTP/2 connection may take: a value, testable without sockets.
///
/// The client session sends every request it is given, so we count against the peer's live
/// MAX_CONCURRENT_STREAMS ourselves. A token connection gets one stream until its first
/// success (apns-protocol.md §7.1).
public struct StreamBudget: Sendable, Equatable {
    /// Our own cap (configuration `streams`).
    public let localLimit: Int
    /// The server's latest SETTINGS_MAX_CONCURRENT_STREAMS (1 until SETTINGS arrive).
    public private(set) var remoteLimit: Int = 1
    public private(set) var authenticated: Bool
    public private(set) var open = 0
    /// After GOAWAY (either way) no stream may be opened.
    public private(set) var draining = false

    public init(localLimit: Int, needsFirstSuccess: Bool) {
        self.localLimit = localLimit
        authenticated = !needsFirstSuccess
    }

    public var limit: Int { draining ? 0 : min(localLimit, authenticated ? remoteLimit : 1) }
    public var available: Int { max(0, limit - open) }

    public mutating func settingsReceived(maxConcurrentStreams: Int) { remoteLimit = max(0, maxConcurrentStreams) }
    public mutating func opened() { open += 1 }
    public mutating func closed() { open = max(0, open - 1) }
    public mutating func succeeded() { authenticated = true }
    public mutating func goAway() { draining = true }
}
