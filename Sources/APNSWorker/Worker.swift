import APNSCore
import APNSTransport
import Configuration
import FCMTransport
import FoundationEssentials
import Glibc
import IOLoop
import QueueContract
import RedisClient
import Synchronization
import TLS
import Telemetry

/// One worker process: K I/O threads, each fetching its own jobs, sending them and writing their
/// outcomes on one event loop (DESIGN.md §1).
public final class Worker: @unchecked Sendable {
    public let workerID: String
    public let configuration: WorkerConfiguration
    /// The queue's own keys, and the key sets it serves (its shards' with them, if any).
    public let keys: QueueKeys
    public let servedKeys: [QueueKeys]
    let logger: Logger
    /// The apps and keys it sends with, as a reload changes them.
    let registry: AppRegistry
    /// Serializes reloads: each re-reads the whole file.
    let reloading = Mutex(())
    private let gate: InFlightGate
    let ioThreads: [IOThread]
    /// One per key set served.
    private let housekeepers: [Housekeeper]
    /// Behind Sentinel, the master the sentinels name.
    private let masterWatch: MasterWatch?
    public let metrics: Metrics
    public let health: HealthState
    private var healthServer: HealthServer?

    public init(configuration: WorkerConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        workerID = configuration.workerID ?? Worker.defaultID()
        servedKeys = configuration.servedKeys
        keys = servedKeys[0]
        metrics = Metrics()
        health = HealthState()
        registry = try AppRegistry(configuration: configuration)
        let gate = InFlightGate(sendingCapacity: configuration.sendingCapacity, recordingCapacity: configuration.recordingCapacity)
        self.gate = gate
        var settings = APNSSender.Settings(
            connectionsPerApp: configuration.connections, streamsPerConnection: configuration.streams,
            requestTimeoutMs: configuration.requestTimeoutMs,
            credentialPauseMs: configuration.credentialPauseMs,
            pingIntervalMs: configuration.pingIntervalMs, pingTimeoutMs: configuration.pingTimeoutMs,
            connectTimeoutMs: configuration.connectTimeoutMs,
            rejections: RejectionPolicy(retry: configuration.retryPolicy))
        settings.ratePerConnection = configuration.ratePerConnection
        settings.maxAgeMs = configuration.maxAgeSeconds.map { $0 * 1000 }
        settings.logRejections = configuration.logRejections
        settings.logWholeTokens = configuration.logTokens == "whole"
        let (runtimes, apps, metrics, health, batchIDs, id, served) = (
            registry.snapshot.runtimes, registry.snapshot.apps, metrics, health, BatchIDs(), workerID, servedKeys
        )
        let leases = served.map { _ in LeaseGuard(leaseMs: configuration.leaseMs) }
        let masterWatch = configuration.redis.sentinel == nil ? nil : MasterWatch(leases: leases)
        self.masterWatch = masterWatch
        // Each queue's templates, read from its own keys.
        let queues = configuration.servedQueues
        let templates = try queues.map {
            try TemplateSource(directory: configuration.templatesDirectory, redisKey: QueueKeys(queue: $0.name).templates, logger: logger)
        }
        let queueOfSet = served.map { set in queues.firstIndex { $0.name == set.queue } ?? 0 }
        let setsOfQueue = queues.indices.map { q in queueOfSet.filter { $0 == q }.count }
        let setsOfThread = (0..<configuration.ioThreads).map {
            LaneAssignment.keySets(thread: $0, threads: configuration.ioThreads, setsOfQueue: setsOfQueue)
        }
        let shares = queues.count < 2 ? nil : QueueShares(queues, queueOfLane: setsOfThread.flatMap { $0.map { queueOfSet[$0] } })
        var nextShareLane = 0
        // Each I/O thread fetches, sends and records its own jobs, on its own loop, for each
        // key set it serves.
        ioThreads = try (0..<configuration.ioThreads).map { i in
            let loop = try EventLoop()
            let sets = setsOfThread[i]
            let completers = sets.enumerated().map { lane, set in
                Completer(
                    keys: served[set], workerID: id, configuration: configuration, gate: gate, metrics: metrics, logger: logger, loop: loop,
                    lane: lane)
            }
            let name = "apns-io-\(i)"
            let sender = APNSSender(
                name: name, apps: runtimes, settings: settings, logger: logger, metrics: metrics, health: health,
                loop: loop, sink: completers.count == 1 ? completers[0] : LaneSink(completers, gate: gate))
            let thread = IOThread(name: name, loop: loop, transport: sender)
            thread.lanes = zip(sets, completers).map { set, completer in
                let fetcher = Fetcher(
                    keys: served[set], workerID: id, configuration: configuration, apps: apps, completer: completer,
                    gate: gate, batchIDs: batchIDs, lease: leases[set], templates: templates[queueOfSet[set]], loop: loop, logger: logger
                ) { [unowned sender] in sender.accept($0) }
                fetcher.shares = shares
                fetcher.shareLane = nextShareLane
                nextShareLane += 1
                fetcher.redis.masterWatch = masterWatch
                completer.redis.masterWatch = masterWatch
                let label = served.count == 1 ? name : "\(name) \(served[set].label)"
                fetcher.reportRedis(to: health, as: "fetcher \(label)")
                completer.reportRedis(to: health, as: "completer \(label)")
                return Lane(fetcher: fetcher, completer: completer, strict: queues[queueOfSet[set]].isStrict)
            }
            return thread
        }
        let lanes = ioThreads.flatMap(\.lanes)
        housekeepers = served.enumerated().map { set, keys in
            let completers = lanes.map(\.completer).filter { $0.keys == keys }
            let housekeeper = Housekeeper(
                keys: keys, workerID: id, configuration: configuration, metrics: metrics, logger: logger, ownBatches: batchIDs.prefix,
                lease: leases[set], held: { Set(completers.flatMap { $0.unfinished.held.map(\.id) }) },
                masterWatch: masterWatch, writesMayDuplicate: set == 0)
            housekeeper.reportRedis(to: health)
            return housekeeper
        }
    }

