import Foundation

/// A plain HTTP/1.1 GET on 127.0.0.1, for the worker's /metrics, /healthz and /readyz.
public func httpGet(port: Int, path: String, timeout: Int = 5) -> (status: Int, body: String)? {
    httpRequest(port: port, method: "GET", path: path, timeout: timeout).map { ($0.status, $0.body) }
}

/// One HTTP/1.1 request on 127.0.0.1 (the server closes after its answer). Header names come
/// back in lower case.
public func httpRequest(
    port: Int, method: String, path: String, headers: [String: String] = [:], body: String = "", timeout: Int = 5
) -> (status: Int, headers: [String: String], body: String)? {
    guard let fd = connectLoopback(port: port, timeout: timeout) else { return nil }
    defer { close(fd) }
    var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.utf8.count)\r\n" }
    let request = Array((head + "\r\n" + body).utf8)
    _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    var response = [UInt8]()
    var buf = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &buf, buf.count)
        if n <= 0 { break }
        response.append(contentsOf: buf[0..<n])
    }
    let text = String(decoding: response, as: UTF8.self)
    guard let split = text.range(of: "\r\n\r\n"), let status = Int(text.split(separator: " ").dropFirst().first ?? "") else { return nil }
    var fields: [String: String] = [:]
    for line in text[..<split.lowerBound].components(separatedBy: "\r\n").dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return (status, fields, String(text[split.upperBound...]))
}

/// A blocking TCP socket connected to 127.0.0.1:`port`, reads timing out after `timeout` seconds;
/// from `source` (another loopback address, 127.0.0.2 …, as another client would be) if given.
public func connectLoopback(port: Int, timeout: Int = 5, from source: String? = nil) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    if let source {
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            return nil
        }
    }
    var tv = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard ok == 0 else {
        close(fd)
        return nil
    }
    return fd
}

/// The port `apnsctl web` says it serves on (its line "… on http://HOST:PORT/ …"), once it
/// has said it; nil after `timeout` seconds.
public func servedPort(_ web: ChildProcess, host: String = "127.0.0.1", timeout: Double = 10) -> Int? {
    var port: Int?
    _ = waitUntil(timeout: timeout) {
        port = web.output.components(separatedBy: "http://\(host):").dropFirst().first.flatMap { Int($0.prefix { $0.isNumber }) }
        return port != nil
    }
    return port
}
