import IOLoop

/// Runs one long-lived body on its own thread, and stops it: the stop request is a flag the
/// body polls, and `stop` waits until the body has returned.
final class ThreadRunner: @unchecked Sendable {
    private let condition = ThreadCondition()
    private var running = true
    private var done = false

    var isRunning: Bool { condition.lock(); defer { condition.unlock() }; return running }

    func start(name: String, _ body: @escaping @Sendable () -> Void) {
        OSThread.start(name: name) { [self] in
            body()
            condition.lock(); done = true; condition.broadcast(); condition.unlock()
        }
    }

    /// Asks the body to return, calls `wake` so a waiting body notices, and waits for it.
    func stop(wake: () -> Void = {}) {
        condition.lock()
        running = false
        condition.unlock()
        wake()
        condition.lock()
        while !done { condition.wait() }
        condition.unlock()
    }
}
