/// The apps a fetcher resolves jobs to, as a reload changes them. Loop thread.
extension Fetcher {
    /// Takes the apps after a reload (`AppRegistry.Snapshot`).
    func update(_ snapshot: AppRegistry.Snapshot) {
        router = AppRouter(apps: snapshot.apps, active: snapshot.active, removed: snapshot.removed)
    }
}
