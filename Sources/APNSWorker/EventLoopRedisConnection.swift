import APNSTransport
import IOLoop
import RedisClient
import Telemetry

/// What a `EventLoopRedisConnection` tells its owner, on the loop's thread.
protocol EventLoopRedisOwner: AnyObject {
    /// Connected (again): requests can be sent.
    func redisConnected()
    /// The replies of the oldest group sent, read flat (valid during the call). An error thrown
    /// drops the connection, as one from Redis would.
    func redisReplied(_ reply: RedisFlatReply) throws(RedisError)
    /// The connection is gone, with the replies of every group sent. It is tried again after a
    /// backoff pause unless `close()` was called.
    func redisFailed(_ error: RedisError)
}

/// A `NonBlockingRedisConnection` in an event loop's epoll set: connects and reconnects with
/// capped, jittered backoff, hands each group's replies to its owner in order, and drops a
/// connection whose reply is late, as a blocking call's timeout would. Loop thread only.
final class EventLoopRedisConnection: EventHandler {
    private let endpoint: RedisEndpoint
    private let resolver: HostResolver
    /// Connects so far: each tries the next of the host's addresses.
    private var attempts = 0
    private let loop: EventLoop
    private let logger: Logger
    /// Weak: the owner holds this object. Read once per reply group, not per job.
    weak var owner: EventLoopRedisOwner?
    private var pipe: NonBlockingRedisConnection?
    private var watchingWrites = false
    private var pause = RedisRetryPause()
    /// Connected after failures: "reconnected" is said, and the backoff reset, once a reply came.
    private var recovering = false
    /// Behind Sentinel: a switch of master drops the connection, to reconnect to the new one.
    var masterWatch: MasterWatch?
    private var masterSeen = 0
    /// Since when a reply has been awaited (or the connect has been under way).
    private var waitingSinceMs: UInt64 = 0
    private var closed = false
    /// The node a `-ASK` sent a group to; while its answer is awaited, the replies of the groups
    /// after it wait in the pipe, so that the owner reads every answer in order.
    private var asked: AskedNode?
    private var holding = false
    /// Where its state goes, for /readyz and apns_redis_up (`report(to:as:)`).
    private var health: HealthState?
    private var label = ""
    /// A reply not read this long after its request (a blocking wait is 1 s) means a Redis that
    /// hangs.
    /// A reply later than this drops the connection: well within the lease (a third of it, 5 s
    /// at most), so that a dead link is noticed while the lease still holds.
    private let replyTimeoutMs: UInt64

    init(_ endpoint: RedisEndpoint, loop: EventLoop, logger: Logger, replyTimeoutMs: Int = 5000, resolver: HostResolver = HostResolver()) {
        self.replyTimeoutMs = UInt64(replyTimeoutMs)
        self.endpoint = endpoint
        self.resolver = resolver
        self.loop = loop
        self.logger = logger
    }

    /// Tells `health` of each connect and failure, as `name`.
    func report(to health: HealthState, as name: String) {
        self.health = health
        label = name
        health.redis(name, error: "not connected yet")
    }

    /// Connects, and checks for late replies once a second.
    func start() {
        connect()
        scheduleTimeoutCheck()
    }

    /// Whether requests can be sent now.
    var isReady: Bool { pipe?.isConnected ?? false }

    /// Queues `commands` as one group (`NonBlockingRedisConnection.send`) and writes what the socket takes. On
    /// an error the connection is dropped (`redisFailed`), this group's replies with the rest.
    func send(_ commands: [RedisArgs], skipping: Int = 0) {
        send { (p) throws(RedisError) in try p.send(commands, skipping: skipping) }
    }

    /// Queues what `body` adds to the pipe and writes what the socket takes (as `send(_:skipping:)`).
    func send(_ body: (NonBlockingRedisConnection) throws(RedisError) -> Void) {
        // No connection: a reconnect is on its way (or the owner closed it).
        guard let pipe else {
            owner?.redisFailed(.io("\(endpoint): not connected"))
            return
        }
        do throws(RedisError) {
            if !pipe.isWaiting { waitingSinceMs = MonotonicClock.nowMilliseconds() }
            try body(pipe)
            if pipe.isConnected { try pipe.writable() }
            watchWrites()
        } catch {
            failed(error)
        }
    }

    /// Closes the connection for good.
    func close() {
        closed = true
        drop()
    }

    /// Looks the host up (off the loop for a name) and connects to one of its addresses, given
    /// to hiredis in numbers so that it looks nothing up on this thread.
    private func connect() {
        guard !closed else { return }
        guard endpoint.sentinel != nil || endpoint.cluster != nil else { return connect(to: endpoint) }
        // Behind Sentinel or on a cluster: the sentinels or the cluster's nodes are asked off
        // the loop (blocking calls, seconds when one is down), and the master they name must
        // say ROLE master; then it is dialled.
        let asking = endpoint, timeoutMs = Int(replyTimeoutMs)
        loop.runOffLoop({ Result { () throws(RedisError) in try BlockingRedisConnection(asking, timeoutMs: timeoutMs).endpoint } }) {
            [weak self] result in
            guard let self, !closed else { return }
            switch result {
            case .success(let master): connect(to: master)
            case .failure(let error): failed(error)
            }
        }
    }

