import Foundation

/// Counts the jobs a process holds, in two stages, and holds the fetcher back when either is
/// full (DESIGN.md §1):
/// - **sending**: handed to the I/O threads and not yet answered, up to about twice what the
///   connections can carry;
/// - **recording**: answered (or decided by the fetcher) and not yet written to Redis, up to
///   about twice what the connections carry (the completer gathers half of it per transaction).
/// Counting the stages apart keeps a completion backlog from stalling the connections, and a
/// slow Redis from piling up outcomes: the process never holds more than the two limits.
final class InflightGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var sending = 0
    private var recording = 0
    let sendingCapacity: Int
    let recordingCapacity: Int
    /// The room the fetcher waits for (0: it does not wait), and whether shutdown waits to drain.
    private var roomWanted = 0
    private var awaitingDrain = false

    init(sendingCapacity: Int, recordingCapacity: Int) {
        self.sendingCapacity = sendingCapacity
        self.recordingCapacity = recordingCapacity
    }

    /// Every job held, in either stage.
    var current: Int { condition.lock(); defer { condition.unlock() }; return sending + recording }

    private func fits(_ n: Int) -> Bool { sending + n <= sendingCapacity && recording <= recordingCapacity }

    /// Waits until `n` more jobs fit, or `timeout` passes. Returns whether they fit.
    func waitForRoom(_ n: Int, timeout: TimeInterval) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !fits(n) {
            roomWanted = n
            let woken = condition.wait(until: deadline)
            roomWanted = 0
            if !woken { return fits(n) }
        }
        return true
    }

    /// Wakes the waiters only once what they wait for is true: answers arrive every turn of an
    /// I/O loop, and waking the fetcher for each cost two futex calls and a context switch.
    private func wakeWaitersThatCanGo() {
        if (roomWanted > 0 && fits(roomWanted)) || (awaitingDrain && sending + recording == 0) { condition.broadcast() }
    }

    /// Fetched jobs: `sent` go to the I/O threads, `decided` (dead letters, schedules) straight
    /// to the completer.
    func add(sent: Int, decided: Int) {
        condition.lock(); sending += sent; recording += decided; condition.unlock()
    }

    /// `n` sends were answered and go to the completer.
    func answered(_ n: Int) {
        condition.lock(); sending -= n; recording += n; wakeWaitersThatCanGo(); condition.unlock()
    }

    /// `n` outcomes are in Redis.
    func recorded(_ n: Int) {
        condition.lock(); recording -= n; wakeWaitersThatCanGo(); condition.unlock()
    }

    /// Waits until nothing is held, or `timeout` passes. Returns whether it drained.
    func waitUntilEmpty(timeout: TimeInterval) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        awaitingDrain = true
        defer { awaitingDrain = false }
        while sending + recording > 0 {
            if !condition.wait(until: deadline) { return sending + recording == 0 }
        }
        return true
    }
}
