import APNSCore
import FoundationEssentials
import Glibc
import QueueContract
import RedisClient
import Telemetry

extension WorkerConfiguration {
    /// Reads `path` (if given), then applies `environment` overrides, then checks the result.
    public static func load(path: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> WorkerConfiguration {
        var config = WorkerConfiguration()
        if let path {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError("cannot read configuration file \(path)")
            }
            let parsed: JSONValue
            do { parsed = try JSONValue.parse(data) } catch {
                throw ConfigurationError("\(path) is not valid JSON (is it cut short, or is a comma missing?): \(Self.reason(error, in: data))")
            }
            guard case .object(let root) = parsed else {
                throw ConfigurationError("\(path) holds JSON, but not an object: the settings go in one {…}")
            }
            try config.apply(file: Fields(root, at: "configuration"))
        }
        try config.apply(environment: environment)
        try config.validate()
        return config
    }

    private mutating func apply(file f: Fields) throws {
        try f.rejectUnknown([
            "redis", "queue", "worker_id", "apps", "connections", "streams", "io_threads", "batch_size",
            "request_timeout_ms", "results_max", "dead_letters_max", "invalid_tokens_max", "lease_ms",
            "results_max_age_s", "dead_letters_max_age_s", "invalid_tokens_max_age_s",
            "shutdown_grace_ms", "log_level", "retry", "max_recoveries", "credential_pause_ms",
            "ping_interval_ms", "ping_timeout_ms", "connect_timeout_ms", "token_refresh_s", "token_min_refresh_s",
            "templates_dir", "metrics_port", "metrics_host", "rate_per_connection", "log_rejections", "log_tokens", "results",
            "shards", "max_age_s", "idempotency_window_s", "queues",
        ])
        if let r = try f.object("redis") {
            try r.rejectUnknown([
                "host", "port", "socket", "username", "username_file", "password", "password_file", "database", "tls", "sentinels",
                "master_name", "sentinel_username", "sentinel_password", "sentinel_password_file", "cluster",
                "wait_replicas", "wait_timeout_ms",
            ])
            try redis.apply(file: r)
            waitReplicas = try r.int("wait_replicas") ?? waitReplicas
            waitTimeoutMs = try r.int("wait_timeout_ms") ?? waitTimeoutMs
        }
        queue = try f.string("queue") ?? queue
        shards = try f.int("shards") ?? shards
        try applyQueues(file: f)
        workerID = try f.string("worker_id")
        connections = try f.int("connections") ?? connections
        streams = try f.int("streams") ?? streams
        ioThreads = try f.int("io_threads") ?? ioThreads
        batchSize = try f.int("batch_size") ?? batchSize
        requestTimeoutMs = try f.int("request_timeout_ms") ?? requestTimeoutMs
        resultsMax = try f.int("results_max") ?? resultsMax
        if let mode = try f.string("results") { results = try Self.resultsMode(mode, setting: "results") }
        deadLettersMax = try f.int("dead_letters_max") ?? deadLettersMax
        invalidTokensMax = try f.int("invalid_tokens_max") ?? invalidTokensMax
        resultsMaxAgeSeconds = try f.int("results_max_age_s")
        deadLettersMaxAgeSeconds = try f.int("dead_letters_max_age_s")
        invalidTokensMaxAgeSeconds = try f.int("invalid_tokens_max_age_s")
        leaseMs = try f.int("lease_ms") ?? leaseMs
        shutdownGraceMs = try f.int("shutdown_grace_ms") ?? shutdownGraceMs
        if let level = try f.string("log_level") { logLevel = try LogLevel.parse(level) }
        maxRecoveries = try f.int("max_recoveries") ?? maxRecoveries
        maxAgeSeconds = try f.int("max_age_s")
        idempotencyWindowSeconds = try f.int("idempotency_window_s") ?? idempotencyWindowSeconds
        credentialPauseMs = try f.int("credential_pause_ms") ?? credentialPauseMs
        pingIntervalMs = try f.int("ping_interval_ms") ?? pingIntervalMs
        pingTimeoutMs = try f.int("ping_timeout_ms") ?? pingTimeoutMs
        connectTimeoutMs = try f.int("connect_timeout_ms") ?? connectTimeoutMs
        ratePerConnection = try f.int("rate_per_connection")
        tokenRefreshSeconds = try f.int("token_refresh_s") ?? tokenRefreshSeconds
        tokenMinRefreshSeconds = try f.int("token_min_refresh_s") ?? tokenMinRefreshSeconds
        templatesDirectory = try f.string("templates_dir")
        metricsPort = try f.int("metrics_port")
        metricsHost = try f.string("metrics_host") ?? metricsHost
        logRejections = try f.string("log_rejections") ?? logRejections
        logTokens = try f.string("log_tokens") ?? logTokens
        if let r = try f.object("retry") {
            try r.rejectUnknown([
                "backoff_base_ms", "backoff_cap_ms", "backoff_max_attempts", "server_error_max_attempts",
                "server_error_min_delay_ms", "server_error_max_delay_ms", "quota_min_delay_ms",
            ])
            retryPolicy.quotaMinDelayMs = try r.int("quota_min_delay_ms") ?? retryPolicy.quotaMinDelayMs
            retryPolicy.backoffBaseMs = try r.int("backoff_base_ms") ?? retryPolicy.backoffBaseMs
            retryPolicy.backoffCapMs = try r.int("backoff_cap_ms") ?? retryPolicy.backoffCapMs
            retryPolicy.backoffMaxAttempts = try r.int("backoff_max_attempts") ?? retryPolicy.backoffMaxAttempts
            retryPolicy.serverErrorMaxAttempts = try r.int("server_error_max_attempts") ?? retryPolicy.serverErrorMaxAttempts
            let low = try r.int("server_error_min_delay_ms") ?? retryPolicy.serverErrorDelayMs.lowerBound
            let high = try r.int("server_error_max_delay_ms") ?? retryPolicy.serverErrorDelayMs.upperBound
            guard low >= 0, low <= high else { throw ConfigurationError("\(r.path): server_error_min_delay_ms must be ≤ server_error_max_delay_ms") }
            retryPolicy.serverErrorDelayMs = low...high
        }
        apps = try f.objects("apps").map(AppConfiguration.init(fields:))
    }

