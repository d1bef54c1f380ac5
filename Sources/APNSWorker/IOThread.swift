import APNSTransport
import Delivery
import Dispatch
import FoundationEssentials
import IOLoop
import PointerTricks
import QueueContract
import Synchronization

/// What sends an I/O thread's requests: the APNs transport today; another provider would sit
/// beside it, behind the same calls, without the fetcher or the completer changing.
protocol NotificationTransport: AnyObject {
    /// Opens connections. Loop thread.
    func start()
    /// Queues a batch of requests. Loop thread.
    func accept(_ batch: [SendRequest?])
    /// Sends what fits, once per loop turn. Loop thread.
    func dispatch()
    /// The lanes whose sends wait (their lease may have lapsed); the others' go. Loop thread.
    var heldLanes: Set<Int> { get }
    func hold(lanes: Set<Int>)
    /// Drops the queued sends of batches another worker took back. Loop thread.
    @discardableResult func dropTakenBack() -> Int
    /// Closes every connection. Loop thread.
    func close()
    /// Takes the apps after a reload: its own runtimes from the snapshot, which only ever grows;
    /// `active` ones take new jobs. Loop thread.
    func update(_ snapshot: AppRegistry.Snapshot)
}

extension APNSSender: NotificationTransport {
    func update(_ snapshot: AppRegistry.Snapshot) { update(apps: snapshot.runtimes, active: snapshot.active) }
}

/// One I/O thread of the pipeline: one event loop that fetches its jobs, sends them through
/// its transport and writes their outcomes (DESIGN.md §1), for each key set it serves (`lanes`).
final class IOThread: @unchecked Sendable {  // started and stopped from the control plane; runs on its own thread
    let name: String
    let loop: EventLoop
    let transport: NotificationTransport
    /// Take this thread's jobs from Redis and write their outcomes, on its loop (set before `start`).
    var lanes: [Lane] = [] {
        didSet { hasStrictLanes = lanes.contains(where: \.strict) }
    }
    private var hasStrictLanes = false
    /// Which lane fetches first this turn: each in turn, so that no shard waits behind another.
    private var firstLane = 0

    init(name: String, loop: EventLoop, transport: NotificationTransport) {
        self.name = name
        self.loop = loop
        self.transport = transport
        // Uncounted: this object owns the loop; a checked reference counted once per loop turn.
        let thread = UncountedReference(self)
        loop.afterEvents = { thread.withObject { $0.turnEnded() } }
    }

    private func turnEnded() {
        // Nothing of a lane (a key set) is sent while its lease may have lapsed; once Redis has
        // said which batches are still ours, the others' sends go, before anything else is
        // sent. A key set that waits (its slot half-moved, its node gone) holds up no other.
        let nowMs = loop.iterationNs / 1_000_000
        var held: Set<Int> = []
        for (i, lane) in lanes.enumerated() where !lane.fetcher.leaseHolds(nowMs: nowMs) { held.insert(i) }
        if !transport.heldLanes.isSubset(of: held) {
            let dropped = transport.dropTakenBack()
            // Sent from batches a failover left on the demoted master: each may go twice.
            let gone = lanes.reduce(0) { $0 + $1.fetcher.takeFailoverJobs() }
            if gone > dropped { lanes[0].completer.metrics.mayDuplicate(gone - dropped, cause: "failover") }
        }
        transport.hold(lanes: held)
        transport.dispatch()
        let n = lanes.count
        guard n > 1 else { return lanes.first?.fetcher.fetchIfRoom() ?? () }
        // A strict queue's lanes ask for the room first (`queues`).
        for strict in hasStrictLanes ? [true, false] : [false] {
            for k in 0..<n where !hasStrictLanes || lanes[(firstLane + k) % n].strict == strict {
                lanes[(firstLane + k) % n].fetcher.fetchIfRoom()
            }
        }
        firstLane = (firstLane + 1) % n
    }

    func start() {
        OSThread.start(name: name) { [self] in
            transport.start()
            for lane in lanes {
                lane.fetcher.start()
                lane.completer.start()
            }
            loop.run()
        }
    }

    /// Hands the apps of a reload to the transport, then to the fetchers, on the loop: no job
    /// resolves to a runtime the transport does not have yet. Any thread.
    func update(_ snapshot: AppRegistry.Snapshot) {
        loop.execute { [self] in
            transport.update(snapshot)
            for lane in lanes { lane.fetcher.update(snapshot) }
        }
    }

    /// Closes every connection, lets the completers write what they hold, and ends the thread;
    /// returns once it has ended. Unsent jobs stay in Redis in flight.
    func stop() {
        let ended = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            transport.close()
            let left = Countdown(max(1, lanes.count))
            let end: @Sendable () -> Void = { [loop] in
                guard left.isLast() else { return }
                loop.stop()
                ended.signal()
            }
            if lanes.isEmpty { return end() }
            for lane in lanes { lane.completer.finish(then: end) }
        }
        _ = ended.wait(timeout: .now() + .seconds(30))
    }
}

/// Counts the completers still finishing; the last one ends the thread.
private final class Countdown: Sendable {
    private let left: Mutex<Int>
    init(_ n: Int) { left = Mutex(n) }
    func isLast() -> Bool {
        left.withLock {
            $0 -= 1; return $0 == 0
        }
    }
}
