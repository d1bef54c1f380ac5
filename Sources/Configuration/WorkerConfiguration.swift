import APNSCore
import FoundationEssentials
import QueueContract
import RedisClient
import Telemetry

/// Everything a worker process needs, read from a JSON file and then overridden by
/// `APNSW_*` environment variables (see README "Configuration").
public struct WorkerConfiguration: Sendable {
    public var redis = RedisEndpoint()
    public var queue = "default"
    /// The queue's keys live under this many hash tags (`{queue.0}` …), which spread over a cluster.
    public var shards = 1
    /// Replicas each completion waits for (WAIT), and for how long at most; 0: no WAIT.
    public var waitReplicas = 0
    public var waitTimeoutMs = 1000
    /// Several queues, each strict or weighted (`servedQueues`); empty: the one of `queue`.
    public var queues: [ServedQueue] = []
    /// The key sets this worker serves: each queue's (QueueKeys.served).
    public var servedKeys: [QueueKeys] { servedQueues.flatMap(\.servedKeys) }
    /// Shards served beyond `shards` while they still hold jobs (a rollback to fewer shards):
    /// the count to serve in all, read at start (`ShardRecord`); 0 for none.
    public var drainingShards = 0
    public var workerID: String?
    public var apps: [AppConfiguration] = []
    /// APNs connections per app per I/O thread.
    public var connections = 2
    /// The most streams we open on one connection, whatever the server allows.
    public var streams = 500
    public var ioThreads = 1
    /// Jobs taken from Redis in one atomic move.
    public var batchSize = 256
    public var requestTimeoutMs = 30_000
    public var resultsMax = 100_000
    /// Which outcomes get a result record: a delivery's is the largest part of Redis's work per job.
    public var results = ResultsMode.all
    public var deadLettersMax = 100_000
    public var invalidTokensMax = 100_000
    /// The three count caps, as the Redis contract takes them.
    public var recordCaps: RecordCaps { RecordCaps(results: resultsMax, deadLetters: deadLettersMax, invalidTokens: invalidTokensMax) }
    /// Age caps (seconds) on the same streams; nil: count caps only.
    public var resultsMaxAgeSeconds: Int?
    public var deadLettersMaxAgeSeconds: Int?
    public var invalidTokensMaxAgeSeconds: Int?
    /// A worker that has not renewed its lease for this long is presumed dead.
    public var leaseMs = 15_000
    /// How long SIGTERM waits for in-flight jobs before handing them back.
    public var shutdownGraceMs = 10_000
    public var logLevel = LogLevel.info
    public var retryPolicy = RetryPolicy()
    /// A job taken back from dead workers more often than this is a poison pill.
    public var maxRecoveries = 3
    /// A job not yet taken by APNs this long after a worker first took it (or after its
    /// `send_at`) is dead-lettered as Expired instead of being sent; nil: no limit.
    public var maxAgeSeconds: Int?
    /// How long an `idempotency_key` stays taken by the first job that had it (30 days at most).
    public var idempotencyWindowSeconds = 86_400
    /// How long an app pauses (at first) when APNs refuses its credentials.
    public var credentialPauseMs = 60_000
    public var pingIntervalMs = 60_000
    public var pingTimeoutMs = 10_000
    /// How long an APNs connection attempt has for the connect and the TLS handshake, per address.
    public var connectTimeoutMs = 10_000
    /// Requests a second on one APNs connection at most; nil: no cap (Apple documents none).
    public var ratePerConnection: Int?
    /// JWT re-mint age (Apple: 20-60 min) and the youngest token that ExpiredProviderToken may replace.
    public var tokenRefreshSeconds = 3000
    public var tokenMinRefreshSeconds = 1200
    /// A directory of `<name>.json` and `<name>.<locale>.json` payload templates.
    public var templatesDirectory: String?
    /// Serve /metrics, /healthz and /readyz on this port (nil: off).
    public var metricsPort: Int?
    /// The address /metrics, /healthz and /readyz listen on: this machine only unless set (the
    /// image and the Kubernetes manifests set 0.0.0.0, for their probes).
    public var metricsHost = "127.0.0.1"
    /// "each": a warning line per APNs refusal; "summary": one per app, status and reason per 10 s.
    public var logRejections = "each"
    /// "whole" tokens in logs, or "short" (first 8 and last 4 digits): tokens are personal data.
    public var logTokens = "whole"

    public init() {}

    /// Jobs a process hands to its connections at most: about twice what they can have in
    /// flight (one set of connections per pool, however many apps share it).
    /// How long a worker waits for a Redis reply before it drops the connection: a third of the
    /// lease, 5 s at most, so that a dead link is noticed while the lease still holds.
    public var redisReplyTimeoutMs: Int { min(5000, max(300, leaseMs / 3)) }

    public var sendingCapacity: Int { max(batchSize, 2 * streamCapacity) }

    /// Answered jobs a process holds at most while their outcomes wait for Redis: about twice
    /// what its connections can have in flight, as the completer lets half of it gather into
    /// one transaction.
    public var recordingCapacity: Int { max(batchSize, 2 * streamCapacity) }

    private var streamCapacity: Int { connections * streams * ioThreads * max(1, Set(apps.flatMap(\.byKey).map(\.poolKey)).count) }
}

extension AppConfiguration {
    /// The pool its sends share (`APNSEndpoint.poolKey`).
    public var poolKey: String { endpoint.poolKey(auth) }
}

public struct AppConfiguration: Sendable {
    public var name: String
    public var bundleID: String
    public var endpoint: APNSEndpoint
    /// Where the channel-management API is (apns-protocol.md §3.2): Apple's host for the
    /// environment, or the overridden endpoint's host on its `manage_port`.
    public var channelsEndpoint: APNSEndpoint
    public var auth: APNSCredential
    /// The environment the app sends to (an `endpoint` override keeps it).
    public var environment = APNSEnvironment.production
    /// `"tokens"`: several keys, each picked for the jobs whose topic it serves (`byKey`).
    public var keys: [ScopedKey] = []
    /// What this app's one key may sign for; nil: anything the credential covers.
    public var keyScope: KeyScope?
    /// Shorten alert bodies that make a payload too large (jobs may say otherwise).
    public var truncateBody = false
    /// Requests a second for this app at most (shared with apps of the same pool); nil: no cap.
    public var maxRate: Int?

    public init(name: String, bundleID: String, endpoint: APNSEndpoint, auth: APNSCredential) {
        environment = endpoint == .development ? .development : .production
        self.name = name
        self.bundleID = bundleID
        self.endpoint = endpoint
        self.auth = auth
        channelsEndpoint = endpoint.channelsEndpoint(port: nil)
    }
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