    private mutating func apply(environment env: [String: String]) throws {
        func int(_ name: String) throws -> Int? { try env.wholeNumber(name) }
        try redis.apply(environment: env)
        if !queues.isEmpty, let one = ["APNSW_QUEUE", "APNSW_SHARDS"].first(where: { env[$0] != nil }) {
            throw ConfigurationError("\(one) sets the one queue of the \"queue\" form, and the file lists \"queues\": set each queue there")
        }
        queue = env["APNSW_QUEUE"] ?? queue
        shards = try int("APNSW_SHARDS") ?? shards
        waitReplicas = try int("APNSW_REDIS_WAIT_REPLICAS") ?? waitReplicas
        if let mode = env["APNSW_RESULTS"] { results = try Self.resultsMode(mode, setting: "APNSW_RESULTS") }
        workerID = env["APNSW_WORKER_ID"] ?? workerID
        connections = try int("APNSW_CONNECTIONS") ?? connections
        streams = try int("APNSW_STREAMS") ?? streams
        ioThreads = try int("APNSW_IO_THREADS") ?? ioThreads
        batchSize = try int("APNSW_BATCH_SIZE") ?? batchSize
        leaseMs = try int("APNSW_LEASE_MS") ?? leaseMs
        idempotencyWindowSeconds = try int("APNSW_IDEMPOTENCY_WINDOW_S") ?? idempotencyWindowSeconds
        metricsPort = try int("APNSW_METRICS_PORT") ?? metricsPort
        metricsHost = env["APNSW_METRICS_HOST"] ?? metricsHost
        if let level = env["APNSW_LOG_LEVEL"] { logLevel = try LogLevel.parse(level) }
        try applyFCM(environment: env)
        // Overrides for the single app of a simple deployment.
        let appKeys = [
            "APNSW_APNS_HOST", "APNSW_APNS_PORT", "APNSW_APNS_MANAGE_PORT", "APNSW_APNS_CA_FILE", "APNSW_BUNDLE_ID", "APNSW_TEAM_ID", "APNSW_KEY_ID",
            "APNSW_KEY_FILE",
        ]
        guard appKeys.contains(where: { env[$0] != nil }) else { return }
        if apps.isEmpty {
            guard let team = env["APNSW_TEAM_ID"], let kid = env["APNSW_KEY_ID"], let file = env["APNSW_KEY_FILE"],
                let bundle = env["APNSW_BUNDLE_ID"]
            else {
                throw ConfigurationError("with no apps in the file, APNSW_BUNDLE_ID, APNSW_TEAM_ID, APNSW_KEY_ID and APNSW_KEY_FILE are all needed")
            }
            apps = [
                AppConfiguration(
                    name: "default", bundleID: bundle, endpoint: .development,
                    auth: .token(teamID: team, keyID: kid, keyFile: file))
            ]
        }
        let apnsApps = apps.indices.filter { !apps[$0].auth.isFCM }
        guard apnsApps.count == 1, let one = apnsApps.first else { throw ConfigurationError("APNSW_APNS_* overrides need exactly one APNs app") }
        var app = apps[one]
        if let host = env["APNSW_APNS_HOST"] { app.endpoint = APNSEndpoint(host: host, port: app.endpoint.port, caFile: app.endpoint.caFile) }
        app.endpoint.port = try int("APNSW_APNS_PORT") ?? app.endpoint.port
        app.endpoint.caFile = env["APNSW_APNS_CA_FILE"] ?? app.endpoint.caFile
        app.bundleID = env["APNSW_BUNDLE_ID"] ?? app.bundleID
        if app.endpoint != apps[one].endpoint || env["APNSW_APNS_MANAGE_PORT"] != nil {
            app.channelsEndpoint = app.endpoint.channelsEndpoint(port: try int("APNSW_APNS_MANAGE_PORT"))
        }
        if case .token(let team, let kid, let file) = app.auth {
            app.auth = .token(teamID: env["APNSW_TEAM_ID"] ?? team, keyID: env["APNSW_KEY_ID"] ?? kid, keyFile: env["APNSW_KEY_FILE"] ?? file)
        }
        apps[one] = app
    }

