/// The apps a fetcher resolves jobs to, as a reload changes them. Loop thread.
extension Fetcher {
    /// How long a removed app's sends wait in the schedule before they are looked at again.
    static let parkedMs = 30_000

    /// Takes the apps after a reload (`AppRegistry.Snapshot`).
    func update(_ snapshot: AppRegistry.Snapshot) {
        router = AppRouter(apps: snapshot.apps, active: snapshot.active, removed: snapshot.removed)
    }
}
