import CLinux
import Glibc

/// Non-blocking TCP sockets: connect, listen, accept.
public enum Socket {
    /// Resolves `host` (uncached, as Apple advises) and starts a non-blocking connect.
    /// Completion shows up as writability on the returned descriptor.
    public static func connect(host: String, port: Int) throws(SystemError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let first = result else {
            throw SystemError(operation: "resolving \(host): \(String(cString: gai_strerror(rc)))", code: EHOSTUNREACH)
        }
        defer { freeaddrinfo(result) }
        var lastError = SystemError(operation: "connect \(host):\(port)", code: ECONNREFUSED)
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            let fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            if fd >= 0 {
                setNoDelay(fd)
                if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                    return fd
                }
                lastError = SystemError.errno("connect \(host):\(port)")
                close(fd)
            }
            ai = a.pointee.ai_next
        }
        throw lastError
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
            throw SystemError(operation: "listen address \(host) is not an IPv4 address", code: EINVAL)
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