    static func resultsMode(_ text: String, setting: String) throws -> ResultsMode {
        guard let mode = ResultsMode(rawValue: text) else { throw ConfigurationError("\(setting) must be all, failures or none, got \(text)") }
        return mode
    }

    /// A secret kept in a file (a Docker or Kubernetes secret), without its final newline.
    public static func secret(from file: String, for setting: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: file) else { throw ConfigurationError("\(setting): cannot read \(file)") }
        var text = String(decoding: data, as: UTF8.self)
        while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
        guard !text.isEmpty else { throw ConfigurationError("\(setting): \(file) is empty") }
        return text
    }

    /// The parser's message, at a line and column a person can find.
    private static func reason(_ error: JSONSyntaxError, in data: Data) -> String {
        let before = data.prefix(error.offset)
        let line = before.count(where: { $0 == 0x0A }) + 1
        let column = before.count - (before.lastIndex(of: 0x0A).map { before.distance(from: before.startIndex, to: $0) + 1 } ?? 0) + 1
        return "\(error.message), at line \(line), column \(column)"
    }
}

extension AppConfiguration {
    init(fields f: Fields) throws {
        if try f.object("fcm") != nil {
            try self.init(fcmFields: f)
            return
        }
        try f.rejectUnknown(["name", "bundle_id", "environment", "endpoint", "token", "tokens", "certificate", "truncate_body", "max_rate"])
        guard let name = try f.string("name") else { throw ConfigurationError("\(f.path): \"name\" is required") }
        guard let bundle = try f.string("bundle_id") else { throw ConfigurationError("\(f.path): \"bundle_id\" is required") }
        var endpoint: APNSEndpoint
        let environment: APNSEnvironment
        switch try f.string("environment") ?? "production" {
        case "production": (endpoint, environment) = (.production, .production)
        case "development", "sandbox": (endpoint, environment) = (.development, .development)
        case let other: throw ConfigurationError("\(f.path).environment must be production or development, got \(other)")
        }
        var managePort: Int?
        if let e = try f.object("endpoint") {
            try e.rejectUnknown(["host", "port", "ca_file", "server_name", "manage_port"])
            let host = try e.string("host") ?? endpoint.host
            endpoint = APNSEndpoint(
                host: host, port: try e.int("port") ?? endpoint.port, caFile: try e.string("ca_file"),
                serverName: try e.string("server_name") ?? host)
            managePort = try e.int("manage_port")
        }
        let auth: APNSCredential
        let keys = try Self.scopedKeys(try f.objects("tokens"))
        if !keys.isEmpty {
            guard try f.object("token") == nil, try f.object("certificate") == nil else {
                throw ConfigurationError("\(f.path): give \"tokens\" (several keys) or one \"token\" or \"certificate\", not both")
            }
            guard let serving = keys.first(where: { $0.scope.serves(environment) }) else {
                throw ConfigurationError(
                    "\(f.path).tokens: no key serves \(environment.rawValue) (each names another \"environment\"): add one, or change the app's environment"
                )
            }
            auth = .token(teamID: serving.teamID, keyID: serving.keyID, keyFile: serving.keyFile)
        } else if let t = try f.object("token") {
            try t.rejectUnknown(["team_id", "key_id", "key_file"])
            guard let team = try t.string("team_id"), let kid = try t.string("key_id"), let file = try t.string("key_file") else {
                throw ConfigurationError("\(t.path) needs team_id, key_id and key_file")
            }
            auth = .token(teamID: team, keyID: kid, keyFile: file)
        } else if let c = try f.object("certificate") {
            try c.rejectUnknown(["certificate_file", "key_file", "pkcs12_file", "password"])
            if let p12 = try c.string("pkcs12_file") {
                auth = .pkcs12(file: p12, password: try c.string("password") ?? "")
            } else if let cert = try c.string("certificate_file"), let key = try c.string("key_file") {
                auth = .certificate(certificateFile: cert, keyFile: key)
            } else {
                throw ConfigurationError("\(c.path) needs certificate_file and key_file, or pkcs12_file")
            }
        } else {
            throw ConfigurationError("\(f.path) needs \"token\" or \"certificate\" credentials")
        }
        self.init(name: name, bundleID: bundle, endpoint: endpoint, auth: auth)
        self.environment = environment
        self.keys = keys
        channelsEndpoint = endpoint.channelsEndpoint(port: managePort)
        truncateBody = try f.bool("truncate_body") ?? false
        maxRate = try f.int("max_rate")
    }

