/// One pool of connections (what waits for it is `APNSSender.pending`): apps with the same endpoint and credential
/// share one (`AppRuntime.poolKey`). An `APNSSender`'s, on its loop's thread.
struct ConnectionPool {
    /// The runtime the pool was made for: its endpoint, TLS context and JWT.
    let runtime: AppRuntime
    /// Its apps' names, joined by "+", for logs and metrics labels.
    var name: String
    var slots: [APNSConnection?]
    /// Grows with each connection that ends before delivering anything, for the whole pool.
    var reconnect: Backoff
    var breaker: CircuitBreaker
    /// Sends waiting on a timer to go again.
    var waitingResends = 0
    /// The last answer, or when work arrived at an idle pool (monotonic ms).
    var lastProgressMs: UInt64 = 0
    var busyAtLastScan = false
    var trouble = TroubleLog()
    /// The reason APNs gave for the pool's last credential pause.
    var pauseReason = ""
    /// Its connections but the first are still to open (`openRest`).
    var restToOpen = true
    /// A reload left it with no active app: it finishes what it holds, then closes (`closeIfDrained`).
    var retired = false
    var closed = false
    /// Its apps' `max_rate`, the smallest; nil for none.
    var rate: TokenBucket?

    init(runtime: AppRuntime, name: String, slots: [APNSConnection?], reconnect: Backoff, breaker: CircuitBreaker) {
        self.runtime = runtime
        self.name = name
        self.slots = slots
        self.reconnect = reconnect
        self.breaker = breaker
    }
}
