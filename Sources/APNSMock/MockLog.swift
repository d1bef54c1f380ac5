import Foundation

/// Appends one JSON line per request to a file. Lines are buffered and written once per
/// event-loop pass, so logging costs one write(2) per batch, not per request. The server's loops
/// share it, under its lock.
final class MockLog: @unchecked Sendable {
    private let handle: FileHandle?
    private let lock = NSLock()
    private var buffer: [UInt8] = []

    init(path: String?) throws {
        guard let path else { handle = nil; return }
        _ = FileManager.default.createFile(atPath: path, contents: nil)  // the open below reports a failure
        guard let h = FileHandle(forWritingAtPath: path) else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        handle = h
        buffer.reserveCapacity(1 << 20)
    }

    var isEnabled: Bool { handle != nil }

    func append(_ line: [UInt8]) {
        lock.lock()
        buffer.append(contentsOf: line)
        buffer.append(0x0A)
        let full = buffer.count >= 1 << 20
        lock.unlock()
        if full { flush() }
    }

    func flush() {
        guard let handle else { return }
        lock.lock()
        defer { lock.unlock() }
        guard !buffer.isEmpty else { return }
        handle.write(Data(buffer))
        buffer.removeAll(keepingCapacity: true)
    }
}
