import Glibc
import IOLoop
import Synchronization

/// What one client may cost the server. A request over a limit gets its status and the
/// connection is closed; so does one that has not arrived whole within `readTimeoutMs`.
public struct HTTPLimits: Sendable {
    /// The request line and headers together.
    public var maxHeaderBytes = 16_384
    public var maxHeaders = 64
    public var maxBodyBytes = 1_048_576
    /// From the connection's accept to the request's last byte (slow clients hold a thread).
    public var readTimeoutMs = 10_000
    /// From the accept to the end of the request's head: a client that trickles it is cut off sooner.
    public var headTimeoutMs = 3000
    public var writeTimeoutMs = 10_000
    /// Connections served at once; one more is answered 503 and closed.
    public var maxConnections = 64
    /// Connections one client address may hold at once (nil: a quarter of `maxConnections`), so
    /// that one client's slow requests cannot take every slot from the operators.
    public var maxConnectionsPerAddress: Int?
    var perAddress: Int { maxConnectionsPerAddress ?? max(1, maxConnections / 4) }

    public init() {}
}

/// A small HTTP/1.1 server: one thread accepts, one thread per connection (at most
/// `maxConnections`) reads one request, calls `handler`, answers and closes.
public final class HTTPServer: @unchecked Sendable {
    public let port: Int
    private let fd: Int32
    private let limits: HTTPLimits
    private let handler: @Sendable (HTTPRequest) -> HTTPResponse
    private let open = Atomic<Int>(0)
    /// Connections held, per client address.
    private let held = Mutex<[String: Int]>([:])
    private let running = Atomic<Bool>(true)
    private let stopped = ThreadCondition()
    private var acceptorDone = false

    public init(host: String, port: Int, limits: HTTPLimits = HTTPLimits(), handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws {
        (fd, self.port) = try Socket.listen(host: host, port: port)
        self.limits = limits
        self.handler = handler
    }

    /// Connections being served now.
    public var openConnections: Int { open.load(ordering: .relaxed) }

    public func start() {
        OSThread.start(name: "apnsctl-web") { [self] in
            while running.load(ordering: .relaxed) {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 200) > 0, let client = Socket.accept(fd) else { continue }
                let peer = Self.peer(of: client)
                let mine = held.withLock { h in
                    h[peer, default: 0] += 1
                    return h[peer]!
                }
                guard mine <= limits.perAddress, open.add(1, ordering: .relaxed).newValue <= limits.maxConnections else {
                    if mine <= limits.perAddress { open.subtract(1, ordering: .relaxed) }
                    release(peer)
                    refuse(client)
                    continue
                }
                OSThread.start(name: "apnsctl-web-conn") { [self] in
                    serve(client, from: peer)
                    close(client)
                    release(peer)
                    open.subtract(1, ordering: .relaxed)
                }
            }
            close(fd)
            stopped.lock()
            acceptorDone = true
            stopped.broadcast()
            stopped.unlock()
        }
    }

    /// Stops accepting; connections being served finish on their own threads.
    public func stop() {
        running.store(false, ordering: .relaxed)
        stopped.lock()
        while !acceptorDone { stopped.wait() }
        stopped.unlock()
    }

    private func refuse(_ client: Int32) {
        var busy = HTTPResponse(status: 503, text: "too many connections; try again")
        busy.headers.append(("Retry-After", "1"))
        _ = send(busy.bytes, to: client, deadline: MonotonicClock.nowMilliseconds() + 1000)
        close(client)
    }

    private func release(_ peer: String) {
        held.withLock { h in
            h[peer, default: 1] -= 1
            if h[peer] == 0 { h[peer] = nil }
        }
    }

    private func serve(_ client: Int32, from peer: String) {
        let deadline = MonotonicClock.nowMilliseconds() + UInt64(limits.readTimeoutMs)
        let response: HTTPResponse
        switch read(client, until: deadline) {
        case .request(let request): response = handler(request.from(peer))
        case .refused(let status, let why): response = HTTPResponse(status: status, text: why)
        case .gone: return
        }
        _ = send(response.bytes, to: client, deadline: MonotonicClock.nowMilliseconds() + UInt64(limits.writeTimeoutMs))
    }

