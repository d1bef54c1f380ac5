import Glibc

/// A blocking file descriptor written and read whole: standard streams and log files, without
/// Foundation's FileHandle (which would link ICU into the programs).
public struct FileStream: Sendable {
    public let descriptor: Int32

    public init(descriptor: Int32) { self.descriptor = descriptor }

    public static let standardInput = FileStream(descriptor: 0)
    public static let standardOutput = FileStream(descriptor: 1)
    public static let standardError = FileStream(descriptor: 2)

    /// Opens `path` for appending, creating it (mode 0644) when missing.
    public static func appending(to path: String) throws(SystemError) -> FileStream {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SystemError.errno("opening \(path)") }
        return FileStream(descriptor: fd)
    }

    /// Writes every byte, going on after short writes and signals; a closed pipe drops the rest.
    public func write(_ bytes: some Collection<UInt8>) {
        let whole = Array(bytes)  // an array already is not copied
        whole.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    public func write(_ text: String) { write(Array(text.utf8)) }

    /// Everything up to end of file.
    public func readToEnd() throws(SystemError) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if n > 0 {
                result.append(contentsOf: chunk[0..<n])
            } else if n == 0 {
                return result
            } else if errno != EINTR {
                throw SystemError.errno("reading")
            }
        }
    }

    public func close() { _ = Glibc.close(descriptor) }
}
