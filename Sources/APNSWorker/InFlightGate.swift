import IOLoop

/// Counts the jobs a process holds, in two stages, and holds the fetcher back when either is
/// full (DESIGN.md §1):
/// - **sending**: handed to the I/O threads and not yet answered, up to about twice what the
///   connections can carry;
/// - **recording**: answered (or decided by the fetcher) and not yet written to Redis, up to
///   about twice what the connections carry (the completer gathers half of it per transaction).
/// Counting the stages apart keeps a completion backlog from stalling the connections, and a
/// slow Redis from piling up outcomes: the process never holds more than the two limits.
final class InFlightGate: @unchecked Sendable {
    private let condition = ThreadCondition()
    private var sending = 0
    private var recording = 0
    let sendingCapacity: Int
    let recordingCapacity: Int
    /// Fetchers waiting for room: the room each wants, and how to wake it. Whether shutdown
    /// waits to drain.
    private var roomWaiters: [(waiter: ObjectIdentifier, n: Int, wake: @Sendable () -> Void)] = []
    private var awaitingDrain = false

    init(sendingCapacity: Int, recordingCapacity: Int) {
        self.sendingCapacity = sendingCapacity
        self.recordingCapacity = recordingCapacity
    }

    /// Every job held, in either stage.
    var current: Int { condition.lock(); defer { condition.unlock() }; return sending + recording }

    private func fits(_ n: Int) -> Bool { sending + n <= sendingCapacity && recording <= recordingCapacity }

    /// How many more jobs may be fetched now, up to `wanted`, when at least `minimum` fit; else
    /// nil, and `wake` is called (once, from whichever thread frees the room) when `minimum` do:
    /// a fetcher on an event loop does not block here. `waiter` names the caller, which waits
    /// for one room at a time. A fetch sized to the room keeps the
    /// connections full when they carry less than a batch (waiting for a whole batch's room
    /// waited for every send to be answered).
    func room(upTo wanted: Int, atLeast minimum: Int, waiter: ObjectIdentifier, orWake wake: @escaping @Sendable () -> Void) -> Int? {
        condition.lock()
        defer { condition.unlock() }
        if fits(minimum) { return min(wanted, sendingCapacity - sending) }
        roomWaiters.removeAll { $0.waiter == waiter }
        roomWaiters.append((waiter, minimum, wake))
        return nil
    }

    /// Wakes the waiters only once what they wait for is true: answers arrive every turn of an
    /// I/O loop, and waking a fetcher for each cost a wake-up per turn. Returns the fetchers to
    /// wake, for the caller to call once the lock is released.
    private func wakeWaitersThatCanGo() -> [@Sendable () -> Void] {
        if awaitingDrain && sending + recording == 0 { condition.broadcast() }
        guard !roomWaiters.isEmpty else { return [] }
        var ready: [@Sendable () -> Void] = []
        roomWaiters.removeAll { _, n, wake in
            guard fits(n) else { return false }
            ready.append(wake)
            return true
        }
        return ready
    }

    /// Fetched jobs: `sent` go to the I/O threads, `decided` (dead letters, schedules) straight
    /// to the completer.
    func add(sent: Int, decided: Int) {
        condition.lock(); sending += sent; recording += decided; condition.unlock()
    }

    /// `n` sends were answered and go to the completer.
    func answered(_ n: Int) {
        condition.lock(); sending -= n; recording += n; let ready = wakeWaitersThatCanGo(); condition.unlock()
        for wake in ready { wake() }
    }

    /// `n` sends will not go: their jobs were taken back by another worker.
    func dropped(_ n: Int) {
        condition.lock(); sending -= n; let ready = wakeWaitersThatCanGo(); condition.unlock()
        for wake in ready { wake() }
    }

    /// `n` outcomes are in Redis.
    func recorded(_ n: Int) {
        condition.lock(); recording -= n; let ready = wakeWaitersThatCanGo(); condition.unlock()
        for wake in ready { wake() }
    }

    /// Waits until nothing is held, or `timeout` passes. Returns whether it drained.
    func waitUntilEmpty(timeout: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = MonotonicClock.nowNanoseconds() + UInt64(max(0, timeout) * 1e9)
        awaitingDrain = true
        defer { awaitingDrain = false }
        while sending + recording > 0 {
            if !condition.wait(untilNanoseconds: deadline) { return sending + recording == 0 }
        }
        return true
    }
}
