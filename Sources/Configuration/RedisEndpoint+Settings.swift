import RedisClient

extension RedisEndpoint {
    /// The `APNSW_REDIS_*` variables over what the file said: for the worker and apnsctl alike.
    public mutating func apply(environment env: [String: String]) throws {
        func int(_ name: String) throws -> Int? {
            guard let text = env[name] else { return nil }
            guard let v = Int(text) else { throw ConfigurationError("\(name) must be a whole number") }
            return v
        }
        host = env["APNSW_REDIS_HOST"] ?? host
        port = try int("APNSW_REDIS_PORT") ?? port
        socket = env["APNSW_REDIS_SOCKET"] ?? socket
        password = env["APNSW_REDIS_PASSWORD"] ?? password
        if let file = env["APNSW_REDIS_PASSWORD_FILE"] { password = try WorkerConfiguration.secret(from: file, for: "APNSW_REDIS_PASSWORD_FILE") }
        username = env["APNSW_REDIS_USERNAME"] ?? username
        if let file = env["APNSW_REDIS_USERNAME_FILE"] { username = try WorkerConfiguration.secret(from: file, for: "APNSW_REDIS_USERNAME_FILE") }
        database = try int("APNSW_REDIS_DB") ?? database
        switch env["APNSW_REDIS_TLS"]?.lowercased() {
        case nil: break
        case "1", "true", "yes", "on": tls = tls ?? RedisTLS()
        case "0", "false", "no", "off": tls = nil
        case let other?: throw ConfigurationError("APNSW_REDIS_TLS must be true or false, got \(other)")
        }
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
