import APNSCore
import FoundationEssentials
import Glibc
import IOLoop
import QueueContract
import RedisClient
import Telemetry

/// A small HTTP/1.1 server on its own thread: `/metrics` (Prometheus text), `/healthz`
/// (the process is alive) and `/readyz` (Redis reachable, every app able to send, JWTs valid).
final class HealthServer: @unchecked Sendable {
    private let fd: Int32
    let port: Int
    private unowned let worker: Worker
    private let logger: Logger
    private let runner = ThreadRunner()
    /// One connection per key set served (on a cluster they may be on different nodes).
    private var redis: [String: BlockingRedisConnection] = [:]

    init(port: Int, host: String, worker: Worker, logger: Logger) throws {
        (fd, self.port) = try Socket.listen(host: host, port: port)
        self.worker = worker
        self.logger = logger
    }

    func start() {
        runner.start(name: "apns-health") { [self] in
            logger.info("serving /metrics, /healthz and /readyz", ["port": .int(port)])
            while runner.isRunning {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 500) > 0, let client = Socket.accept(fd) else { continue }
                serve(client)
                close(client)
            }
            close(fd)
        }
    }

    func stop() { runner.stop() }

    private func serve(_ client: Int32) {
        let flags = fcntl(client, F_GETFL)
        _ = fcntl(client, F_SETFL, flags & ~O_NONBLOCK)
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var request = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 4096)
        while request.count < 8192, !request.ends(with: [13, 10, 13, 10]) {
            let n = read(client, &buf, buf.count)
            if n <= 0 { break }
            request.append(contentsOf: buf[0..<n])
        }
        let line = String(decoding: request.prefix(while: { $0 != 13 && $0 != 10 }), as: UTF8.self).split(separator: " ")
        let (status, type, body): (Int, String, String)
        switch (line.first, line.count > 1 ? String(line[1].split(separator: "?").first ?? "") : "") {
        case ("GET"?, "/metrics"): (status, type, body) = (200, "text/plain; version=0.0.4", metrics())
        case ("GET"?, "/healthz"): (status, type, body) = (200, "text/plain", "ok\n")
        case ("GET"?, "/readyz"):
            let (ready, report) = readiness()
            (status, type, body) = (ready ? 200 : 503, "application/json", report)
        case ("GET"?, _): (status, type, body) = (404, "text/plain", "not found\n")
        default: (status, type, body) = (405, "text/plain", "method not allowed\n")
        }
        let reason = [200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"][status] ?? "OK"
        let head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        let out = Array((head + body).utf8)
        _ = out.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
    }

    /// Since when each key set's oldest queued job has been the oldest, as last scraped.
    private var oldest = OldestJobWatch()

    private func metrics() -> String {
        let now = WallClock.nowMilliseconds()
        // Each queue's depth over its key sets, and the age of the oldest job in any.
        var reads: [(queue: Metrics.Labels, read: (depth: Int64, oldestSinceMs: Int64)?)] = []
        for queue in worker.configuration.servedQueues {
            var read: (depth: Int64, oldestSinceMs: Int64)? = (0, now)
            for keys in worker.servedKeys where keys.queue == queue.name {
                let tail = try? withRedis(keys) { r throws(RedisError) in
                    let replies = try r.pipeline([["LLEN", keys.jobs], ["LINDEX", keys.jobs, "-1"]].map { $0.map { Array($0.utf8) } })
                    guard case .string(let tail) = replies[1] else { return (replies[0].integer ?? 0, [UInt8]?.none) }
                    return (replies[0].integer ?? 0, tail)
                }
                guard let (depth, job) = tail, let sum = read else {
                    read = nil
                    continue
                }
                let since = oldest.since(keys.label, tail: job, nowMs: now)
                read = (sum.depth + depth, min(sum.oldestSinceMs, since ?? now))
            }
            reads.append((Metrics.Labels(("queue", queue.name)), read))
        }
        worker.metrics.record { m in
            m.set("apns_in_flight", .init(), Double(worker.inFlight))
            m.set("apns_redis_up", .init(), worker.health.redisProblems.isEmpty ? 1 : 0)
            for (queue, read) in reads {
                if let read {
                    m.set("apns_queue_depth", queue, Double(read.depth))
                    m.set("apns_queue_oldest_age_seconds", queue, Double(now - read.oldestSinceMs) / 1000)
                } else {
                    m.unset("apns_queue_depth", queue)
                    m.unset("apns_queue_oldest_age_seconds", queue)
                }
            }
        }
        return worker.metrics.render()
    }

    /// Not ready when Redis does not answer, an app has no usable connection, or a JWT is stale.
    private func readiness() -> (Bool, String) {
        var checks: [(String, Bool, String)] = []
        // The worker's own connections, each with its error: any answer from Redis proved little.
        let problems = worker.health.redisProblems
        checks.append(
            (
                "redis", problems.isEmpty,
                problems.isEmpty
                    ? "every connection to \(worker.configuration.redis.description) is up"
                    : problems.map { "\($0.connection): \($0.error)" }.joined(separator: "; ")
            ))
        let now = Int64(Date().timeIntervalSince1970)
        for app in worker.appRuntimes {
            if let why = worker.health.pauseReason(app: app.name) {
                checks.append(("app:\(app.name)", false, "paused: \(why)"))
                continue
            }
            checks.append(("app:\(app.name)", worker.health.isUsable(app: app.name), "a ready connection or a success in the last minute"))
            if let jwt = app.jwt {
                let age = now - jwt.issuedAt
                checks.append(("jwt:\(app.name)", age < 3300, "provider token \(age) s old"))
            }
        }
        let ready = checks.allSatisfy { $0.1 }
        var w = JSONWriter()
        w.beginObject()
        w.field("ready", ready)
        w.key("checks")
        w.beginObject()
        for (name, ok, detail) in checks {
            w.key(name)
            w.beginObject(); w.field("ok", ok); w.field("detail", detail); w.endObject()
        }
        w.endObject()
        w.endObject()
        return (ready, String(decoding: w.bytes, as: UTF8.self) + "\n")
    }

    /// One short-timeout connection per key set, replaced after any error.
    private func withRedis<R>(_ keys: QueueKeys, _ body: (BlockingRedisConnection) throws(RedisError) -> R) throws(RedisError) -> R {
        do throws(RedisError) {
            let r: BlockingRedisConnection
            if let open = redis[keys.label] {
                r = open
            } else {
                r = try BlockingRedisConnection(worker.configuration.redis.routed(toKey: keys.jobs), timeoutMs: 500)
                redis[keys.label] = r
            }
            return try body(r)
        } catch {
            redis[keys.label] = nil
            throw error
        }
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}
