import RedisClient

extension [String: String] {
    /// The environment variable `name` as a whole number, nil when it is not set.
    func wholeNumber(_ name: String) throws -> Int? {
        guard let text = self[name] else { return nil }
        guard let v = Int(text) else { throw ConfigurationError("\(name) must be a whole number") }
        return v
    }
}

extension RedisEndpoint {
    /// The file's `redis` object (its keys checked by the caller).
    mutating func apply(file r: Fields) throws {
        username = try r.string("username")
        if let file = try r.string("username_file") { username = try WorkerConfiguration.secret(from: file, for: "redis.username_file") }
        host = try r.string("host") ?? host
        port = try r.int("port") ?? port
        socket = try r.string("socket")
        password = try r.string("password")
        if let file = try r.string("password_file") { password = try WorkerConfiguration.secret(from: file, for: "redis.password_file") }
        database = try r.int("database") ?? database
        try applySentinel(file: r)
        if let seeds = try r.strings("cluster") { cluster = try Self.cluster(seeds, setting: "redis.cluster") }
        if case .bool(let on)? = r.values["tls"] {
            tls = on ? RedisTLS() : nil
        } else if let t = try r.object("tls") {
            try t.rejectUnknown(["ca_file", "server_name", "certificate_file", "key_file"])
            tls = RedisTLS(
                caFile: try t.string("ca_file"), serverName: try t.string("server_name"), certificateFile: try t.string("certificate_file"),
                keyFile: try t.string("key_file"))
        }
    }

    /// The `APNSW_REDIS_*` variables over what the file said: for the worker and apnsctl alike.
    public mutating func apply(environment env: [String: String]) throws {
        host = env["APNSW_REDIS_HOST"] ?? host
        port = try env.wholeNumber("APNSW_REDIS_PORT") ?? port
        socket = env["APNSW_REDIS_SOCKET"] ?? socket
        password = env["APNSW_REDIS_PASSWORD"] ?? password
        if let file = env["APNSW_REDIS_PASSWORD_FILE"] { password = try WorkerConfiguration.secret(from: file, for: "APNSW_REDIS_PASSWORD_FILE") }
        username = env["APNSW_REDIS_USERNAME"] ?? username
        if let file = env["APNSW_REDIS_USERNAME_FILE"] { username = try WorkerConfiguration.secret(from: file, for: "APNSW_REDIS_USERNAME_FILE") }
        database = try env.wholeNumber("APNSW_REDIS_DB") ?? database
        switch env["APNSW_REDIS_TLS"]?.lowercased() {
        case nil: break
        case "1", "true", "yes", "on": tls = tls ?? RedisTLS()
        case "0", "false", "no", "off": tls = nil
        case let other?: throw ConfigurationError("APNSW_REDIS_TLS must be true or false, got \(other)")
        }
        try applySentinel(environment: env)
        let files: [(String, WritableKeyPath<RedisTLS, String?>)] = [
            ("APNSW_REDIS_TLS_CA_FILE", \.caFile), ("APNSW_REDIS_TLS_SERVER_NAME", \.serverName),
            ("APNSW_REDIS_TLS_CERT_FILE", \.certificateFile), ("APNSW_REDIS_TLS_KEY_FILE", \.keyFile),
        ]
        for (name, field) in files {
            guard let value = env[name] else { continue }
            var t = tls ?? RedisTLS()
            t[keyPath: field] = value
            tls = t
        }
    }

    /// `sentinels`, `master_name` and the sentinels' own credentials, from the file's redis object.
    mutating func applySentinel(file r: Fields) throws {
        guard let listed = try r.strings("sentinels") else {
            if try r.string("master_name") != nil { throw ConfigurationError("redis.master_name needs redis.sentinels") }
            return
        }
        var s = try Self.sentinel(listed, setting: "redis.sentinels")
        s.masterName = try r.string("master_name") ?? ""
        s.username = try r.string("sentinel_username")
        s.password = try r.string("sentinel_password")
        if let file = try r.string("sentinel_password_file") {
            s.password = try WorkerConfiguration.secret(from: file, for: "redis.sentinel_password_file")
        }
        sentinel = s
    }