    /// What the app can start with but should not: a private key file every user can read.
    public var credentialWarnings: [String] {
        let files: [String]
        switch auth {
        case .token(_, _, let file): files = [file]
        case .certificate(_, let key): files = [key]
        case .pkcs12(let file, _): files = [file]
        case .serviceAccount(let file, _): files = [file]
        }
        return (files + keys.map(\.keyFile).filter { !files.contains($0) }).compactMap { file in
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & 0o004 != 0 else { return nil }
            let mode = Int(info.st_mode & 0o7777)
            return "app \(name): \(file) is readable by every user of this machine (mode \(String(mode, radix: 8))): chmod 600 it"
        }
    }

    /// What no app can work with: an empty or odd name, an empty credential field, a port
    /// outside 1...65535.
    func validate() throws {
        let at = "apps.\(name.isEmpty ? "(unnamed)" : name)"
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "._-".contains($0) }) else {
            throw ConfigurationError("apps: an app's name must be letters, digits, '.', '_' or '-', got \"\(name)\"")
        }
        guard auth.isFCM || !bundleID.isEmpty, !bundleID.contains(where: \.isWhitespace) else {
            throw ConfigurationError("\(at).bundle_id must be a bundle id (like com.example.app), got \"\(bundleID)\"")
        }
        guard !endpoint.host.isEmpty else { throw ConfigurationError("\(at).endpoint.host must not be empty") }
        guard (1...65535).contains(endpoint.port) else { throw ConfigurationError("\(at).endpoint.port must be in 1...65535, got \(endpoint.port)") }
        switch auth {
        case .token(let team, let kid, let file):
            for (field, value) in [("team_id", team), ("key_id", kid), ("key_file", file)] where value.allSatisfy(\.isWhitespace) {
                throw ConfigurationError("\(at).token.\(field) must not be empty")
            }
        case .certificate(let cert, let key):
            for (field, value) in [("certificate_file", cert), ("key_file", key)] where value.isEmpty {
                throw ConfigurationError("\(at).certificate.\(field) must not be empty")
            }
        case .pkcs12(let file, _):
            guard !file.isEmpty else { throw ConfigurationError("\(at).certificate.pkcs12_file must not be empty") }
        case .serviceAccount(let file, _):
            guard !file.isEmpty else { throw ConfigurationError("\(at).fcm.service_account_file must not be empty") }
        }
    }
}

