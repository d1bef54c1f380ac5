/// Which outcomes get a record in the results stream (the `results` setting). Dead letters and
/// invalid tokens always get theirs, in their own streams, and every outcome is counted.
public enum ResultsMode: String, Sendable, CaseIterable {
    /// Every final outcome: deliveries and failures.
    case all
    /// Failures only (dead letters, invalid tokens, poison pills): no record per delivery.
    case failures
    /// None.
    case none

    /// Whether an outcome of this kind is written to the results stream.
    public func records(delivered: Bool) -> Bool { self == .all || (self == .failures && !delivered) }
}

/// How many entries each outcome stream keeps (`MAXLEN ~`): the `*_max` settings.
public struct RecordCaps: Sendable, Equatable {
    public var results: Int
    public var deadLetters: Int
    public var invalidTokens: Int

    public init(results: Int, deadLetters: Int, invalidTokens: Int) {
        self.results = results
        self.deadLetters = deadLetters
        self.invalidTokens = invalidTokens
    }
}
