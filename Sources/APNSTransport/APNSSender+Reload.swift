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
                poolNames[first + i] += "+" + app.name
                poolOf.append(first + i)
                continue
            }
            keys.append(app.poolKey)
            pools.append(app)
            poolNames.append(app.name)
            poolOf.append(pools.count - 1)
            pending.append(PendingQueue())
            breakers.append(
                CircuitBreaker(
                    credentialPauseMs: settings.credentialPauseMs, transportPauseMs: settings.transportPauseMs,
                    maxCredentialPauseMs: settings.maxCredentialPauseMs, maxTransportPauseMs: settings.maxTransportPauseMs,
                    probeTimeoutMs: settings.requestTimeoutMs + 5000))
            slots.append(Array(repeating: nil, count: settings.connectionsPerApp))
            reconnects.append(Backoff(baseMs: settings.reconnectBaseMs, capMs: settings.reconnectCapMs))
            waitingResends.append(0)
            lastProgressMs.append(0)
            busyAtLastScan.append(false)
            troubles.append(TroubleLog())
            pauseReasons.append("")
            restToOpen.append(true)
            retiredPools.append(false)
            closedPools.append(false)
        }
        for p in first..<pools.count {
            let caps = range.filter { poolOf[$0] == p }.compactMap { apps[$0].configuration.maxRate }
            poolRates.append(caps.min().map { TokenBucket(perSecond: $0, nowMs: MonotonicClock.nowMilliseconds()) })
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
        for p in 0..<firstNew where !retiredPools[p] && !apps.indices.contains(where: { poolOf[$0] == p && active[$0] }) {
            retiredPools[p] = true
            logger.info("a pool's apps were changed or removed: it finishes what it holds, then closes", ["apps": .string(poolNames[p])])
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
        guard !closedPools[p], pending[p].isEmpty, waitingResends[p] == 0 else { return }
        let live = slots[p].compactMap { $0 }
        guard live.allSatisfy({ $0.openRequests == 0 }), !draining.values.contains(where: { $0.poolIndex == p }) else { return }
        closedPools[p] = true
        for s in slots[p].indices { slots[p][s] = nil }
        for c in live { c.close() }
        metrics.record { m in
            m.set("apns_connections", .init(("pool", poolNames[p]), ("loop", name)), 0)
            m.set("apns_stream_limit", .init(("pool", poolNames[p]), ("loop", name)), 0)
        }
        logger.info("closed a retired pool", ["apps": .string(poolNames[p])])
    }
}
