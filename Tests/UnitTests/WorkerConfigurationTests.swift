import APNSCore
import Buffers
import Configuration
import Foundation
import PointerTricks
import QueueContract
import Synchronization
import XCTest

@testable import APNSTransport
@testable import APNSWorker

final class WorkerConfigurationTests: XCTestCase {
    func testConfigurationFileAndEnvironmentOverrides() throws {
        let path = NSTemporaryDirectory() + "cfg-\(getpid()).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try """
        {"redis":{"host":"10.0.0.1","port":7000,"password":"s3cret"},"queue":"q1","connections":3,"connect_timeout_ms":2500,
         "apps":[{"name":"a","bundle_id":"com.a","environment":"development",
                  "token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}]}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let c = try WorkerConfiguration.load(
            path: path,
            environment: [
                "APNSW_REDIS_PORT": "7001", "APNSW_STREAMS": "50",
                "APNSW_APNS_HOST": "127.0.0.1", "APNSW_APNS_PORT": "8443",
            ])
        XCTAssertEqual(c.redis.host, "10.0.0.1")
        XCTAssertEqual(c.redis.port, 7001)
        XCTAssertEqual(c.redis.password, "s3cret")
        XCTAssertFalse(c.redis.description.contains("s3cret"))
        XCTAssertEqual(c.queue, "q1")
        XCTAssertEqual(c.connections, 3)
        XCTAssertEqual(c.connectTimeoutMs, 2500)
        XCTAssertEqual(c.streams, 50)
        XCTAssertEqual(c.apps.first?.endpoint, APNSEndpoint(host: "127.0.0.1", port: 8443, caFile: nil))
        XCTAssertEqual(APNSEndpoint.development.host, "api.sandbox.push.apple.com")
        XCTAssertNil(c.redis.socket)
        let local = try WorkerConfiguration.load(path: path, environment: ["APNSW_REDIS_SOCKET": "/run/redis/redis.sock"])
        XCTAssertEqual(local.redis.socket, "/run/redis/redis.sock")
        XCTAssertEqual(local.redis.description, "redis+unix:///run/redis/redis.sock?db=0")
        XCTAssertFalse(local.redis.description.contains("s3cret"))
    }

    /// Secrets from files (Docker and Kubernetes secrets), and the metrics address defaults to
    /// this machine (issue 28, item 7).
    func testSecretsComeFromFilesAndMetricsListenLocallyByDefault() throws {
        let dir = NSTemporaryDirectory() + "cfg-secret-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "from-a-file\n".write(toFile: dir + "/redis_password", atomically: true, encoding: .utf8)
        let app = #"{"name":"a","bundle_id":"com.a","token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}"#
        try #"{"redis":{"password_file":"\#(dir)/redis_password"},"apps":[\#(app)]}"#.write(
            toFile: dir + "/w.json", atomically: true, encoding: .utf8)
        let c = try WorkerConfiguration.load(path: dir + "/w.json", environment: [:])
        XCTAssertEqual(c.redis.password, "from-a-file", "the final newline is not part of it")
        XCTAssertEqual(c.metricsHost, "127.0.0.1")
        try "other\n".write(toFile: dir + "/env_password", atomically: true, encoding: .utf8)
        let e = try WorkerConfiguration.load(
            path: dir + "/w.json", environment: ["APNSW_REDIS_PASSWORD_FILE": dir + "/env_password", "APNSW_METRICS_HOST": "0.0.0.0"])
        XCTAssertEqual(e.redis.password, "other")
        XCTAssertEqual(e.metricsHost, "0.0.0.0")
        XCTAssertThrowsError(try WorkerConfiguration.load(path: dir + "/w.json", environment: ["APNSW_REDIS_PASSWORD_FILE": dir + "/missing"])) {
            XCTAssertTrue("\($0)".contains("APNSW_REDIS_PASSWORD_FILE: cannot read"), "\($0)")
        }
    }

    /// FCM apps (issue 48): beside APNs apps, with the one-app environment overrides for each
    /// provider, and errors that name the setting.
    func testFCMAppsAndTheirSettings() throws {
        let path = NSTemporaryDirectory() + "cfg-fcm-\(getpid()).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let apns = #"{"name":"ios","bundle_id":"com.a","token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}"#
        func load(_ apps: String, _ env: [String: String] = [:]) throws -> WorkerConfiguration {
            try #"{"queue":"q","apps":[\#(apps)]}"#.write(toFile: path, atomically: true, encoding: .utf8)
            return try WorkerConfiguration.load(path: path, environment: env)
        }
        func refusal(_ apps: String, _ env: [String: String] = [:]) -> String {
            do {
                _ = try load(apps, env)
                return "accepted"
            } catch { return "\(error)" }
        }
        let fcm = #"{"name":"android","fcm":{"service_account_file":"/sa.json","project_id":"p1"},"max_per_minute":600000}"#
        let c = try load(apns + "," + fcm, ["APNSW_FCM_SERVICE_ACCOUNT_FILE": "/run/secrets/sa.json", "APNSW_APNS_PORT": "2197"])
        XCTAssertEqual(c.apps.count, 2)
        XCTAssertEqual(c.apps[1].auth, .serviceAccount(file: "/run/secrets/sa.json", projectID: "p1"))
        XCTAssertEqual(c.apps[1].endpoint, .fcm)
        XCTAssertEqual(c.apps[1].maxRate, 10_000)
        XCTAssertEqual(c.apps[0].endpoint.port, 2197, "the APNs overrides go to the one APNs app")
        XCTAssertTrue(refusal(#"{"name":"android","fcm":{}}"#).contains("fcm.service_account_file is required"))
        XCTAssertTrue(refusal(#"{"name":"android","fcm":{"service_account_file":"/sa.json","key":"x"}}"#).contains("unknown setting \"key\""))
        let withBundle = #"{"name":"android","fcm":{"service_account_file":"/sa.json"},"bundle_id":"x"}"#
        XCTAssertTrue(refusal(withBundle).contains("unknown setting \"bundle_id\""))
        XCTAssertTrue(refusal(#"{"name":"android","fcm":{"service_account_file":"/sa.json"},"max_per_minute":0}"#).contains("max_per_minute"))
        let two = fcm + "," + fcm.replacingOccurrences(of: "android", with: "android2")
        XCTAssertTrue(refusal(two, ["APNSW_FCM_CA_FILE": "/ca.pem"]).contains("the file has 2 FCM apps"))
    }

    func testConfigurationErrorsAreClear() throws {
        let path = NSTemporaryDirectory() + "cfg-bad-\(getpid()).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try #"{"queue":"q","connections":true,"apps":[]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("connections must be a whole number"), "\(error)")
        }
        try #"{"queue":"q","connections":1,"max_recoveries":0}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("no apps"), "0 and 1 are numbers, not booleans: \(error)")
        }
        try #"{"queue":"q","connect_timeout_ms":0,"apps":[{"name":"a","bundle_id":"com.a","token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}]}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("connect_timeout_ms must be in 100...600000, got 0"), "\(error)")
        }
        try #"{"queue":"q","conections":3}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("unknown setting \"conections\""), "\(error)")
        }
        XCTAssertThrowsError(try WorkerConfiguration.load(path: nil, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("no apps"), "\(error)")
        }
    }

    /// The optional rate caps: off unless given, then checked.
    func testRateCapsAreOptionalAndChecked() throws {
        let path = NSTemporaryDirectory() + "cfg-rate-\(getpid()).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let app = #"{"name":"a","bundle_id":"com.a","max_rate":50,"token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}"#
        try #"{"apps":[\#(app)]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        let plain = try WorkerConfiguration.load(path: path, environment: [:])
        XCTAssertNil(plain.ratePerConnection, "no cap unless one is set")
        XCTAssertEqual(plain.apps[0].maxRate, 50)
        try #"{"rate_per_connection":100,"apps":[\#(app)]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertEqual(try WorkerConfiguration.load(path: path, environment: [:]).ratePerConnection, 100)
        try #"{"rate_per_connection":0,"apps":[\#(app)]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("rate_per_connection must be in 1...1000000"), "\(error)")
        }
    }

    /// A configuration whose redis object is `redis` (JSON), with one app, and `env` over it.
    private func loadRedis(_ redis: String, _ env: [String: String] = [:]) throws -> WorkerConfiguration {
        let path = NSTemporaryDirectory() + "cfg-redis-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let app = #"[{"name":"a","bundle_id":"com.a","token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}]"#
        try #"{"redis":\#(redis),"apps":\#(app)}"#.write(toFile: path, atomically: true, encoding: .utf8)
        return try WorkerConfiguration.load(path: path, environment: env)
    }

    func testRedisTLSSettingsComeFromTheFileAndTheEnvironmentAndAreChecked() throws {
        XCTAssertNil(try loadRedis(#"{"host":"r"}"#).redis.tls)
        XCTAssertNotNil(try loadRedis(#"{"host":"r","tls":true}"#).redis.tls, "true: the system's trust store")
        XCTAssertEqual(try loadRedis(#"{"host":"r","tls":{"server_name":"redis.internal"}}"#).redis.tls?.serverName, "redis.internal")
        XCTAssertEqual(try loadRedis(#"{"host":"r"}"#, ["APNSW_REDIS_TLS": "yes", "APNSW_REDIS_TLS_SERVER_NAME": "n"]).redis.tls?.serverName, "n")
        XCTAssertNil(try loadRedis(#"{"host":"r","tls":true}"#, ["APNSW_REDIS_TLS": "false"]).redis.tls)
        XCTAssertTrue(try loadRedis(#"{"host":"r","tls":true}"#).redis.description.hasPrefix("rediss://"))
        for (redis, env, expected) in [
            (#"{"socket":"/run/r.sock","tls":true}"#, [:], "unix socket"),
            (#"{"host":"r","tls":{"key_file":"/k.pem"}}"#, [:], "key_file needs redis.tls.certificate_file"),
            (#"{"host":"r","tls":{"ca_file":"/nonexistent/ca.pem"}}"#, [:], "/nonexistent/ca.pem"),
            (#"{"host":"r","tls":{"cafile":"x"}}"#, [:], "unknown setting \"cafile\""),
            (#"{"host":"r"}"#, ["APNSW_REDIS_TLS": "maybe"], "APNSW_REDIS_TLS must be true or false"),
        ] as [(String, [String: String], String)] {
            XCTAssertThrowsError(try loadRedis(redis, env), redis) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(redis): \(error)")
            }
        }
    }

    func testSentinelSettingsComeFromTheFileAndTheEnvironmentAndAreChecked() throws {
        let c = try loadRedis(#"{"sentinels":["10.0.0.1:26379","[::1]:26380","s3"],"master_name":"m","sentinel_password":"sp"}"#)
        XCTAssertEqual(c.redis.sentinel?.addresses.map(\.description), ["10.0.0.1:26379", "[::1]:26380", "s3:26379"])
        XCTAssertEqual(c.redis.sentinel?.masterName, "m")
        XCTAssertEqual(c.redis.sentinel?.password, "sp")
        XCTAssertTrue(c.redis.description.hasPrefix("redis+sentinel://10.0.0.1:26379,"), c.redis.description)
        XCTAssertFalse(c.redis.description.contains("sp"), "no password in the description")
        let e = try loadRedis(#"{"host":"r"}"#, ["APNSW_REDIS_SENTINELS": "a:1, b:2", "APNSW_REDIS_MASTER_NAME": "mm"])
        XCTAssertEqual(e.redis.sentinel?.addresses.map(\.description), ["a:1", "b:2"])
        XCTAssertEqual(e.redis.sentinel?.masterName, "mm")
        for (redis, env, expected) in [
            (#"{"sentinels":["a:1"]}"#, [:], "needs redis.master_name"),
            (#"{"master_name":"m"}"#, [:], "redis.master_name needs redis.sentinels"),
            (#"{"sentinels":["a:99999"],"master_name":"m"}"#, [:], "\"a:99999\" is not host:port"),
            (#"{"sentinels":[],"master_name":"m"}"#, [:], "at least one sentinel"),
            (#"{"sentinels":"a:1","master_name":"m"}"#, [:], "must be a list of strings"),
            (#"{"sentinels":["a:1"],"master_name":"m","socket":"/r.sock"}"#, [:], "exclude each other"),
        ] as [(String, [String: String], String)] {
            XCTAssertThrowsError(try loadRedis(redis, env), redis) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(redis): \(error)")
            }
        }
    }

    /// A dead Redis link must be noticed while the lease still holds (issue 27, item 7: 5 s reply
    /// timeouts against a 3 s lease lost it on every 2 s cut).
    func testRedisReplyTimeoutsFitInsideTheLease() {
        var config = WorkerConfiguration()
        for lease in [1000, 3000, 15_000, 60_000] {
            config.leaseMs = lease
            XCTAssertLessThanOrEqual(config.redisReplyTimeoutMs, max(300, lease / 3), "lease \(lease)")
            XCTAssertLessThanOrEqual(config.redisReplyTimeoutMs, 5000)
        }
        config.leaseMs = 3000
        XCTAssertEqual(config.redisReplyTimeoutMs, 1000)
    }

    /// Cluster seeds, shards and WAIT: read from the file and the environment, and refused
    /// where they cannot work, naming the setting.
    func testClusterShardAndWaitSettingsAreReadAndChecked() throws {
        let c = try loadRedis(#"{"cluster":["10.0.0.1:7000","redis-b"],"wait_replicas":1,"wait_timeout_ms":250}"#)
        XCTAssertEqual(c.redis.cluster?.seeds.map(\.description), ["10.0.0.1:7000", "redis-b:6379"])
        XCTAssertEqual(c.waitReplicas, 1)
        XCTAssertEqual(c.waitTimeoutMs, 250)
        XCTAssertTrue(c.redis.description.hasPrefix("redis+cluster://"), c.redis.description)
        let e = try loadRedis(#"{"host":"r"}"#, ["APNSW_REDIS_CLUSTER": "a:1, b:2", "APNSW_SHARDS": "4"])
        XCTAssertEqual(e.redis.cluster?.seeds.map(\.description), ["a:1", "b:2"])
        XCTAssertEqual(e.servedKeys.map(\.label), [e.queue, "\(e.queue).0", "\(e.queue).1", "\(e.queue).2", "\(e.queue).3"])
        for (redis, env, expected) in [
            (#"{"cluster":["a:1"],"sentinels":["s:1"],"master_name":"m"}"#, [:], "redis.cluster and redis.sentinels exclude each other"),
            (#"{"cluster":["a:1"],"database":2}"#, [:], "redis.database must be 0 on a cluster"),
            (#"{"cluster":[]}"#, [:], "redis.cluster must name at least one node"),
            (#"{"cluster":["a:99999"]}"#, [:], "redis.cluster: \"a:99999\" is not host:port"),
            (#"{"host":"r","wait_replicas":-1}"#, [:], "redis.wait_replicas must be in 0...16"),
            (#"{"host":"r"}"#, ["APNSW_SHARDS": "0"], "shards must be in 1...256"),
        ] as [(String, [String: String], String)] {
            XCTAssertThrowsError(try loadRedis(redis, env), redis) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(redis): \(error)")
            }
        }
    }
}