    /// Serves /metrics, /healthz and /readyz if the configuration names a port. Returns the port.
    @discardableResult
    public func startHealthServer() throws -> Int? {
        guard let port = configuration.metricsPort else { return nil }
        let server = try HealthServer(port: port, host: configuration.metricsHost, worker: self, logger: logger)
        healthServer = server
        server.start()
        return server.port
    }

    static func defaultID() -> String {
        "\(hostName())-\(getpid())"
    }

    public func start() {
        checkCertificates()
        logCredentialWarnings(configuration.apps)
        let startedMs = WallClock.nowMilliseconds()
        let host = Worker.hostName()
        // Each queue's workers hash lists this worker.
        for housekeeper in housekeepers where housekeeper.hasQueueDuties {
            housekeeper.describeWorker = { [unowned self] in describe(startedMs: startedMs, host: host) }
        }
        for housekeeper in housekeepers {
            housekeeper.recoverPreviousRun()
            housekeeper.start()
        }
        for thread in ioThreads { thread.start() }
        masterWatch?.start(endpoint: configuration.redis, logger: logger)
        logger.info(
            "worker started",
            [
                "worker": .string(workerID), "queue": .string(configuration.queue), "shards": .int(configuration.shards),
                "queues": .string(configuration.servedQueues.map(\.summary).joined(separator: ", ")),
                "redis": .string(configuration.redis.description),
                "apps": .string(configuration.apps.map(\.name).joined(separator: ",")), "io_threads": .int(configuration.ioThreads),
                "connections": .int(configuration.connections), "streams": .int(configuration.streams),
            ])
    }

    func logCredentialWarnings(_ apps: [AppConfiguration]) {
        for warning in apps.flatMap(\.credentialWarnings) { logger.warning("a private key is not private", ["detail": .string(warning)]) }
    }

