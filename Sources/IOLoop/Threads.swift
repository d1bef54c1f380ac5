internal import CLinux
import Glibc
import PointerTricks

/// Long-lived OS threads and the condition variable they wait on, straight on pthreads: without
/// Foundation's Thread and NSCondition, which would link ICU into the programs.
public enum OSThread {
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    /// Starts `body` on a new detached thread named `name` (at most 15 bytes show in `top -H`).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        var thread = pthread_t()
        let context = HandOff.pointer(retaining: Start(name: name, body: body))
        let rc = pthread_create(
            &thread, nil,
            { context in
                let start = HandOff.take(context!, as: Start.self)
                apnsw_name_thread(start.name)
                start.body()
                return nil
            }, context)
        precondition(rc == 0, "pthread_create failed: \(String(cString: strerror(rc)))")
        pthread_detach(thread)
    }
}

/// A mutex with a condition variable, timed on the monotonic clock.
public final class ThreadCondition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    public func broadcast() { pthread_cond_broadcast(condition) }
    public func signal() { pthread_cond_signal(condition) }

    /// Waits for a signal; the caller holds the lock, and checks its condition again after.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// Waits until signalled or `deadlineNs` (MonotonicClock nanoseconds) has passed; false when
    /// the deadline passed.
    public func wait(untilNanoseconds deadlineNs: UInt64) -> Bool {
        var deadline = timespec(tv_sec: Int(deadlineNs / 1_000_000_000), tv_nsec: Int(deadlineNs % 1_000_000_000))
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }

    /// Runs `body` holding the lock.
    public func withLock<R>(_ body: () throws -> R) rethrows -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}
