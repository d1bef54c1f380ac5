import Synchronization

/// Wrong secrets, per client address, whichever way they come (the sign-in form, a Bearer token,
/// basic auth): after each one the address waits before its next try, 300 ms doubling to 30 s,
/// and a try too early is refused at once (429) without the secret being checked or a
/// connection held; 20 wrong or early tries within 10 minutes lock the address out for 15
/// (issue 45, item 2: only the form waited, holding a connection while it did, and Bearer or
/// basic guesses were answered in 0.2 ms, 7,860 a second).
final class SecretBrake: Sendable {
    private struct Address {
        var tries: [Int64] = []
        var nextMs: Int64 = 0
        var lockedUntilMs: Int64 = 0
    }
    private let addresses = Mutex<[String: Address]>([:])
    static let lockAfter = 20
    static let windowMs: Int64 = 600_000
    static let lockMs: Int64 = 900_000

    /// How long `peer` must still wait before a secret of its is checked (ms), or nil; an early
    /// try counts towards the lockout.
    func wait(_ peer: String, nowMs: Int64) -> (ms: Int64, lockedNow: Bool)? {
        addresses.withLock { all in
            guard var a = all[peer] else { return nil }
            let until = max(a.nextMs, a.lockedUntilMs)
            guard until > nowMs else { return nil }
            let locked = a.lockedUntilMs <= nowMs && count(&a, nowMs)
            all[peer] = a
            return (max(a.nextMs, a.lockedUntilMs) - nowMs, locked)
        }
    }

    /// A wrong secret from `peer`. Returns whether that locked the address out.
    @discardableResult
    func failed(_ peer: String, nowMs: Int64) -> Bool {
        addresses.withLock { all in
            var a = all[peer] ?? Address()
            let locked = count(&a, nowMs)
            let wrong = a.tries.count
            a.nextMs = nowMs + min(30_000, 300 << min(wrong - 1, 7))
            all[peer] = a
            if all.count > 10_000 { all = all.filter { $0.value.lockedUntilMs > nowMs || $0.value.nextMs > nowMs } }
            return locked
        }
    }

    /// The right secret from `peer`: its slate is clean.
    func succeeded(_ peer: String) { _ = addresses.withLock { $0.removeValue(forKey: peer) } }

    /// Notes a try; locks the address out when the window holds enough. True if it locked now.
    private func count(_ a: inout Address, _ nowMs: Int64) -> Bool {
        a.tries = a.tries.filter { $0 > nowMs - Self.windowMs } + [nowMs]
        guard a.tries.count >= Self.lockAfter, a.lockedUntilMs <= nowMs else { return false }
        a.lockedUntilMs = nowMs + Self.lockMs
        return true
    }
}
