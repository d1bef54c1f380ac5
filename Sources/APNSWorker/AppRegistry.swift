import APNSCore
import APNSTransport
import Configuration
import Delivery
import FCMTransport
import FoundationEssentials
import Synchronization

/// The apps a worker sends with, as runtimes (one per app and key, `AppConfiguration.byKey`),
/// re-read on a reload. Runtimes are only ever appended: a request names its app by index, and
/// the index stays valid while the request lives; a removed or changed app's runtimes are
/// retired, and their pools drain.
final class AppRegistry: Sendable {
    /// What the fetchers and senders work from after a reload.
    struct Snapshot: Sendable {
        let runtimes: [AppRuntime]
        /// Each runtime's app as configured (same index): what the router reads.
        let apps: [AppConfiguration]
        /// Runtimes new jobs may take; a retired one only finishes what it holds.
        let active: [Bool]
        /// Apps configured once in this process and no more: their jobs wait in the schedule.
        let removed: Set<String>
    }

    /// What a reload changed, by app name.
    struct Change: Equatable {
        var added: [String] = [], changed: [String] = [], removed: [String] = []
        var isEmpty: Bool { added.isEmpty && changed.isEmpty && removed.isEmpty }
    }

    private struct State {
        var snapshot: Snapshot
        /// Each configured app's settings and credential bytes, to tell a changed app.
        var fingerprints: [String: [UInt8]]
        /// One JWT per (team, key, key bytes), one access token per service account (its file's
        /// bytes): apps of one key share it; a rotated file gets a new one.
        var providers: [String: BearerCredential]
        /// The credential files the apps name, for a watch to look at.
        var files: [String] = []
    }

    private let state: Mutex<State>
    private let refreshAfterSeconds: Int64, minimumAgeSeconds: Int64

    init(configuration: WorkerConfiguration) throws {
        refreshAfterSeconds = Int64(configuration.tokenRefreshSeconds)
        minimumAgeSeconds = Int64(configuration.tokenMinRefreshSeconds)
        state = Mutex(State(snapshot: Snapshot(runtimes: [], apps: [], active: [], removed: []), fingerprints: [:], providers: [:]))
        _ = try reload(configuration.apps)
    }

    var snapshot: Snapshot { state.withLock { $0.snapshot } }
    var credentialFiles: [String] { state.withLock { $0.files } }

    /// Makes the runtimes of the apps that are new or changed and retires those of the apps
    /// changed or gone. Throws, changing nothing, if a credential cannot be loaded.
    func reload(_ apps: [AppConfiguration]) throws -> (Snapshot, Change) {
        try state.withLock { s throws -> (Snapshot, Change) in
            var change = Change()
            var runtimes = s.snapshot.runtimes, configured = s.snapshot.apps, active = s.snapshot.active
            var fingerprints: [String: [UInt8]] = [:], providers = s.providers
            for app in apps {
                let print = Self.fingerprint(app)
                fingerprints[app.name] = print
                if let old = s.fingerprints[app.name] {
                    guard old != print else { continue }
                    change.changed.append(app.name)
                } else {
                    change.added.append(app.name)
                }
                for one in app.byKey {
                    runtimes.append(try runtime(one, providers: &providers))
                    configured.append(one)
                }
            }
            let replaced = Set(change.changed)
            change.removed = s.fingerprints.keys.filter { fingerprints[$0] == nil }.sorted()
            let retired = replaced.union(change.removed)
            let fresh = s.snapshot.runtimes.count
            active = runtimes.indices.map { i in i >= fresh || (active[i] && !retired.contains(runtimes[i].name)) }
            let live = Set(runtimes.indices.filter { active[$0] }.map { runtimes[$0].name })
            let removed = Set(runtimes.map(\.name)).subtracting(live)
            s = State(
                snapshot: Snapshot(runtimes: runtimes, apps: configured, active: active, removed: removed), fingerprints: fingerprints,
                providers: providers,
                files: apps.flatMap(Self.credentialFiles))
            return (s.snapshot, change)
        }
    }

    private func runtime(_ app: AppConfiguration, providers: inout [String: BearerCredential]) throws -> AppRuntime {
        if case .serviceAccount(let file, let project) = app.auth { return try fcmRuntime(app, file: file, project: project, providers: &providers) }
        guard case .token(let team, let kid, let file) = app.auth else { return try AppRuntime(APNSApp(app), jwt: nil) }
        let id = "\(team)/\(kid)/\(Self.contents(file).hashValue)"
        let jwt =
            try providers[id] as? JWTProvider
            ?? JWTProvider(teamID: team, keyID: kid, p8File: file, refreshAfterSeconds: refreshAfterSeconds, minimumAgeSeconds: minimumAgeSeconds)
        providers[id] = jwt
        return try AppRuntime(APNSApp(app), jwt: jwt)
    }

    /// An FCM app: its service account read and checked (an error names the file and field), one
    /// access token per account file, its first mint begun at once, off this thread.
    private func fcmRuntime(_ app: AppConfiguration, file: String, project: String?, providers: inout [String: BearerCredential]) throws -> AppRuntime
    {
        let bytes = Self.contents(file)
        let id = "fcm/\(file)/\(bytes.hashValue)"
        let account = try FCMServiceAccount.parse(bytes, source: "app \(app.name): \(file)")
        let token: FCMAccessToken
        if let shared = providers[id] as? FCMAccessToken {
            token = shared
        } else {
            token = try FCMAccessToken(account: account, caFile: app.endpoint.caFile)
            token.renewInBackground(refusedGeneration: nil)
        }
        providers[id] = token
        return try AppRuntime(APNSApp(app), fcmProject: project ?? account.projectID, token: token)
    }

    /// An app's settings and the bytes of its credential files: a key or certificate replaced
    /// in place changes it too.
    static func fingerprint(_ app: AppConfiguration) -> [UInt8] {
        let files = credentialFiles(app)
        let settings =
            "\(app.name)|\(app.bundleID)|\(app.environment)|\(app.endpoint)|\(app.channelsEndpoint)|\(app.auth)|\(app.keys)|"
            + "\(app.truncateBody)|\(app.maxRate.map(String.init) ?? "-")"
        return Array(settings.utf8) + files.flatMap { [0] + contents($0) }
    }

    static func credentialFiles(_ app: AppConfiguration) -> [String] {
        let files: [String]
        switch app.auth {
        case .token(_, _, let file): files = [file]
        case .certificate(let cert, let key): files = [cert, key]
        case .pkcs12(let file, _): files = [file]
        case .serviceAccount(let file, _): files = [file]
        }
        return files + app.keys.map(\.keyFile)
    }

    private static func contents(_ path: String) -> [UInt8] {
        FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? Array("unreadable \(path)".utf8)
    }
}