    /// Logs a warning 30 days before a client certificate expires, and an error once it has.
    /// Returns the apps whose certificate has expired.
    @discardableResult
    public func checkCertificates(now: Int64 = Int64(Date().timeIntervalSince1970)) -> [String] {
        var expired: [String] = []
        for app in appRuntimes {
            let info: CertificateInfo
            do {
                switch app.configuration.credential {
                case .token, .serviceAccount: continue
                case .certificate(let file, _): info = try CertificateInfo.read(pemFile: file)
                case .pkcs12(let file, let password): info = try CertificateInfo.read(pkcs12File: file, password: password)
                }
            } catch {
                logger.error("cannot read the app's certificate", ["app": .string(app.name), "error": .string("\(error)")])
                continue
            }
            let days = Int((info.notAfter - now) / 86_400)
            let fields: [String: LogValue] = ["app": .string(app.name), "days_left": .int(days), "subject_uid": .string(info.subjectUID ?? "")]
            if info.notAfter <= now {
                logger.error("the app's APNs certificate has expired", fields)
                expired.append(app.name)
            } else if days < 30 {
                logger.warning("the app's APNs certificate expires within 30 days", fields)
            }
        }
        return expired
    }

    /// The control plane's periodic work: keep every JWT fresh, check certificates daily.
    public func maintain() async {
        var lastCertificateCheck = Date()
        let interval = max(1, min(30, configuration.tokenRefreshSeconds / 4))
        while !Task.isCancelled {
            try? await Task.sleep(for: .seconds(interval))
            if Date().timeIntervalSince(lastCertificateCheck) >= 86_400 {
                checkCertificates()
                lastCertificateCheck = Date()
            }
            for app in appRuntimes {  // a retired key's drain, if it outlives a JWT, mints on ExpiredProviderToken
                if let token = app.credential as? FCMAccessToken {
                    renew(token, of: app.name)
                    continue
                }
                guard let jwt = app.jwt else { continue }
                do {
                    if try jwt.refreshIfDue() {
                        metrics.record { $0.add("apns_jwt_mints_total", .init(("app", app.name))) }
                        logger.info("minted a new provider token", ["app": .string(app.name), "key_id": .string(jwt.keyID)])
                    }
                } catch {
                    logger.error("cannot mint a provider token", ["app": .string(app.name), "error": .string("\(error)")])
                }
            }
        }
    }

    /// In-flight gauge and app list for the health server.
    var inFlight: Int { gate.current }
    var appRuntimes: [AppRuntime] {
        let now = registry.snapshot
        return now.runtimes.indices.filter { now.active[$0] }.map { now.runtimes[$0] }
    }

    /// Stops taking jobs, lets in-flight ones finish within the grace period, writes their
    /// outcomes, and hands any still unfinished back to the queue.
    public func shutdown() {
        logger.info("stopping: no new jobs; finishing those in flight", ["in_flight": .int(gate.current)])
        for lane in ioThreads.flatMap(\.lanes) { lane.fetcher.stop() }
        let drained = gate.waitUntilEmpty(timeout: Double(configuration.shutdownGraceMs) / 1000)
        for thread in ioThreads { thread.stop() }  // each writes the outcomes it holds
        for housekeeper in housekeepers { housekeeper.stop() }
        masterWatch?.stop()
        healthServer?.stop()
        var handedBack: Int64 = 0
        for (set, keys) in servedKeys.enumerated() {
            do {
                let redis = try BlockingRedisConnection(configuration.redis.routed(toKey: keys.jobs), timeoutMs: 5000)
                handedBack += try InFlightJobs.handBack(redis, keys, worker: workerID)
                guard keys.shard == nil else { continue }
                _ = try redis.command(["HDEL", keys.workerInfo, workerID])
                _ = try redis.command(["HDEL", keys.paused] + Set(registry.snapshot.runtimes.map(\.name)).map { "\($0)/\(workerID)" })
                if set == 0 { try housekeepers[0].writeMayDuplicate(redis) }
            } catch {
                logger.error(
                    "cannot hand unfinished jobs back; they will be recovered when the lease runs out",
                    ["keys": .string(keys.label), "error": .string("\(error)")])
            }
        }
        logger.info("stopped", ["drained": .string(drained ? "yes" : "no"), "handed_back": .int(Int(handedBack))])
    }
}
