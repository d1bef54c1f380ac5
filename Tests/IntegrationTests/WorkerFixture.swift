import APNSCore
import APNSMock
import Foundation
import QueueContract
import RedisClient
import TestSupport
import XCTest

@testable import APNSWorker

/// A real redis-server, the mock APNs and `apns-worker` processes on one queue of their own.
final class WorkerFixture: @unchecked Sendable {
    let redis: TestRedis
    let mock: MockFixture
    let queue: String
    let keys: QueueKeys
    /// Every key set the workers serve: `keys` alone, or with each shard's.
    let keySets: [QueueKeys]
    let directory: TemporaryDirectory
    let configFile: String
    /// The mock's address as an app's "endpoint" setting.
    let endpoint: [String: Any]
    private(set) var workers: [ChildProcess] = []

    init(
        redis: TestRedis? = nil, queue: String? = nil, settings: [String: Any] = [:], configureMock: (inout MockConfiguration) -> Void = { _ in }
    ) throws {
        self.redis = try redis ?? TestRedis()
        mock = try MockFixture(configure: configureMock)
        self.queue = queue ?? "t\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        keys = QueueKeys(queue: self.queue)
        keySets = QueueKeys.served(queue: self.queue, shards: settings["shards"] as? Int ?? 1)
        directory = try TemporaryDirectory("apnsw-worker")
        configFile = directory.file("worker.json")
        let endpoint: [String: Any] = [
            "host": "127.0.0.1", "port": mock.port, "manage_port": mock.server.managePort, "ca_file": mock.files.caFile, "server_name": "localhost",
        ]
        self.endpoint = endpoint
        var redisSettings: [String: Any] = ["host": self.redis.endpoint.host, "port": self.redis.endpoint.port]
        if let socket = self.redis.endpoint.socket { redisSettings = ["socket": socket] }
        if let password = self.redis.endpoint.password { redisSettings["password"] = password }
        if let sentinel = self.redis.endpoint.sentinel {
            redisSettings = ["sentinels": sentinel.addresses.map(\.description), "master_name": sentinel.masterName]
        }
        if let cluster = self.redis.endpoint.cluster { redisSettings = ["cluster": cluster.seeds.map(\.description)] }
        if let tls = self.redis.endpoint.tls {
            var t: [String: Any] = [:]
            t["ca_file"] = tls.caFile
            t["certificate_file"] = tls.certificateFile
            t["key_file"] = tls.keyFile
            redisSettings["tls"] = t
        }
        var config: [String: Any] = [
            "redis": redisSettings,
            "queue": self.queue,
            "connections": 2, "streams": 100, "log_level": "info", "lease_ms": 3000, "shutdown_grace_ms": 10_000,
            "apps": [
                [
                    "name": "default", "bundle_id": mock.files.topic,
                    "endpoint": endpoint,
                    "token": ["team_id": mock.files.teamID, "key_id": mock.files.keyID, "key_file": mock.files.p8File],
                ]
            ],
        ]
        for (k, v) in settings { config[k] = v }
        if settings["queues"] != nil { config["queue"] = nil }  // the one-queue form, or several
        if let apps = settings["apps"] as? [[String: Any]] {
            // Apps given without an endpoint send to the mock.
            config["apps"] = apps.map { app -> [String: Any] in
                var a = app
                if a["endpoint"] == nil { a["endpoint"] = endpoint }
                return a
            }
        }
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: configFile))
    }

    /// Rewrites the fixture's worker configuration with `settings` (same Redis, mock and queue).
    static func reconfigure(_ f: WorkerFixture, _ settings: [String: Any]) throws -> WorkerFixture {
        let data = try Data(contentsOf: URL(fileURLWithPath: f.configFile))
        var config = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        for (k, v) in settings { config[k] = v }
        if let apps = settings["apps"] as? [[String: Any]] {
            // Apps given without an endpoint send to the mock, never to Apple.
            config["apps"] = apps.map { app -> [String: Any] in
                var a = app
                if a["endpoint"] == nil { a["endpoint"] = f.endpoint }
                return a
            }
        }
        try JSONSerialization.data(withJSONObject: config).write(to: URL(fileURLWithPath: f.configFile))
        return f
    }

    @discardableResult
    func startWorker(_ name: String = "w\(Int.random(in: 0...1_000_000))", environment: [String: String] = [:]) throws -> ChildProcess {
        let binary = ChildProcess.productsDirectory + "/apns-worker"
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw TestSupportError("\(binary) is missing: build the package first (scripts/test does)")
        }
        let w = try ChildProcess(
            binary, ["--config", configFile], environment: environment.merging(["APNSW_WORKER_ID": name]) { $1 },
            outputFile: directory.file("\(name).log"))
        workers.append(w)
        return w
    }

    /// A connection for commands on `key` (the queue's own keys by default): on a cluster, to
    /// the master of its slot.
    func connect(_ key: String? = nil) throws -> BlockingRedisConnection {
        try BlockingRedisConnection(redis.endpoint.routed(toKey: key ?? keys.jobs), timeoutMs: 5000)
    }

    /// How many jobs a worker holds unfinished in Redis.
    func inFlight(_ worker: String, in set: QueueKeys? = nil) throws -> Int64 {
        try InFlightJobs.count(connect((set ?? keys).jobs), set ?? keys, worker: worker)
    }

    /// LPUSHes jobs in chunks, as any producer would, onto `to` (the queue's own list by default).
    func enqueue(_ jobs: [String], to list: String? = nil) throws {
        let r = try connect(list)
        var i = 0
        while i < jobs.count {
            let chunk = jobs[i..<min(i + 1000, jobs.count)]
            let reply = try r.command(["LPUSH", list ?? keys.jobs] + chunk)
            if case .error(let m) = reply { throw TestSupportError(m) }
            i += chunk.count
        }
    }

    /// The stats counters, summed over every key set.
    func stats() throws -> [String: Int] {
        var out: [String: Int] = [:]
        for set in keySets {
            let items = try connect(set.stats).command(["HGETALL", set.stats]).array.compactMap(\.text)
            for i in stride(from: 0, to: items.count - 1, by: 2) { out[items[i], default: 0] += Int(items[i + 1]) ?? 0 }
        }
        return out
    }

    /// Stats counters that mean a job (or one token of a fan-out) is finished.
    static let finalStats = ["delivered", "invalid_token", "invalid_channel", "dead_lettered", "duplicate"]

    func finalOutcomes() throws -> Int {
        let s = try stats()
        return Self.finalStats.reduce(0) { $0 + (s[$1] ?? 0) }
    }

    /// Stats without the counters of steps along the way (retried, recovered, …).
    func finalStats() throws -> [String: Int] { try stats().filter { Self.finalStats.contains($0.key) } }

    /// Waits until `count` jobs have a recorded outcome.
    func waitForOutcomes(_ count: Int, timeout: Double = 60, file: StaticString = #filePath, line: UInt = #line) throws {
        let ok = try waitUntil(timeout: timeout) { try finalOutcomes() >= count }
        let seen = try stats()
        let logs = workers.map { String($0.output.suffix(2000)) }.joined(separator: "\n---\n")
        XCTAssertTrue(ok, "only \(seen) of \(count) outcomes after \(timeout) s; worker output:\n\(logs)", file: file, line: line)
    }

    /// Every record of a stream, oldest first, parsed.
    func records(_ key: String) throws -> [[String: Any]] {
        let entries = try connect(key).command(["XRANGE", key, "-", "+"]).array
        return try entries.map { entry in
            let fields = entry.array[1].array
            guard fields.count == 2, case .string(let json) = fields[1],
                let o = try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any]
            else {
                throw TestSupportError("bad stream entry in \(key)")
            }
            return o
        }
    }

    /// Every record of one stream of each key set.
    func records(in stream: KeyPath<QueueKeys, String>) throws -> [[String: Any]] {
        try keySets.flatMap { try records($0[keyPath: stream]) }
    }

    /// A worker killed with -9 once the fast half of `jobs` is recorded and the slow half waits
    /// on the mock, then another that takes them back: returns when every job has an outcome.
    func killWithHalfInFlightAndTakeOver(_ jobs: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let victim = try startWorker("w-victim")
        XCTAssertTrue(try waitUntil(timeout: 20) { try finalOutcomes() >= jobs / 2 }, "the fast half went", file: file, line: line)
        usleep(500_000)
        XCTAssertEqual(try finalOutcomes(), jobs / 2, file: file, line: line)
        victim.signal(SIGKILL)
        XCTAssertNotNil(victim.wait(timeout: 5), file: file, line: line)
        try startWorker("w-taker")
        try waitForOutcomes(jobs, timeout: 60, file: file, line: line)
    }

    /// Every one of `jobs` jobs has exactly one result record, and each was delivered.
    func assertOneResultEach(_ jobs: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        var perJob: [String: Int] = [:]
        for r in try records(in: \.results) { perJob[r["job_id"] as? String ?? "?", default: 0] += 1 }
        XCTAssertEqual(perJob.count, jobs, "every job has a result", file: file, line: line)
        let twice = perJob.filter { $0.value > 1 }
        XCTAssertTrue(twice.isEmpty, "\(twice.count) jobs have more than one result", file: file, line: line)
        XCTAssertEqual(try finalStats(), ["delivered": jobs], file: file, line: line)
    }

    /// How many deliveries the mock accepted beyond one per token.
    func acceptedTwice() throws -> Int {
        var sends: [String: Int] = [:]
        for e in try mock.logEntries() where e["status"] as? Int == 200 { if let t = e["token"] as? String { sends[t, default: 0] += 1 } }
        return sends.values.reduce(0) { $0 + $1 - 1 }
    }

    static func token(_ i: Int, prefix: String = "") -> String {
        let hex = String(i, radix: 16)
        return prefix + String(repeating: "0", count: 64 - prefix.count - hex.count) + hex
    }

    static func job(_ i: Int, prefix: String = "", extra: String = "") -> String {
        #"{"v":1,"id":"job-\#(i)","token":"\#(token(i, prefix: prefix))"\#(extra),"payload":{"aps":{"alert":{"title":"Hi","body":"n\#(i)"}}}}"#
    }

    deinit {
        for w in workers where w.isRunning { w.signal(SIGKILL) }
        for set in keySets { try? redis.reset(queue: set.label) }
    }
}