    private func connect(to endpoint: RedisEndpoint) {
        guard endpoint.socket == nil else { return open(endpoint) }
        resolver.resolve(endpoint.host, port: endpoint.port, on: loop) { [weak self] result in
            guard let self, !closed else { return }
            switch result {
            case .success(let found) where found.isEmpty:
                failed(.io("\(endpoint): the name has no address"))
            case .success(let found):
                // IPv4 first, as hiredis orders a name's addresses itself.
                let addresses = found.filter(\.isIPv4) + found.filter { !$0.isIPv4 }
                var numeric = endpoint
                // TLS checks the certificate against the name, not the address dialled.
                numeric.tls?.serverName = endpoint.tls?.serverName ?? endpoint.host
                numeric.host = addresses[attempts % addresses.count].numericHost
                attempts += 1
                open(numeric)
            case .failure(let error):
                failed(.io("\(endpoint): \(error)"))
            }
        }
    }

    private func open(_ endpoint: RedisEndpoint) {
        do throws(RedisError) {
            let p = try NonBlockingRedisConnection(endpoint)
            do { try loop.register(fd: p.fd, handler: self, writable: true) } catch { throw .io("\(error)") }
            pipe = p
            watchingWrites = true
            waitingSinceMs = MonotonicClock.nowMilliseconds()
        } catch {
            failed(error)
        }
    }

    private func drop(abandoning: Bool = false) {
        asked?.close()
        asked = nil
        holding = false
        guard let p = pipe else { return }
        loop.unregister(fd: p.fd)
        if abandoning { p.abandon() }
        pipe = nil
    }

    private func failed(_ error: RedisError) {
        drop(abandoning: true)
        let fix = error.mistake
        if !closed { health?.redis(label, error: error.description + (fix.map { ": \($0)" } ?? "")) }
        let delay = pause.delayMs(after: error)
        recovering = true
        if !closed {
            RedisTrouble.log(error, fix: fix, endpoint: endpoint, retryMs: delay, logger: logger)
            loop.schedule(afterMilliseconds: delay) { [weak self] in self?.connect() }
        }
        owner?.redisFailed(error)
    }

    /// The sentinels named another master: what this connection awaits is lost with it, and a
    /// new one asks them again at once.
    private func moved() {
        drop(abandoning: true)
        recovering = true
        logger.info("reconnecting to the master the sentinels name now", ["redis": .string(endpoint.description)])
        owner?.redisFailed(.io("\(endpoint): the sentinels named another master"))
        connect()
    }

    /// A command succeeded on a new connection: only now is Redis back.
    private func recovered() {
        recovering = false
        if pause.succeeded() { logger.info("reconnected to Redis", ["redis": .string(endpoint.description)]) }
    }

    private func scheduleTimeoutCheck() {
        loop.schedule(afterMilliseconds: Int(min(250, max(50, replyTimeoutMs / 4)))) { [weak self] in
            guard let self, !closed else { return }
            let now = MonotonicClock.nowMilliseconds()
            if let pipe, !pipe.isConnected || pipe.isWaiting, now - waitingSinceMs > replyTimeoutMs {
                failed(.timeout("\(endpoint): no reply in \(replyTimeoutMs) ms"))
            } else if let asked, asked.isLate(now, timeoutMs: replyTimeoutMs) {
                failed(asked.named(.timeout("no reply in \(replyTimeoutMs) ms")))
            }
            if let masterWatch, masterWatch.current != masterSeen {
                masterSeen = masterWatch.current
                if pipe != nil { moved() }
            }
            scheduleTimeoutCheck()
        }
    }

    private func watchWrites() {
        guard let pipe, pipe.wantsWrite != watchingWrites else { return }
        watchingWrites = pipe.wantsWrite
        loop.setWritable(fd: pipe.fd, watchingWrites)
    }

    func handleEvents(readable: Bool, writable: Bool, hangup: Bool) {
        guard let pipe else { return }
        do throws(RedisError) {
            if writable {
                let connecting = !pipe.isConnected
                try pipe.writable()
                if connecting {
                    health?.redis(label, error: nil)
                    owner?.redisConnected()
                }
            }
            if readable || hangup {
                try pipe.readable()
                try deliver(pipe)
            }
            watchWrites()
        } catch {
            failed(error)
        }
    }

    /// Hands the owner each group's replies that have arrived, in order, until one was
    /// answered `-ASK`: that group goes to the node named, and the rest wait for its answer.
    private func deliver(_ pipe: NonBlockingRedisConnection) throws(RedisError) {
        while self.pipe === pipe, !holding {
            if let reply = try pipe.nextReply() {
                try handOver(reply)
            } else if let redirect = pipe.takeRedirect() {
                try follow(redirect, from: pipe)
            } else {
                return
            }
        }
    }

    /// ASKING and the group at the node a `-ASK` named (the map is not read again: the slot is
    /// still the old node's). That node's error drops the connection like any Redis error.
    private func follow(_ redirect: AskRedirect, from pipe: NonBlockingRedisConnection) throws(RedisError) {
        if asked?.node != redirect.node {
            asked?.close()
            asked = try AskedNode(
                redirect, from: pipe.endpoint, loop: loop,
                answered: { [unowned self] (reply) throws(RedisError) in try answeredAtAskedNode(reply, pipe) },
                failed: { [unowned self] error in failed(error) })
        }
        holding = true
        asked?.send(redirect)
    }

    private func answeredAtAskedNode(_ reply: RedisFlatReply, _ pipe: NonBlockingRedisConnection) throws(RedisError) {
        holding = false
        try handOver(reply)
        try deliver(pipe)
        watchWrites()
    }

    /// One group's replies to the owner: the first after failures says Redis is back.
    private func handOver(_ reply: RedisFlatReply) throws(RedisError) {
        waitingSinceMs = MonotonicClock.nowMilliseconds()
        try owner?.redisReplied(reply)
        if recovering { recovered() }
    }
}
