import APNSCore
import IOLoop

/// Pools made and retired as the apps change (a reload of the worker's settings). Loop thread.
extension APNSSender {
    /// Makes the pools of `apps[range]`: apps with the same endpoint and credential share one
    /// (`AppRuntime.poolKey`). A pool made before never takes a new runtime: its credential may
    /// have changed on disk under the same key.
    func addPools(for range: Range<Int>) {
        let first = pools.count
        var keys: [String] = []
        for a in range {
            let app = apps[a]
            if let i = keys.firstIndex(of: app.poolKey) {
                pools[first + i].name += "+" + app.name
                poolOf.append(first + i)
                continue
            }
            keys.append(app.poolKey)
            poolOf.append(pools.count)
            pending.append(PendingQueue())
            pools.append(
                ConnectionPool(
                    runtime: app, name: app.name, slots: Array(repeating: nil, count: settings.connectionsPerApp),
                    reconnect: TransportWaits.reconnect(baseMs: settings.reconnectBaseMs, capMs: settings.reconnectCapMs),
                    breaker: CircuitBreaker(
                        credentialPauseMs: settings.credentialPauseMs, transportPauseMs: settings.transportPauseMs,
                        maxCredentialPauseMs: settings.maxCredentialPauseMs, maxTransportPauseMs: settings.maxTransportPauseMs,
                        probeTimeoutMs: settings.requestTimeoutMs + 5000)))
        }
        for p in first..<pools.count {
            let caps = range.filter { poolOf[$0] == p }.compactMap { apps[$0].configuration.maxRate }
            pools[p].rate = caps.min().map { TokenBucket(perSecond: $0, nowMs: MonotonicClock.nowMilliseconds()) }
        }
    }

    /// Takes the apps after a reload: `apps` extends the runtimes this sender has, and
    /// `active` says which may take new jobs. New runtimes get pools of their own, opened now;
    /// a pool left with no active runtime sends what it holds and then closes.
    public func update(apps all: [AppRuntime], active: [Bool]) {
        let fresh = apps.count..<all.count
        apps = all
        activeApps = active
        deliveredApps += fresh.map { _ in false }
        let firstNew = pools.count
        addPools(for: fresh)
        for p in 0..<firstNew where !pools[p].retired && !apps.indices.contains(where: { poolOf[$0] == p && active[$0] }) {
            pools[p].retired = true
            logger.info("a pool's apps were changed or removed: it finishes what it holds, then closes", ["apps": .string(pools[p].name)])
            closeIfDrained(pool: p)
        }
        guard !stopping else { return }
        for p in firstNew..<pools.count {
            openConnection(pool: p, slot: 0)
            loop.schedule(afterMilliseconds: 1000) { [self] in openRest(pool: p) }
        }
        publishGauges()
    }

    /// Closes a retired pool once nothing waits in it, on a timer or a connection.
    func closeIfDrained(pool p: Int) {
        guard !pools[p].closed, pending[p].isEmpty, pools[p].waitingResends == 0 else { return }
        let live = pools[p].slots.compactMap { $0 }
        guard live.allSatisfy({ $0.openRequests == 0 }), !draining.values.contains(where: { $0.poolIndex == p }) else { return }
        pools[p].closed = true
        for s in pools[p].slots.indices { pools[p].slots[s] = nil }
        for c in live { c.close() }
        metrics.record { m in
            m.set("apns_connections", .init(("pool", pools[p].name), ("loop", name)), 0)
            m.set("apns_stream_limit", .init(("pool", pools[p].name), ("loop", name)), 0)
        }
        logger.info("closed a retired pool", ["apps": .string(pools[p].name)])
    }
}
