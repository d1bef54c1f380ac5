internal import CLinux
import Glibc
import Synchronization

/// Something registered on an `EventLoop` for readiness events on one descriptor.
public protocol EventHandler: AnyObject {
    func handleEvents(readable: Bool, writable: Bool, hangup: Bool)
}

/// An epoll set owned by one thread, with an eventfd to wake it and one-shot timers.
/// Every method except `wake()` must be called on the loop's own thread.
public final class EventLoop: @unchecked Sendable {
    private let epfd: Int32
    private let wakeFD: Int32
    private var handlers: [Int32: EventHandler] = [:]
    private var timers: [(deadline: UInt64, id: UInt64, action: () -> Void)] = []
    private var nextTimerID: UInt64 = 1
    private let submitted = Mutex<[@Sendable () -> Void]>([])
    /// Called once per loop iteration after events are handled (e.g. to flush coalesced writes).
    public var afterEvents: (() -> Void)?
    public private(set) var isStopped = false
    /// Objects released only after the current iteration: a connection closed from inside
    /// one of its own callbacks must outlive the call stack that closed it.
    private var graveyard: [AnyObject] = []

    public init() throws(SystemError) {
        // A peer that closes first must cost an EPIPE, not the process (OpenSSL writes with write(2)).
        signal(SIGPIPE, SIG_IGN)
        epfd = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epfd >= 0 else { throw SystemError.errno("epoll_create1") }
        wakeFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard wakeFD >= 0 else { throw SystemError.errno("eventfd") }
        var ev = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wakeFD))
        epoll_ctl(epfd, EPOLL_CTL_ADD, wakeFD, &ev)
    }

    deinit {
        close(wakeFD)
        close(epfd)
    }

    /// Runs `task` on the loop thread soon. Safe from any thread.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        submitted.withLock { $0.append(task) }
        wake()
    }

    /// Safe from any thread.
    public func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    public func register(fd: Int32, handler: EventHandler, writable: Bool) throws(SystemError) {
        handlers[fd] = handler
        var ev = epoll_event(events: mask(writable), data: epoll_data_t(fd: fd))
        guard epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 else { throw SystemError.errno("epoll_ctl add") }
    }

    public func setWritable(fd: Int32, _ writable: Bool) {
        var ev = epoll_event(events: mask(writable), data: epoll_data_t(fd: fd))
        epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev)
    }

    public func unregister(fd: Int32) {
        epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nil)
        handlers[fd] = nil
    }

    private func mask(_ writable: Bool) -> UInt32 {
        EPOLLIN.rawValue | EPOLLRDHUP.rawValue | (writable ? EPOLLOUT.rawValue : 0)
    }

    /// Runs `action` on the loop thread after `milliseconds`.
    @discardableResult
    public func schedule(afterMilliseconds milliseconds: Int, _ action: @escaping () -> Void) -> UInt64 {
        let id = nextTimerID
        nextTimerID += 1
        let deadline = MonotonicClock.nowMilliseconds() + UInt64(max(0, milliseconds))
        let index = timers.firstIndex { $0.deadline > deadline } ?? timers.count
        timers.insert((deadline, id, action), at: index)
        return id
    }

    public func stop() { isStopped = true }

    /// Monotonic ns and wall-clock ms read once when the current iteration's events arrived:
    /// handlers time their work from these instead of reading the clock per event.
    public private(set) var iterationNs = MonotonicClock.nowNanoseconds()
    public private(set) var iterationWallMs = WallClock.nowMilliseconds()

    /// Keeps `object` alive until the current loop iteration ends. Loop thread only.
    public func keepAlive(_ object: AnyObject) { graveyard.append(object) }

    /// The thread running the loop (set by `run()`).
    private let runner = Atomic<UInt>(0)

    /// Whether the caller is the loop's own thread. Safe from any thread.
    public var isCurrentThread: Bool { runner.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Runs until `stop()`.
    public func run() {
        runner.store(UInt(pthread_self()), ordering: .relaxed)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while !isStopped {
            let timeout: Int32
            if let first = timers.first {
                let now = MonotonicClock.nowMilliseconds()
                timeout = first.deadline <= now ? 0 : Int32(min(first.deadline - now, 1000))
            } else {
                timeout = 1000
            }
            let n = events.withUnsafeMutableBufferPointer { epoll_wait(epfd, $0.baseAddress, Int32($0.count), timeout) }
            if n < 0 && errno != EINTR { break }
            iterationNs = MonotonicClock.nowNanoseconds()
            iterationWallMs = WallClock.nowMilliseconds()
            for i in 0..<max(0, Int(n)) {
                let ev = events[i]
                let fd = ev.data.fd
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    for task in submitted.withLock({ q in
                        defer { q.removeAll() }; return q
                    }) { task() }
                    continue
                }
                guard let handler = handlers[fd] else { continue }
                handler.handleEvents(
                    readable: ev.events & (EPOLLIN.rawValue | EPOLLERR.rawValue) != 0,
                    writable: ev.events & EPOLLOUT.rawValue != 0,
                    hangup: ev.events & (EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0)
            }
            runDueTimers()
            afterEvents?()
            graveyard.removeAll(keepingCapacity: true)
        }
    }

    private func runDueTimers() {
        let now = MonotonicClock.nowMilliseconds()
        while let first = timers.first, first.deadline <= now {
            timers.removeFirst()
            first.action()
        }
    }
}
