import APNSCore

/// An FCM app (fcm-protocol.md §3.1, docs/fcm.md): `{"name", "fcm": {"service_account_file",
/// "project_id"}, "endpoint", "max_per_minute"}`.
extension AppConfiguration {
    init(fcmFields f: Fields) throws {
        try f.rejectUnknown(["name", "fcm", "endpoint", "max_per_minute"])
        guard let name = try f.string("name") else { throw ConfigurationError("\(f.path): \"name\" is required") }
        guard let fcm = try f.object("fcm") else { throw ConfigurationError("\(f.path): \"fcm\" is required") }
        try fcm.rejectUnknown(["service_account_file", "project_id"])
        guard let file = try fcm.string("service_account_file") else {
            throw ConfigurationError("\(fcm.path).service_account_file is required (the service account's JSON key file from the Firebase console)")
        }
        var endpoint = APNSEndpoint.fcm
        if let e = try f.object("endpoint") {
            try e.rejectUnknown(["host", "port", "ca_file", "server_name"])
            let host = try e.string("host") ?? endpoint.host
            endpoint = APNSEndpoint(
                host: host, port: try e.int("port") ?? endpoint.port, caFile: try e.string("ca_file"), serverName: try e.string("server_name") ?? host
            )
        }
        self.init(name: name, bundleID: "", endpoint: endpoint, auth: .serviceAccount(file: file, projectID: try fcm.string("project_id")))
        if let perMinute = try f.int("max_per_minute") {
            guard perMinute > 0 else { throw ConfigurationError("\(f.path).max_per_minute must be a positive number of messages") }
            maxRate = (perMinute + 59) / 60
        }
    }
}

extension WorkerConfiguration {
    /// `APNSW_FCM_SERVICE_ACCOUNT_FILE` (a mounted secret) and `APNSW_FCM_CA_FILE` for the one FCM app.
    mutating func applyFCM(environment env: [String: String]) throws {
        let keys = ["APNSW_FCM_SERVICE_ACCOUNT_FILE", "APNSW_FCM_CA_FILE"]
        guard let given = keys.first(where: { env[$0] != nil }) else { return }
        let fcmApps = apps.indices.filter { apps[$0].auth.isFCM }
        guard fcmApps.count == 1, let one = fcmApps.first else {
            throw ConfigurationError("\(given) sets the one FCM app's; the file has \(fcmApps.count) FCM apps: set each in the file")
        }
        if case .serviceAccount(let file, let project) = apps[one].auth {
            apps[one].auth = .serviceAccount(file: env["APNSW_FCM_SERVICE_ACCOUNT_FILE"] ?? file, projectID: project)
        }
        apps[one].endpoint.caFile = env["APNSW_FCM_CA_FILE"] ?? apps[one].endpoint.caFile
    }
}
