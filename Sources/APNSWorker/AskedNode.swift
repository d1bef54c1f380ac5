import IOLoop
import RedisClient
import Telemetry

/// The node a `-ASK` named, for the connection whose group it redirects: a second pipe in the
/// loop that sends the group there after ASKING and hands its answer back. Kept open while
/// the slot stays half-moved, so that each redirected group does not cost a connect. Loop
/// thread only.
final class AskedNode: EventHandler {
    let node: RedisSentinel.Address
    private let pipe: NonBlockingRedisConnection
    private let loop: EventLoop
    private var watchingWrites = true
    private var redirect: AskRedirect
    /// When the group now redirected was sent; 0 when none awaits its answer.
    private(set) var sentAtMs: UInt64 = 0
    private let answered: (RedisFlatReply) throws(RedisError) -> Void
    private let failed: (RedisError) -> Void

    init(
        _ redirect: AskRedirect, from endpoint: RedisEndpoint, loop: EventLoop, answered: @escaping (RedisFlatReply) throws(RedisError) -> Void,
        failed: @escaping (RedisError) -> Void
    ) throws(RedisError) {
        node = redirect.node
        self.redirect = redirect
        self.loop = loop
        self.answered = answered
        self.failed = failed
        pipe = try NonBlockingRedisConnection(redirect.endpoint(from: endpoint))
        do { try loop.register(fd: pipe.fd, handler: self, writable: true) } catch { throw .io("\(node): \(error)") }
    }

    /// Sends the redirected group (ASKING is in it, just before its command).
    func send(_ redirect: AskRedirect) {
        self.redirect = redirect
        sentAtMs = MonotonicClock.nowMilliseconds()
        do throws(RedisError) {
            try pipe.send(redirect.commands, skipping: redirect.skipping)
            if pipe.isConnected { try pipe.writable() }
            watchWrites()
        } catch {
            failed(named(error))
        }
    }

    /// Whether the answer is later than `timeoutMs`: a node that hangs holds up only this key set.
    func isLate(_ nowMs: UInt64, timeoutMs: UInt64) -> Bool { sentAtMs > 0 && nowMs - sentAtMs > timeoutMs }

    /// The error, naming this node and why it was asked (a slot on the move: the key set waits).
    func named(_ error: RedisError) -> RedisError { redirect.named(error) }

    func close() {
        loop.unregister(fd: pipe.fd)
        pipe.abandon()
    }

    private func watchWrites() {
        guard pipe.wantsWrite != watchingWrites else { return }
        watchingWrites = pipe.wantsWrite
        loop.setWritable(fd: pipe.fd, watchingWrites)
    }

    func handleEvents(readable: Bool, writable: Bool, hangup: Bool) {
        do throws(RedisError) {
            if writable { try pipe.writable() }
            if readable || hangup {
                try pipe.readable()
                if let reply = try pipe.nextReply() {
                    sentAtMs = 0
                    return try answered(reply)
                }
                // The importing node redirects nothing; an ASK from it is a fault.
                if let again = pipe.takeRedirect() { throw RedisError.io("it answered ASK \(again.slot) \(again.node) in turn") }
            }
            watchWrites()
        } catch {
            failed(named(error))
        }
    }
}
