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
