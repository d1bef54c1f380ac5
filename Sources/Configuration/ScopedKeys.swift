import APNSCore

/// APNs's two environments.
public enum APNSEnvironment: String, Sendable, CaseIterable {
    case production, development
}

/// What a token key may sign for (apns-protocol.md §6.1, February 2025): team keys limited to one
/// environment (or older keys, both), and topic-specific keys limited to some topics.
public struct KeyScope: Sendable, Equatable {
    /// nil: both environments (a key made before the change).
    public var environment: APNSEnvironment?
    /// nil: every topic of the team (a team key); else a topic key's bundle ids.
    public var topics: [String]?

    public init(environment: APNSEnvironment? = nil, topics: [String]? = nil) {
        self.environment = environment
        self.topics = topics
    }

    public var isTopicKey: Bool { topics != nil }

    /// A topic key covers its bundle ids and their push-type topics (`<bundle>.voip`, …), not
    /// every topic that starts with one: `<bundle>.clip` needs a key of its own.
    public func covers(topic: String) -> Bool {
        guard let topics else { return true }
        return topics.contains { PushType.isTopic(topic, ofBundle: $0) }
    }

    public func serves(_ environment: APNSEnvironment) -> Bool { self.environment.map { $0 == environment } ?? true }

    public var description: String {
        let env = environment?.rawValue ?? "both environments"
        return topics.map { "topic key for \($0.joined(separator: ", ")) (\(env))" } ?? "team key (\(env))"
    }
}

/// One of an app's token keys, from `"tokens": [...]`.
public struct ScopedKey: Sendable, Equatable {
    public var teamID: String, keyID: String, keyFile: String
    public var scope: KeyScope

    public init(teamID: String, keyID: String, keyFile: String, scope: KeyScope) {
        self.teamID = teamID
        self.keyID = keyID
        self.keyFile = keyFile
        self.scope = scope
    }
}

extension AppConfiguration {
    /// The app as the sender runs it: one app per key that serves its environment, each with its
    /// own JWT and pool (so a connection never mixes keys). An app of one credential is itself.
    public var byKey: [AppConfiguration] {
        guard !keys.isEmpty else { return [self] }
        return keys.filter { $0.scope.serves(environment) }.map { key in
            var one = self
            one.auth = .token(teamID: key.teamID, keyID: key.keyID, keyFile: key.keyFile)
            one.keyScope = key.scope
            one.keys = []
            return one
        }
    }

    /// The app with its first listed key as its credential, whatever its environment (checks).
    public var withFirstKey: AppConfiguration {
        var one = self
        if let k = keys.first { one.auth = .token(teamID: k.teamID, keyID: k.keyID, keyFile: k.keyFile) }
        return one
    }

    /// Whether this app's key may sign for `topic`.
    public func covers(topic: String) -> Bool { keyScope?.covers(topic: topic) ?? true }

    /// Which key serves which topic, and what serves nothing: check-config's report.
    public var keyReport: (lines: [String], warnings: [String]) {
        guard !keys.isEmpty else { return ([], []) }
        var lines: [String] = [], warnings: [String] = []
        for key in keys {
            if key.scope.serves(environment) {
                lines.append(
                    "app \(name): key \(key.keyID) serves \(key.scope.topics?.joined(separator: ", ") ?? "every topic") in \(environment.rawValue)")
            } else {
                warnings.append(
                    "app \(name): key \(key.keyID) is a \(key.scope.description): this app sends to \(environment.rawValue), so it is never used")
            }
            for topic in key.scope.topics ?? [] where !PushType.isTopic(topic, ofBundle: bundleID) {
                if topic.hasPrefix(bundleID + ".") {
                    // An App Clip or extension: jobs that name its topic go with this key.
                    lines.append("app \(name): key \(key.keyID) names \(topic), a bundle of its own: only jobs that name that topic use it")
                } else {
                    warnings.append("app \(name): key \(key.keyID) names topic \(topic), which is not a topic of bundle \(bundleID)")
                }
            }
        }
        let usable = byKey
        if !usable.contains(where: { $0.covers(topic: bundleID) }) {
            warnings.append(
                "app \(name): no key serves topic \(bundleID) in \(environment.rawValue): its jobs will be dead-lettered NoKeyForTopic")
        }
        return (lines, warnings)
    }

    /// Reads `"tokens": [{"team_id", "key_id", "key_file", "environment", "topics"}]`.
    static func scopedKeys(_ list: [Fields]) throws -> [ScopedKey] {
        try list.map { t in
            try t.rejectUnknown(["team_id", "key_id", "key_file", "environment", "topics"])
            guard let team = try t.string("team_id"), let kid = try t.string("key_id"), let file = try t.string("key_file") else {
                throw ConfigurationError("\(t.path) needs team_id, key_id and key_file")
            }
            var scope = KeyScope()
            if let env = try t.string("environment") {
                guard let known = APNSEnvironment(rawValue: env == "sandbox" ? "development" : env) else {
                    throw ConfigurationError("\(t.path).environment must be production or development (or left out for both), got \(env)")
                }
                scope.environment = known
            }
            if let topics = try t.strings("topics") {
                guard !topics.isEmpty else { throw ConfigurationError("\(t.path).topics must name at least one bundle id, or be left out") }
                scope.topics = topics
            }
            return ScopedKey(teamID: team, keyID: kid, keyFile: file, scope: scope)
        }
    }
}
