/// One try at sending: when, and what the provider said (status 0 = no answer).
public struct SendAttempt: Sendable, Equatable {
    public var timeMs: Int64
    public var status: Int
    public var reason: String?
    public init(timeMs: Int64, status: Int, reason: String?) {
        self.timeMs = timeMs
        self.status = status
        self.reason = reason
    }
}
