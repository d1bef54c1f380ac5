/// The apps a fetcher resolves jobs to, as a reload changes them. Loop thread.
extension Fetcher {
    /// How long a removed app's sends wait in the schedule before they are looked at again.
    static let parkedMs = 30_000

    /// Takes the apps after a reload (`AppRegistry.Snapshot`).
    func update(_ snapshot: AppRegistry.Snapshot) {
        apps = snapshot.runtimes
        active = snapshot.active
        removed = snapshot.removed
        let live = apps.indices.filter { active[$0] }.map { apps[$0].name }
        isOneApp = live.allSatisfy { $0 == live.first }
    }

    /// The first runtime of the app `name` that takes jobs: its keys follow it (`byKey`).
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
}
