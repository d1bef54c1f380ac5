import APNSTransport
import Dispatch
import FoundationEssentials
import IOLoop
import QueueContract

/// What sends an I/O thread's requests: the APNs transport today; another provider would sit
/// beside it, behind the same four calls, without the fetcher or the completer changing.
protocol NotificationTransport: AnyObject {
    /// Opens connections. Loop thread.
    func start()
    /// Queues a batch of requests. Loop thread.
    func accept(_ batch: [SendRequest?])
    /// Sends what fits, once per loop turn. Loop thread.
    func dispatch()
    /// While set, `dispatch` sends nothing new. Loop thread.
    var holdsSends: Bool { get set }
    /// Drops the queued sends of batches another worker took back. Loop thread.
    @discardableResult func dropTakenBack() -> Int
    /// Closes every connection. Loop thread.
    func close()
}

extension APNSSender: NotificationTransport {}

/// One I/O thread of the pipeline: one event loop that fetches its jobs, sends them through
/// its transport and writes their outcomes (DESIGN.md §1).
final class IOThread: @unchecked Sendable {  // started and stopped from the control plane; runs on its own thread
    let name: String
    let loop: EventLoop
    let transport: NotificationTransport
    /// Take this thread's jobs from Redis and write their outcomes, on its loop (set before `start`).
    var fetcher: Fetcher?
    var completer: Completer?

    init(name: String, loop: EventLoop, transport: NotificationTransport) {
        self.name = name
        self.loop = loop
        self.transport = transport
        // Unchecked: this object owns the loop; a checked reference counted once per loop turn.
        loop.afterEvents = { [unowned(unsafe) self] in
            // Nothing is sent while the lease may have lapsed; once Redis has said which batches
            // are still ours, the others' sends go, before anything else is sent.
            let holds = self.fetcher?.leaseHolds(nowMs: self.loop.iterationNs / 1_000_000) ?? true
            if holds, self.transport.holdsSends { self.transport.dropTakenBack() }
            self.transport.holdsSends = !holds
            self.transport.dispatch()
            self.fetcher?.fetchIfRoom()
        }
    }

    func start() {
        OSThread.start(name: name) { [self] in
            transport.start()
            fetcher?.start()
            completer?.start()
            loop.run()
        }
    }

    /// Closes every connection, lets the completer write what it holds, and ends the thread;
    /// returns once it has ended. Unsent jobs stay in Redis in flight.
    func stop() {
        let ended = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            transport.close()
            let end: @Sendable () -> Void = { [loop] in
                loop.stop()
                ended.signal()
            }
            if let completer { completer.finish(then: end) } else { end() }
        }
        _ = ended.wait(timeout: .now() + .seconds(30))
    }
}
