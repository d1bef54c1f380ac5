import Dispatch

/// Looks host names up away from the event loops. `getaddrinfo` blocks, for seconds when a DNS
/// server does not answer (resolv.conf's timeout times its attempts), and a loop thread stuck in
/// it would stop every connection it runs: reads, PINGs, Redis replies.
public struct HostResolver: Sendable {
    public typealias LookUp = @Sendable (_ host: String, _ port: Int) throws(SystemError) -> [SocketAddress]

    private let lookUp: LookUp

    /// `lookUp`: how a name is looked up; `getaddrinfo` unless a test stands in for DNS.
    public init(lookUp: @escaping LookUp = { host, port throws(SystemError) in try Socket.addresses(of: host, port: port) }) {
        self.lookUp = lookUp
    }

    /// Calls `done` on `loop`'s thread with `host`'s addresses: within this call for an address
    /// written in numbers, which needs no lookup; for a name, once a lookup on another thread
    /// ended. Call it on `loop`'s thread.
    public func resolve(_ host: String, port: Int, on loop: EventLoop, _ done: @escaping (Result<[SocketAddress], SystemError>) -> Void) {
        if let numeric = try? Socket.addresses(of: host, port: port, numericOnly: true) { return done(.success(numeric)) }
        loop.runOffLoop({ [lookUp] in Result { () throws(SystemError) in try lookUp(host, port) } }, then: done)
    }
}

extension EventLoop {
    /// Runs `work`, which may block, on another thread, and calls `done` with its result on
    /// this loop's thread. Call it on the loop's thread.
    public func runOffLoop<T: Sendable>(_ work: @escaping @Sendable () -> T, then done: @escaping (T) -> Void) {
        let reply = LoopBound(done)
        DispatchQueue.global().async {
            let result = work()
            self.execute { reply.value(result) }
        }
    }
}

/// A value made on a loop's thread that travels to another thread and back untouched, to be
/// used on the loop's thread only.
private final class LoopBound<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
