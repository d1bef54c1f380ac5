import Dispatch
import FoundationEssentials
import Glibc

/// Delivers the given signals as an async stream (the control plane's shutdown trigger).
public enum SignalStream {
    private final class Sources: @unchecked Sendable {
        var list: [DispatchSourceSignal] = []
    }

    public static func watch(_ signals: [Int32]) -> AsyncStream<Int32> {
        let sources = Sources()
        return AsyncStream { continuation in
            for sig in signals {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler { continuation.yield(sig) }
                source.resume()
                sources.list.append(source)
            }
            continuation.onTermination = { _ in sources.list.forEach { $0.cancel() } }
        }
    }
}
