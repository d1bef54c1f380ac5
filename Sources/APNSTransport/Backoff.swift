/// Capped exponential backoff with jitter, as a value: each delay is drawn from the upper half of
/// its step (`ceiling/2...ceiling`), so delays spread out and still grow.
public struct Backoff: Sendable {
    public let baseMs: Int
    public let capMs: Int
    public private(set) var failures = 0

    public init(baseMs: Int, capMs: Int) {
        self.baseMs = baseMs
        self.capMs = capMs
    }

    /// The delay before the next try, after one more failure.
    public mutating func nextDelayMs<G: RandomNumberGenerator>(using rng: inout G) -> Int {
        failures += 1
        let ceiling = min(capMs, baseMs << min(failures - 1, 20))
        return Int.random(in: ceiling / 2...ceiling, using: &rng)
    }

    public mutating func nextDelayMs() -> Int {
        var g = SystemRandomNumberGenerator()
        return nextDelayMs(using: &g)
    }

    public mutating func reset() { failures = 0 }
}
