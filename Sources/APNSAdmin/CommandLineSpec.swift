/// What each apnsctl command takes: its flags, and how many words follow its name. Anything else
/// is a usage error (exit 2), so that a misspelt filter never widens what a command touches.
public enum CommandLineSpec {
    /// Flags every command takes.
    public static let global: Set<String> = ["config", "redis", "db", "queue", "shards", "json", "help", "version"]
    /// Flags that take no value.
    public static let booleans: Set<String> = ["json", "all", "edit", "help", "progress", "yes", "dry-run", "version", "read-only", "online"]
    private static let filters: Set<String> = ["all", "reason", "app", "older-than", "newer-than"]

    public static let commands: [String: (flags: Set<String>, words: ClosedRange<Int>)] = [
        "enqueue": (
            [
                "token", "app", "id", "push-type", "priority", "topic", "collapse-id", "idempotency-key", "expiration", "send-at", "payload", "title",
                "body",
                "badge", "sound", "template", "locale", "data", "file", "progress",
            ], 0...0
        ),
        "stats": ([], 0...0),
        "queues": ([], 0...0),
        "dead list": (["reason", "app", "older-than", "newer-than", "limit"], 0...0),
        "dead show": ([], 1...1),
        "dead requeue": (filters.union(["edit", "replace", "yes", "dry-run"]), 0...Int.max),
        "dead purge": (filters.union(["yes", "dry-run"]), 0...Int.max),
        "tokens invalid": (["app", "since", "limit"], 0...0),
        "channels create": (["app", "storage"], 0...0),
        "channels list": (["app"], 0...0),
        "channels show": (["app"], 1...1),
        "channels delete": (["app"], 1...1),
        "channels invalid": (["app", "since", "limit"], 0...0),
        "check-config": (["online"], 0...0),
        "web": (["listen", "auth-file", "read-only"], 0...0),
    ]

    /// The command `words` start with (one word or two), and how many words follow it.
    public static func command(_ words: [String]) -> (name: String, rest: Int)? {
        if words.count >= 2, commands[words[0] + " " + words[1]] != nil { return (words[0] + " " + words[1], words.count - 2) }
        if let first = words.first, commands[first] != nil { return (first, words.count - 1) }
        return nil
    }

    /// Checks the flags and words a command was given.
    public static func check(command name: String, flags: some Sequence<String>, rest: Int) throws(AdminError) {
        guard let spec = commands[name] else { throw .usage("unknown command \"\(name)\"") }
        for flag in flags where !global.contains(flag) && !spec.flags.contains(flag) {
            let takes = spec.flags.sorted().map { "--" + $0 }.joined(separator: ", ")
            throw .usage("\(name) has no flag --\(flag)" + (takes.isEmpty ? " (it takes none of its own)" : " (it takes \(takes))"))
        }
        guard spec.words.contains(rest) else {
            let wanted = spec.words.upperBound == 0 ? "no words" : "\(spec.words.lowerBound) word\(spec.words.lowerBound == 1 ? "" : "s")"
            throw .usage("\(name) takes \(wanted) after it, not \(rest)")
        }
    }
}
