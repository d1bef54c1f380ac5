import APNSCore
import IOLoop
import QueueContract
import RedisClient

/// What the housekeeper writes for operators: paused apps, the worker's info, and the counter
/// history the dashboard charts.
extension Housekeeper {
    /// Writes this worker's credential pauses to `apns:{Q}:paused` (field app/worker) when they
    /// change, for `apnsctl stats`.
    func publishPauses(_ r: BlockingRedisConnection) throws(RedisError) {
        guard let health else { return }
        let now = health.pausedApps  // the apps of now, after any reload
        guard now != publishedPauses else { return }
        var commands: [[String]] = []
        for app in publishedPauses.keys where now[app] == nil { commands.append(["HDEL", keys.paused, "\(app)/\(workerID)"]) }
        for (app, why) in now where publishedPauses[app] != why {
            var w = JSONWriter()
            w.beginObject(); w.field("app", app); w.field("worker", workerID); w.field("reason", why)
            w.field("time_ms", WallClock.nowMilliseconds()); w.endObject()
            commands.append(["HSET", keys.paused, "\(app)/\(workerID)", String(decoding: w.bytes, as: UTF8.self)])
        }
        _ = try r.pipeline(commands.map { $0.map { Array($0.utf8) } })
        publishedPauses = now
    }

    /// The dashboard's data, after the tick's own work: a failure here (a Redis user without
    /// these commands) is logged once and never stops the lease or the take-backs.
    func publishForOperators() {
        do {
            try redis.with { r throws(RedisError) in
                if hasQueueDuties { try publishInfo(r) }
                try snapshotCounters(r)
            }
            warnedPublishing = false
        } catch {
            if !warnedPublishing {
                logger.warning("cannot write the dashboard's worker info or counter history", ["error": .string("\(error)")])
            }
            warnedPublishing = true
        }
    }

    /// Rewrites this worker's entry in the worker-info hash every 5 s.
    func publishInfo(_ r: BlockingRedisConnection) throws(RedisError) {
        let now = MonotonicClock.nowMilliseconds()
        guard let describeWorker, now - lastInfoMs >= 5000 else { return }
        _ = try r.command(["HSET", keys.workerInfo, workerID, describeWorker()])
        lastInfoMs = now
    }

    /// Adds this 10-second slot's snapshot of the counters, unless a worker has (tried every 2 s).
    func snapshotCounters(_ r: BlockingRedisConnection) throws(RedisError) {
        let now = MonotonicClock.nowMilliseconds()
        guard lastSnapshotMs == 0 || now - lastSnapshotMs >= 2000 else { return }
        _ = try r.run(CounterHistory.snapshot, keys: [keys.history, keys.stats], args: [])
        lastSnapshotMs = now
    }
}
