import APNSCore
import Configuration

/// Which of the worker's apps (and keys) a job goes with, and to which topic (README "Apps",
/// apns-protocol.md §6.1). A value the fetcher keeps and a reload replaces; unit-tested without
/// Redis or APNs. Apps are numbered as `AppRegistry` orders its runtimes.
struct AppRouter {
    /// Each runtime's settings; `active` says which take new jobs.
    let apps: [AppConfiguration]
    let active: [Bool]
    /// Apps a reload removed: their jobs wait in the schedule.
    let removed: Set<String>
    /// One app configured (however many keys it has): jobs need not name it.
    let isOneApp: Bool
    /// Each runtime's app is an FCM app (read per job: a flag, not the app's settings copied).
    let isFCM: [Bool]

    init(apps: [AppConfiguration], active: [Bool]? = nil, removed: Set<String> = []) {
        let active = active ?? apps.map { _ in true }
        let live = apps.indices.filter { active[$0] }.map { apps[$0].name }
        self.apps = apps
        self.active = active
        self.removed = removed
        isFCM = apps.map(\.auth.isFCM)
        isOneApp = live.allSatisfy { $0 == live.first }
    }

    /// How long a send of a retired runtime (its app removed or changed by a reload) waits in
    /// the schedule before it is looked at again: 30 s plus 0-5 s.
    static func parkingMs<G: RandomNumberGenerator>(using rng: inout G) -> Int { 30_000 + Int.random(in: 0...5000, using: &rng) }

    /// The app of a job that names none: the only one, or the one named "default".
    var defaultApp: String? { (isOneApp ? active.firstIndex(of: true) : firstActive(named: "default")).map { apps[$0].name } }

    /// The first runtime of the app `name` that takes jobs: its keys follow it.
    func firstActive(named name: String) -> Int? {
        apps.indices.first { active[$0] && apps[$0].name == name }
    }

    /// A runtime of an app that a reload removed, for its jobs to wait under.
    func removedApp(named name: String) -> Int? {
        removed.contains(name) ? apps.lastIndex { $0.name == name } : nil
    }

    var knownApps: String {
        var seen = Set<String>()
        return apps.indices.filter { active[$0] && seen.insert(apps[$0].name).inserted }.map { apps[$0].name }.joined(separator: ", ")
    }

    /// The app (runtime) a job names, or the only or default app, and the topic it goes to.
    func resolve(_ job: Job) throws(JobRejection) -> (app: Int, topic: String) {
        let name = job.app ?? (isOneApp ? nil : "default")
        let index = name.map { firstActive(named: $0) ?? removedApp(named: $0) } ?? active.firstIndex(of: true)
        guard let first = index else {
            throw JobRejection(
                JobRejection.unknownApp,
                job.app.map { "no app named \"\($0)\" is configured (known: \(knownApps))" }
                    ?? "the job names no \"app\" and there is no app named \"default\"")
        }
        if isFCM[first] { return try fcmTarget(job, app: first) }
        guard job.condition == nil else {
            throw JobRejection(JobRejection.wrongType, "\"condition\" is an FCM target; app \(apps[first].name) is an APNs app")
        }
        guard !job.token.isAbsent || job.isBroadcast else { throw JobRejection(.missingDeviceToken, "the job has no \"token\" (or an empty one)") }
        try DeviceToken.requireHex(job)
        let bundle = apps[first].bundleID
        let topic: String
        if job.isBroadcast {
            topic = bundle  // the path names the bundle; APNs takes no topic
        } else if let named = job.topic {
            // A topic the push type derives from the bundle is the app's; one the job names must
            // be the bundle or start with it and a dot.
            guard named == bundle || named.hasPrefix(bundle + ".") else {
                throw JobRejection(.topicDisallowed, "topic \"\(named)\" is not a topic of app \(apps[first].name) (bundle \(bundle))")
            }
            topic = named
        } else {
            topic = job.pushType.topic(forBundle: bundle)
        }
        guard active[first], apps[first].keyScope != nil else { return (first, topic) }
        return (try key(for: topic, of: first), topic)
    }

    /// An FCM job's one target: its tokens, its topic (its records' topic) or its condition.
    private func fcmTarget(_ job: Job, app: Int) throws(JobRejection) -> (app: Int, topic: String) {
        let targets = (job.token.isAbsent ? 0 : 1) + (job.topic != nil ? 1 : 0) + (job.condition != nil ? 1 : 0)
        guard !job.isBroadcast, targets == 1 else {
            throw JobRejection(
                JobRejection.wrongType,
                "an FCM job names one target: \"token\" or \"tokens\", \"topic\" (an FCM topic) or \"condition\"; \"channel\" is APNs's")
        }
        if let topic = job.topic {
            guard !topic.isEmpty, !topic.hasPrefix("/topics/"), topic.utf8.allSatisfy(Self.isTopicByte) else {
                throw JobRejection(JobRejection.wrongType, "an FCM topic is letters, digits and -_.~% without /topics/, got \"\(topic)\"")
            }
            return (app, topic)
        }
        return (app, "")
    }

    private static func isTopicByte(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || "-_.~%".utf8.contains(b)
    }

    /// The app's key that serves `topic` in its environment: a topic key for it before a team
    /// key; the app's active keys come at or after `first`.
    private func key(for topic: String, of first: Int) throws(JobRejection) -> Int {
        let name = apps[first].name
        let keys = apps.indices[first...].filter { apps[$0].name == name && active[$0] }
        let serving = keys.filter { apps[$0].covers(topic: topic) }
        guard let chosen = serving.first(where: { apps[$0].keyScope?.isTopicKey == true }) ?? serving.first else {
            throw JobRejection(
                JobRejection.noKeyForTopic,
                "app \(name) has no key for topic \(topic) in \(apps[first].environment.rawValue): add one to its \"tokens\"")
        }
        return chosen
    }
}

/// Which of a job's tokens a fetch sends, and into how many pieces the job is cut.
enum FanOut: Equatable {
    /// One send: the token a retried piece carries, or the job's only one.
    case one(DeviceToken)
    /// Every token of the job (its first, then the others): `count` pieces.
    case every(count: Int)
    /// A job taken back part way: the tokens without a result yet, each a piece of them all.
    case left([DeviceToken])

    /// `retried`: the token a retried piece's envelope carries; `done`: the tokens (hex) a
    /// take-back found recorded.
    static func plan(_ job: Job, retried: DeviceToken?, done: [String]) -> FanOut {
        if let retried { return .one(retried) }
        if job.otherTokens.isEmpty { return .one(job.token) }
        guard !done.isEmpty else { return .every(count: job.tokenCount) }
        let finished = Set(done)
        let left = job.tokens.filter { !finished.contains($0.hex) }
        // Its ack was lost with its last result: one more send acks it.
        return .left(left.isEmpty ? [job.token] : left)
    }
}
