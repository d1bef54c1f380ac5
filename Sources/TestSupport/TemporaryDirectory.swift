import Foundation

/// A directory under /tmp removed when the value goes away.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init(_ prefix: String = "apnsw") throws {
        var template = Array("/tmp/\(prefix).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw TestSupportError("mkdtemp failed")
        }
        path = String(cString: made)
    }

    public func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass; returns whether it held.
public func waitUntil(timeout seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// A free TCP port on 127.0.0.1 (checked by binding it), outside the ephemeral range.
public func freePort() -> Int {
    // Below the kernel's ephemeral ports (32768 and up): a port the system gives a connection
    // or a server binding port 0 meanwhile is never the one a test was told is free.
    for _ in 0..<1000 {
        let port = Int.random(in: 10_000..<32_000)
        if canBind(port) { return port }
    }
    return bound(port: 0)
}

private func canBind(_ port: Int) -> Bool { bound(port: port) == port }

/// Binds a socket to `port` on 127.0.0.1 (0: any), closes it, and returns the port it had (0: none).
private func bound(port: Int) -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = UInt16(port).bigEndian
    let ok = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard ok == 0 else { return 0 }
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return Int(UInt16(bigEndian: addr.sin_port))
}
