import Glibc
import IOLoop
import RedisClient
import Synchronization
import Telemetry

/// The master that Redis Sentinel names, watched once a second on a thread of its own (issue
/// 44, item 1: after SENTINEL FAILOVER the old master took writes for about 10 s more, and
/// workers kept fetching and sending from it). When the sentinels name another master, every
/// Redis connection of the process drops and reconnects there, and every lease counts as
/// lapsed: nothing more fetched from the demoted master is sent until the new master has said
/// which batches are still this worker's (`Fetcher.confirmed`).
final class MasterWatch: Sendable {
    private let generation = Atomic<Int>(0)
    private let leases: [LeaseGuard]

    private let runner = ThreadRunner()

    init(leases: [LeaseGuard]) { self.leases = leases }

    /// Asks the sentinels once a second, on a thread of its own: no Redis call that waits out
    /// a dead master's backoff delays seeing the new one, or ending a hold.
    func start(endpoint: RedisEndpoint, logger: Logger) {
        runner.start(name: "apns-sentinels") { [self] in
            var check = MasterCheck(endpoint: endpoint)
            while runner.isRunning {
                if let event = check.look(nowMs: MonotonicClock.nowMilliseconds()) { follow(event, logger: logger) }
                usleep(100_000)
            }
        }
    }

    func stop() { runner.stop() }

    func follow(_ event: MasterCheck.Event, logger: Logger) {
        switch event {
        case .failingOver:
            logger.warning("a sentinel flags a failover of the master: nothing is sent until the sentinels name the master", [:])
            failoverStarted()
        case .settled:
            logger.info("the failover ended with the same master: sends go on", [:])
            failoverAborted()
        case .switched(let old, let new, let sinceMs):
            logger.warning(
                "the sentinels named a new master: every connection moves there, and nothing fetched from the old one is sent before the new one confirms it",
                ["old_master": .string(old), "new_master": .string(new)])
            switched(sinceMs: sinceMs)
        }
    }

    /// Bumped at each switch: a connection that saw an older one reconnects.
    var current: Int { generation.load(ordering: .acquiring) }

    /// A sentinel says a failover is under way: nothing is sent (fetched jobs wait) until the
    /// sentinels name the master, the new one or the same.
    var failingOver: Bool { holding.load(ordering: .acquiring) }
    private let holding = Atomic<Bool>(false)

    func failoverStarted() { holding.store(true, ordering: .releasing) }

    /// The failover ended with the same master: sends go on.
    func failoverAborted() { holding.store(false, ordering: .releasing) }

    /// The sentinels named another master, which they did not yet at `sinceMs` (monotonic).
    func switched(sinceMs: UInt64) {
        for lease in leases { lease.lapse(failoverSinceMs: sinceMs) }
        generation.add(1, ordering: .releasing)
        holding.store(false, ordering: .releasing)
    }
}

/// What the watch asks: which master the sentinels name, at most once a second.
struct MasterCheck {
    let endpoint: RedisEndpoint
    private var known: String?
    private var lastMs: UInt64 = 0
    /// When the sentinels last named the known master.
    private var sameSinceMs: UInt64 = 0

    init(endpoint: RedisEndpoint) { self.endpoint = endpoint }

    enum Event: Equatable {
        /// A sentinel flags a failover of the master it still names.
        case failingOver
        /// No failover is flagged any more, and the master is the same.
        case settled
        /// The sentinels name another master; the old one may have stopped being master
        /// since `sinceMs`: a second before they last named it with no failover under way
        /// (the sentinel that leads a failover flags it; another names the new master a second
        /// or two after the promotion).
        case switched(old: String, new: String, sinceMs: UInt64)
    }

    /// What changed since the last look, asking at most once a second.
    mutating func look(nowMs: UInt64) -> Event? {
        guard nowMs >= lastMs + 1000 else { return nil }
        lastMs = nowMs
        guard let view = try? endpoint.sentinelView(timeoutMs: 1000) else { return nil }
        let since = sameSinceMs > 1000 ? sameSinceMs - 1000 : 0
        let wasFailingOver = failingOver
        defer {
            known = view.address
            failingOver = view.failingOver
            if !view.failingOver { sameSinceMs = nowMs }
        }
        if let old = known, old != view.address { return .switched(old: old, new: view.address, sinceMs: since) }
        if view.failingOver != wasFailingOver { return view.failingOver ? .failingOver : .settled }
        return nil
    }
    private var failingOver = false
}

/// The jobs of each fetch of the last 10 s, by the time it was sent (monotonic ms).
struct RecentFetches {
    private var fetches: [(atMs: UInt64, jobs: Int)] = []

    mutating func add(jobs: Int, atMs: UInt64) {
        fetches.append((atMs, jobs))
        if let first = fetches.first, first.atMs + 10_000 < atMs { fetches.removeAll { $0.atMs + 10_000 < atMs } }
    }

    func jobs(since: UInt64) -> Int { fetches.reduce(0) { $0 + ($1.atMs >= since ? $1.jobs : 0) } }
}