    private mutating func applySentinel(environment env: [String: String]) throws {
        if let listed = env["APNSW_REDIS_CLUSTER"] {
            cluster = try Self.cluster(listed.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }, setting: "APNSW_REDIS_CLUSTER")
        }
        if let listed = env["APNSW_REDIS_SENTINELS"] {
            let given = listed.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }
            var s = try Self.sentinel(given, setting: "APNSW_REDIS_SENTINELS")
            s.masterName = sentinel?.masterName ?? ""
            s.username = sentinel?.username
            s.password = sentinel?.password
            sentinel = s
        }
        guard var s = sentinel else { return }
        s.masterName = env["APNSW_REDIS_MASTER_NAME"] ?? s.masterName
        s.username = env["APNSW_REDIS_SENTINEL_USERNAME"] ?? s.username
        s.password = env["APNSW_REDIS_SENTINEL_PASSWORD"] ?? s.password
        if let file = env["APNSW_REDIS_SENTINEL_PASSWORD_FILE"] {
            s.password = try WorkerConfiguration.secret(from: file, for: "APNSW_REDIS_SENTINEL_PASSWORD_FILE")
        }
        sentinel = s
    }

    private static func sentinel(_ listed: [String], setting: String) throws -> RedisSentinel {
        guard !listed.isEmpty else { throw ConfigurationError("\(setting) must name at least one sentinel (host:port)") }
        let addresses = try listed.map { text in
            guard let a = RedisSentinel.Address(parsing: text) else {
                throw ConfigurationError("\(setting): \"\(text)\" is not host:port (a port from 1 to 65535)")
            }
            return a
        }
        return RedisSentinel(addresses: addresses, masterName: "")
    }

    /// Cluster seeds, "host:port" each (port 6379 if none is given).
    static func cluster(_ listed: [String], setting: String) throws -> RedisCluster {
        guard !listed.isEmpty else { throw ConfigurationError("\(setting) must name at least one node of the cluster (host:port)") }
        return RedisCluster(
            seeds: try listed.map { text in
                guard var a = RedisSentinel.Address(parsing: text) else {
                    throw ConfigurationError("\(setting): \"\(text)\" is not host:port (a port from 1 to 65535)")
                }
                if !text.contains(":") || text.hasSuffix("]") { a.port = 6379 }
                return a
            })
    }

    /// Sentinel or cluster settings that can work: a master name, and no unix socket (or, on a
    /// cluster, database) beside them.
    public func validateSentinel() throws {
        if cluster != nil {
            guard sentinel == nil else { throw ConfigurationError("redis.cluster and redis.sentinels exclude each other") }
            guard socket == nil else { throw ConfigurationError("redis.cluster and redis.socket exclude each other") }
            guard database == 0 else { throw ConfigurationError("redis.database must be 0 on a cluster (Redis Cluster has one database)") }
        }
        guard let sentinel else { return }
        guard !sentinel.masterName.isEmpty else {
            throw ConfigurationError("redis.sentinels needs redis.master_name (the name the sentinels monitor)")
        }
        guard socket == nil else { throw ConfigurationError("redis.sentinels and redis.socket exclude each other") }
    }

    /// TLS settings that load: the CA and the client certificate are read now, not at the first connect.
    public func validateTLS() throws {
        guard let tls else { return }
        guard socket == nil else { throw ConfigurationError("redis.tls is for TCP: a unix socket (redis.socket) takes no TLS") }
        guard tls.keyFile == nil || tls.certificateFile != nil else {
            throw ConfigurationError("redis.tls.key_file needs redis.tls.certificate_file")
        }
        do { _ = try tls.context() } catch {
            throw ConfigurationError("redis.tls: \(error) (check ca_file, certificate_file and key_file)")
        }
    }
}