/// Typed access to one JSON object of the configuration, with its path for error messages.
struct Fields {
    let values: [String: JSONValue]
    let path: String
    init(_ values: [String: JSONValue], at path: String) {
        self.values = values
        self.path = path
    }

    func rejectUnknown(_ known: Set<String>) throws {
        if let unknown = values.keys.sorted().first(where: { !known.contains($0) }) {
            throw ConfigurationError("\(path): unknown setting \"\(unknown)\"")
        }
    }

    /// The value at `key`; null counts as absent.
    private func value(_ key: String) -> JSONValue? {
        guard let v = values[key], v != .null else { return nil }
        return v
    }

    func string(_ key: String) throws -> String? {
        guard let v = value(key) else { return nil }
        guard case .string(let s) = v else { throw ConfigurationError("\(path).\(key) must be a string") }
        return s
    }

    func int(_ key: String) throws -> Int? {
        switch value(key) {
        case nil: return nil
        case .integer(let n): return Int(n)
        case .number(let d) where d == d.rounded() && abs(d) < 9.0e15: return Int(d)
        default: throw ConfigurationError("\(path).\(key) must be a whole number")
        }
    }

    func bool(_ key: String) throws -> Bool? {
        guard let v = value(key) else { return nil }
        guard case .bool(let b) = v else { throw ConfigurationError("\(path).\(key) must be true or false") }
        return b
    }

    func strings(_ key: String) throws -> [String]? {
        guard let v = value(key) else { return nil }
        let texts = v.array?.compactMap(\.string)
        guard let texts, texts.count == v.array?.count else { throw ConfigurationError("\(path).\(key) must be a list of strings") }
        return texts
    }

    func object(_ key: String) throws -> Fields? {
        guard let v = value(key) else { return nil }
        guard case .object(let o) = v else { throw ConfigurationError("\(path).\(key) must be an object") }
        return Fields(o, at: "\(path).\(key)")
    }

    func objects(_ key: String) throws -> [Fields] {
        guard let v = value(key) else { return [] }
        guard case .array(let list) = v else { throw ConfigurationError("\(path).\(key) must be a list of objects") }
        return try list.enumerated().map { (i, item) in
            guard case .object(let o) = item else { throw ConfigurationError("\(path).\(key)[\(i)] must be an object") }
            return Fields(o, at: "\(path).\(key)[\(i)]")
        }
    }
}

extension LogLevel {
    static func parse(_ text: String) throws -> LogLevel {
        guard let level = LogLevel(name: text) else {
            throw ConfigurationError("log level must be debug, info, warning or error, got \(text)")
        }
        return level
    }
}
