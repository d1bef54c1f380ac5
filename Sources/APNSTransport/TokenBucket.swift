/// A rate cap as a token bucket: `perSecond` requests a second, with a burst of a tenth of a
/// second's worth, so that no second carries much more than the cap. A value: tested alone.
public struct TokenBucket: Sendable {
    public let perSecond: Int
    private let burst: Double
    private var tokens: Double
    private var lastMs: UInt64

    public init(perSecond: Int, nowMs: UInt64) {
        self.perSecond = max(1, perSecond)
        burst = max(1, Double(self.perSecond) / 10)
        tokens = burst
        lastMs = nowMs
    }

    /// Whole requests that may go now.
    public mutating func available(nowMs: UInt64) -> Int {
        if nowMs > lastMs {
            tokens = min(burst, tokens + Double(nowMs - lastMs) * Double(perSecond) / 1000)
            lastMs = nowMs
        }
        return Int(tokens)
    }

    public mutating func take(_ n: Int) { tokens -= Double(n) }

    /// Milliseconds until one more request may go.
    public var msUntilNext: Int { tokens >= 1 ? 0 : Int(((1 - tokens) * 1000 / Double(perSecond)).rounded(.up)) }
}