    /// The client's address (IPv4 or IPv6), for the secret brake and logs.
    static func peer(of client: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let got = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(client, $0, &length) } }
        guard got == 0 else { return "?" }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = storage.ss_family
        return withUnsafePointer(to: &storage) { p -> String in
            if family == sa_family_t(AF_INET) {
                var a = p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                inet_ntop(AF_INET, &a, &text, socklen_t(text.count))
            } else {
                var a = p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                inet_ntop(AF_INET6, &a, &text, socklen_t(text.count))
            }
            return String(cString: text)
        }
    }

    enum ReadOutcome {
        case request(HTTPRequest)
        case refused(Int, String)
        case gone
    }

    private func read(_ client: Int32, until end: UInt64) -> ReadOutcome {
        let headDeadline = min(end, MonotonicClock.nowMilliseconds() + UInt64(limits.headTimeoutMs))
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var head: HTTPHead?
        while true {
            if head == nil, let end = received.headEnd {
                guard end <= limits.maxHeaderBytes else {
                    return .refused(431, "the request line and headers are over \(limits.maxHeaderBytes) bytes")
                }
                do { head = try HTTPHead.parse(received[..<end], limits: limits) } catch { return .refused(error.status, error.message) }
                received.removeFirst(end + 4)
            }
            if head == nil, received.count > limits.maxHeaderBytes {
                return .refused(431, "the request line and headers are over \(limits.maxHeaderBytes) bytes")
            }
            if let head, received.count >= head.contentLength {
                return .request(
                    HTTPRequest(method: head.method, target: head.target, headers: head.headers, body: Array(received.prefix(head.contentLength))))
            }
            let now = MonotonicClock.nowMilliseconds()
            let deadline = head == nil ? headDeadline : end
            guard now < deadline else { return received.isEmpty && head == nil ? .gone : .refused(408, "the request took too long to arrive") }
            var p = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(min(1000, deadline - now))) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { Glibc.read(client, $0.baseAddress, $0.count) }
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { return .gone }
            if n > 0 { received.append(contentsOf: chunk[0..<n]) }
        }
    }

    private func send(_ bytes: [UInt8], to client: Int32, deadline: UInt64) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(client, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
                continue
            }
            guard n < 0, errno == EAGAIN || errno == EINTR else { return false }
            let now = MonotonicClock.nowMilliseconds()
            guard now < deadline else { return false }
            var p = pollfd(fd: client, events: Int16(POLLOUT), revents: 0)
            _ = poll(&p, 1, Int32(min(1000, deadline - now)))
        }
        return true
    }
}

/// A request's line and headers, checked.
struct HTTPHead {
    let method: String
    let target: String
    let headers: [(name: String, value: String)]
    let contentLength: Int

    struct Refusal: Error {
        let status: Int
        let message: String
    }

    static func parse(_ bytes: ArraySlice<UInt8>, limits: HTTPLimits) throws(Refusal) -> HTTPHead {
        guard bytes.allSatisfy({ $0 == 9 || $0 == 10 || $0 == 13 || (32...126).contains($0) || $0 >= 128 }) else {
            throw Refusal(status: 400, message: "the request head holds control characters")
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let words = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard words.count == 3, !words[0].isEmpty, words[0].allSatisfy({ $0.isUppercase }), words[1].hasPrefix("/") else {
            throw Refusal(status: 400, message: "the request line is not METHOD /path HTTP/1.1")
        }
        guard words[2] == "HTTP/1.1" || words[2] == "HTTP/1.0" else { throw Refusal(status: 505, message: "this server speaks HTTP/1.1") }
        guard lines.count - 1 <= limits.maxHeaders else { throw Refusal(status: 431, message: "more than \(limits.maxHeaders) headers") }
        var headers: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":"), colon > line.startIndex, !line[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else { throw Refusal(status: 400, message: "a header line is not \"Name: value\"") }
            headers.append((line[..<colon].lowercased(), String(line[line.index(after: colon)...].trimmingSpaces)))
        }
        if headers.contains(where: { $0.name == "transfer-encoding" }) {
            throw Refusal(status: 411, message: "send the body with a Content-Length, not a transfer encoding")
        }
        let lengths = Set(headers.filter { $0.name == "content-length" }.map(\.value))
        guard lengths.count <= 1, let length = lengths.isEmpty ? 0 : Int(lengths.first!), length >= 0 else {
            throw Refusal(status: 400, message: "Content-Length is not one number")
        }
        guard length <= limits.maxBodyBytes else { throw Refusal(status: 413, message: "the body is over \(limits.maxBodyBytes) bytes") }
        return HTTPHead(method: String(words[0]), target: String(words[1]), headers: headers, contentLength: length)
    }
}

extension Array where Element == UInt8 {
    /// Where the blank line that ends a request head starts.
    fileprivate var headEnd: Int? {
        guard count >= 4 else { return nil }
        for i in 0...(count - 4) where self[i] == 13 && self[i + 1] == 10 && self[i + 2] == 13 && self[i + 3] == 10 { return i }
        return nil
    }
}
