internal import CLinux
import Glibc

/// Non-blocking TCP sockets: connect, listen, accept.
public enum Socket {
    /// `host`'s addresses, looked up now (uncached, as Apple advises). This blocks, for seconds
    /// when a DNS server does not answer: an event loop looks names up through `HostResolver`.
    /// `numericOnly` takes only an address written in numbers and never asks DNS.
    public static func addresses(of host: String, port: Int, numericOnly: Bool = false) throws(SystemError) -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = numericOnly ? AI_NUMERICHOST | AI_NUMERICSERV : AI_NUMERICSERV
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw SystemError(operation: "resolving \(host)", code: EHOSTUNREACH, reason: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(result) }
        var found: [SocketAddress] = []
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            found.append(SocketAddress(a.pointee.ai_addr, length: a.pointee.ai_addrlen))
            ai = a.pointee.ai_next
        }
        return found
    }

    /// Starts a non-blocking connect to `address`; completion shows up as writability.
    /// `name` is what errors call the peer.
    public static func connect(to address: SocketAddress, name: String) throws(SystemError) -> Int32 {
        let fd = socket(Int32(address.family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError.errno("socket for \(name) (\(address))") }
        setNoDelay(fd)
        let rc = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        if rc == 0 || errno == EINPROGRESS { return fd }
        let error = SystemError.errno("connect \(name) (\(address))")
        close(fd)
        throw error
    }

    /// The pending error of a non-blocking connect (0 when connected).
    public static func pendingError(_ fd: Int32) -> Int32 {
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
        return err
    }

    /// A non-blocking listening socket on `host:port` (port 0 picks a free one).
    public static func listen(host: String, port: Int) throws(SystemError) -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError.errno("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            close(fd)
            throw SystemError(operation: "listen address \(host)", code: EINVAL, reason: "not an IPv4 address")
        }
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { let e = SystemError.errno("bind \(host):\(port)"); close(fd); throw e }
        guard Glibc.listen(fd, 1024) == 0 else { let e = SystemError.errno("listen"); close(fd); throw e }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &len) }
        }
        return (fd, Int(UInt16(bigEndian: addr.sin_port)))
    }

    /// Accepts one pending connection as non-blocking, or nil when none is waiting.
    public static func accept(_ listenFD: Int32) -> Int32? {
        let fd = apnsw_accept_nonblocking(listenFD)
        guard fd >= 0 else { return nil }
        setNoDelay(fd)
        return fd
    }

    static func setNoDelay(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }
}

/// An address `getaddrinfo` gave, with its port.
public struct SocketAddress: Sendable, CustomStringConvertible {
    private var storage = sockaddr_storage()
    private let length: socklen_t

    init(_ address: UnsafePointer<sockaddr>, length: socklen_t) {
        self.length = min(length, socklen_t(MemoryLayout<sockaddr_storage>.size))
        withUnsafeMutableBytes(of: &storage) { UnsafeMutableRawPointer($0.baseAddress!).copyMemory(from: address, byteCount: Int(self.length)) }
    }

    var family: sa_family_t { storage.ss_family }
    public var isIPv4: Bool { family == sa_family_t(AF_INET) }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        withUnsafeBytes(of: storage) { body($0.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) }
    }

    /// The address in numbers, without its port ("192.0.2.1", "2001:db8::1").
    public var numericHost: String {
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let rc = withSockaddr { getnameinfo($0, $1, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) }
        return rc == 0 ? text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } : "?"
    }

    public var description: String { numericHost }
}
