import APNSCore
import Configuration

/// Which of the worker's apps (and keys) a job goes with, and to which topic.
extension Fetcher {
    /// The app of a job that names none: the only one, or the one named "default".
    var defaultApp: String? { (isOneApp ? active.firstIndex(of: true) : firstActive(named: "default")).map { apps[$0].name } }

    /// The app a job names (or the only/default app) and the topic it goes to.
    func resolve(_ job: Job) throws(JobRejection) -> (Int, String) {
        let name = job.app ?? (isOneApp ? nil : "default")
        let index = name.map { firstActive(named: $0) ?? removedApp(named: $0) } ?? active.firstIndex(of: true)
        guard let first = index else {
            throw JobRejection(
                JobRejection.unknownApp,
                job.app.map { "no app named \"\($0)\" is configured (known: \(knownApps))" }
                    ?? "the job names no \"app\" and there is no app named \"default\"")
        }
        let bundle = apps[first].configuration.bundleID
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
        guard active[first], apps[first].configuration.keyScope != nil else { return (first, topic) }
        return (try key(for: topic, of: first), topic)
    }

    /// The app's key that serves `topic` in its environment (apns-protocol.md §6.1): a topic
    /// key for it before a team key; the app's active keys come at or after `first`.
    private func key(for topic: String, of first: Int) throws(JobRejection) -> Int {
        let name = apps[first].name
        let keys = apps.indices[first...].filter { apps[$0].name == name && active[$0] }
        let serving = keys.filter { apps[$0].configuration.covers(topic: topic) }
        guard let chosen = serving.first(where: { apps[$0].configuration.keyScope?.isTopicKey == true }) ?? serving.first else {
            throw JobRejection(
                JobRejection.noKeyForTopic,
                "app \(name) has no key for topic \(topic) in \(apps[first].configuration.environment.rawValue): add one to its \"tokens\"")
        }
        return chosen
    }
}
