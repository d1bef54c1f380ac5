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
        return Self.delayMs(afterFailures: failures, baseMs: baseMs, capMs: capMs, using: &rng)
    }

    /// The delay after the `failures`th failure in a row, for a caller that keeps the count.
    public static func delayMs<G: RandomNumberGenerator>(afterFailures failures: Int, baseMs: Int, capMs: Int, using rng: inout G) -> Int {
        let ceiling = min(capMs, baseMs << min(max(failures - 1, 0), 20))
        return Int.random(in: ceiling / 2...ceiling, using: &rng)
    }

    public mutating func nextDelayMs() -> Int {
        var g = SystemRandomNumberGenerator()
        return nextDelayMs(using: &g)
    }

    public mutating func reset() { failures = 0 }
}
