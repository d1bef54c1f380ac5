import Foundation

/// Counts jobs taken from Redis and not yet recorded, and holds the fetcher back when the
/// process already has about twice what its connections can carry (DESIGN.md §1).
final class InflightGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var count = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    var current: Int { condition.lock(); defer { condition.unlock() }; return count }

    /// Waits until `n` more jobs fit, or `timeout` passes. Returns whether they fit.
    func waitForRoom(_ n: Int, timeout: TimeInterval) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while count + n > capacity {
            if !condition.wait(until: deadline) { return count + n <= capacity }
        }
        return true
    }

    func add(_ n: Int) {
        condition.lock(); count += n; condition.unlock()
    }

    func remove(_ n: Int) {
        condition.lock(); count -= n; condition.broadcast(); condition.unlock()
    }

    /// Waits until nothing is in flight, or `timeout` passes. Returns whether it drained.
    func waitUntilEmpty(timeout: TimeInterval) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while count > 0 {
            if !condition.wait(until: deadline) { return count == 0 }
        }
        return true
    }
}
