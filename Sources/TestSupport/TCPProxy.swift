import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP proxy of the tests' own between a worker and Redis, which can cut the link the way a
/// network does: bytes stop, then arrive late. While a link is held the proxy keeps reading what
/// each side sends and keeps it; when the hold ends it delivers it, as a kernel's retransmission
/// would, except what a client sent before closing with a reset (an abortive close drops its
/// kernel's send buffer), unless `deliverAfterReset` stands for packets already in the network.
public final class TCPProxy: @unchecked Sendable {
    public let port: Int
    private let target: (host: String, port: Int)
    private let listener: Int32
    private let lock = NSLock()
    private var links: [Link] = []
    private var stalledUntil: UInt64 = 0, lateBy: UInt64 = 0
    /// A stall not yet applied to the links open when it began (the proxy's thread owns them).
    private var stallsExisting = false
    private var trigger: Trigger?
    private var running = true
    private var thread: Thread?
    /// How many links a trigger held.
    public private(set) var held = 0

    private struct Trigger {
        let pattern: [UInt8]
        let releaseAfterMs: Int
        let deliverAfterReset: Bool
    }

    private final class Link {
        let client: Int32, server: Int32
        var toServer: [UInt8] = [], toClient: [UInt8] = []
        /// Held until this time (monotonic ms); 0: flowing.
        var heldUntil: UInt64 = 0
        var deliverAfterReset = false
        var clientEnd: End = .open
        var closed = false
        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }
    }

    private enum End { case open, fin, reset }

    public init(to host: String, port targetPort: Int) throws {
        target = (host, targetPort)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var addr = Self.address("127.0.0.1", 0)
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
        guard bound == 0, listen(fd, 64) == 0 else {
            close(fd)
            throw TestSupportError("the proxy cannot listen: errno \(errno)")
        }
        var len = size
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        listener = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        Self.nonBlocking(listener)
        let t = Thread { [weak self] in self?.run() }
        thread = t
        t.start()
    }

    /// Every link, and any made meanwhile, passes nothing for `ms`; links made after flow. What
    /// waited arrives `lateByMs` after the cut ends, as TCP's retransmission timer, which doubles
    /// while packets are lost, delivers it; a link its client reset meanwhile delivers nothing.
    public func stall(forMs ms: Int, lateByMs: Int = 1600) {
        lock.withLock {
            stalledUntil = Self.nowMs() + UInt64(ms)
            lateBy = UInt64(lateByMs)
            stallsExisting = true
        }
    }

    /// The first link on which the client sends `pattern` is held from that read on, both ways,
    /// for `releaseAfterMs`; later links flow.
    public func hold(whenClientSends pattern: String, releaseAfterMs: Int, deliverAfterReset: Bool = false) {
        lock.withLock { trigger = Trigger(pattern: Array(pattern.utf8), releaseAfterMs: releaseAfterMs, deliverAfterReset: deliverAfterReset) }
    }

    public func stop() {
        lock.withLock { running = false }
        while thread?.isFinished == false { usleep(10_000) }
        close(listener)
        for l in links where !l.closed { close(l.client); close(l.server) }
    }

    deinit { if lock.withLock({ running }) { stop() } }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while lock.withLock({ running }) {
            let stall: UInt64? = lock.withLock {
                defer { stallsExisting = false }
                return stallsExisting ? stalledUntil + lateBy : nil
            }
            if let stall { for l in links { l.heldUntil = max(l.heldUntil, stall) } }
            acceptNew()
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            for l in links where !l.closed {
                if l.clientEnd == .open { fds.append(pollfd(fd: l.client, events: Int16(POLLIN), revents: 0)) }
                fds.append(pollfd(fd: l.server, events: Int16(POLLIN), revents: 0))
            }
            _ = poll(&fds, nfds_t(fds.count), 10)
            let now = Self.nowMs()
            for l in links where !l.closed {
                if l.clientEnd == .open { _ = read(l.client, into: &l.toServer, link: l, fromClient: true, buffer: &buffer) }
                if !l.closed, read(l.server, into: &l.toClient, link: l, fromClient: false, buffer: &buffer) {
                    // Redis closed its end: what waits goes out, then the link closes. Done here,
                    // not inside `read`, whose `into` is one of the link's buffers.
                    deliver(l)
                    finish(l, abortive: false)
                }
                guard !l.closed, l.heldUntil <= now else { continue }
                deliver(l)
            }
            links.removeAll { $0.closed }
        }
    }

    private func acceptNew() {
        while true {
            let c = accept(listener, nil, nil)
            guard c >= 0 else { return }
            let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = Self.address(target.host, target.port)
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard ok == 0 else {
                close(c)
                close(s)
                continue
            }
            Self.nonBlocking(c)
            Self.nonBlocking(s)
            let link = Link(client: c, server: s)
            let (until, late) = lock.withLock { (stalledUntil, lateBy) }
            if until > Self.nowMs() { link.heldUntil = until + late }
            links.append(link)
        }
    }

    /// Reads what `fd` has; true when the server closed its end.
    private func read(_ fd: Int32, into out: inout [UInt8], link l: Link, fromClient: Bool, buffer: inout [UInt8]) -> Bool {
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                if fromClient, l.heldUntil == 0 { checkTrigger(l, buffer[0..<n]) }
                out.append(contentsOf: buffer[0..<n])
                continue
            }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return false }
            guard fromClient else { return true }
            // The client is gone: a reset drops what it sent but we have not passed on.
            if l.clientEnd == .open { l.clientEnd = n == 0 ? .fin : .reset }
            if l.clientEnd == .reset, !l.deliverAfterReset { finish(l, abortive: true) }
            return false
        }
    }

    private func checkTrigger(_ l: Link, _ chunk: ArraySlice<UInt8>) {
        lock.withLock {
            guard let t = trigger, contains(chunk, t.pattern) else { return }
            trigger = nil
            held += 1
            l.heldUntil = Self.nowMs() + UInt64(t.releaseAfterMs)
            l.deliverAfterReset = t.deliverAfterReset
        }
    }

    /// Passes on what waits; a client that has closed has its link closed once all is passed.
    private func deliver(_ l: Link) {
        l.heldUntil = 0
        Self.sendAll(l.server, &l.toServer)
        if l.clientEnd == .open { Self.sendAll(l.client, &l.toClient) } else { l.toClient.removeAll() }
        if l.clientEnd != .open, l.toServer.isEmpty {
            // Let Redis run what it just read before it sees the end.
            usleep(100_000)
            finish(l, abortive: false)
        }
    }

    private func finish(_ l: Link, abortive: Bool) {
        guard !l.closed else { return }
        l.closed = true
        if abortive {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(l.server, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        close(l.client)
        close(l.server)
    }

    private static func sendAll(_ fd: Int32, _ bytes: inout [UInt8]) {
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                bytes.removeFirst(n)
            } else if n < 0, errno == EAGAIN || errno == EINTR {
                usleep(1000)
            } else {
                bytes.removeAll()
            }
        }
    }

    private func contains(_ chunk: ArraySlice<UInt8>, _ pattern: [UInt8]) -> Bool {
        guard chunk.count >= pattern.count else { return false }
        var i = chunk.startIndex
        while i + pattern.count <= chunk.endIndex {
            if chunk[i] == pattern[0], chunk[i..<(i + pattern.count)].elementsEqual(pattern) { return true }
            i += 1
        }
        return false
    }

    private static func address(_ host: String, _ port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &addr.sin_addr)
        return addr
    }

    private static func nonBlocking(_ fd: Int32) { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }

    private static func nowMs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }
}
