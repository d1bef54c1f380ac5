import APNSCore
import APNSTransport
import Buffers
import Configuration
import Delivery
import FoundationEssentials
import IOLoop
import PointerTricks
import QueueContract
import RedisClient
import Synchronization
import Telemetry

/// What a recorded batch adds to the metrics.
extension Completer {
    fileprivate struct SeriesKey: Hashable {
        let app: String, pushType: PushType?, status: Int, reason: String, stat: QueueStat

        func matches(app: String, pushType: PushType?, status: Int, reason: String, stat: QueueStat) -> Bool {
            self.stat == stat && self.status == status && self.pushType == pushType && self.app == app && self.reason == reason
        }
    }

    /// Counts the batch locally, then records it under one lock: labels are built per series,
    /// not per notification. Neighbours mostly share a series and an app, so runs are counted
    /// before anything is hashed.
    func count(_ batch: ArraySlice<FinishedJob>, _ decisions: [OutcomeRecords.Decision]) {
        let now = MonotonicClock.nowNanoseconds()
        var series: [SeriesKey: Int] = [:]
        var runKey: SeriesKey?, runCount = 0
        var latencies: [AppLatencies] = []
        var current = -1
        forEachInPlace(batch) { i, f in
            let stat = decisions[i].stat
            let app = f.appName ?? "-"
            var status = 200, reason = ""
            if !f.isDelivered {
                switch f.outcome {
                case .delivered: break
                case .rejected(let r, _):
                    status = r.status
                    // Bounded series: a server can make up reasons without end; ours (status 0) are few.
                    reason = r.status == 0 || r.reason.isKnown ? r.reason.rawValue : "other"
                case .deadLetter(let why): status = 0; reason = why.reason
                case .duplicate: status = 0; reason = "Duplicate"
                case .scheduled, .deferred: return
                }
            }
            // The job read in place: `f.job` counted a reference on it per job.
            let pushType = f.uncountedJob?.withObject { $0.pushType }
            // Compared in place: building a key per job copied and destroyed its strings.
            if runKey?.matches(app: app, pushType: pushType, status: status, reason: reason, stat: stat) == true {
                runCount += 1
            } else {
                if let key = runKey { series[key, default: 0] += runCount }
                runKey = SeriesKey(app: app, pushType: pushType, status: status, reason: reason, stat: stat)
                runCount = 1
            }
            guard f.takenAtNs > 0 else { return }
            if current < 0 || latencies[current].app != app {
                current =
                    latencies.firstIndex { $0.app == app }
                    ?? {
                        latencies.append(AppLatencies(app: app)); return latencies.count - 1
                    }()
            }
            // Every sample counts: a send stamped with the loop's turn time can read a little
            // earlier than its take, and is then a wait of 0 (dropping those lost five in six).
            let sent = f.sentAtNs, answered = f.answeredAtNs
            if sent > 0 { latencies[current].waits.observe(Double(sent &- min(sent, f.takenAtNs)) / 1e9) }
            if sent > 0, answered > 0 { latencies[current].trips.observe(Double(answered &- min(answered, sent)) / 1e9) }
            latencies[current].totals.observe(Double(now &- min(now, f.takenAtNs)) / 1e9)
        }
        if let key = runKey { series[key, default: 0] += runCount }
        metrics.record { m in
            for (k, n) in series {
                let v = Double(n)
                m.add(
                    "apns_notifications_total",
                    .init(
                        ("app", k.app), ("push_type", k.pushType?.rawValue ?? "-"), ("status", String(k.status)),
                        ("reason", k.reason)), v)
                switch k.stat {
                case .retried: m.add("apns_retries_total", .init(("app", k.app)), v)
                case .deadLettered: m.add("apns_dead_letters_total", .init(("app", k.app), ("reason", k.reason)), v)
                case .invalidToken: m.add("apns_invalid_tokens_total", .init(("app", k.app), ("reason", k.reason)), v)
                case .invalidChannel: m.add("apns_invalid_channels_total", .init(("app", k.app), ("reason", k.reason)), v)
                case .duplicate: m.add("apns_duplicates_total", .init(("app", k.app)), v)
                case .delivered, .scheduled, .deferred: break
                }
            }
            for l in latencies {
                let labels = Metrics.Labels(("app", l.app))
                m.add("apns_queue_wait_seconds", labels, l.waits)
                m.add("apns_round_trip_seconds", labels, l.trips)
                m.add("apns_end_to_end_seconds", labels, l.totals)
            }
        }
    }

    /// One app's latencies from one batch, bucketed outside the metrics lock.
    fileprivate struct AppLatencies {
        let app: String
        var waits = Metrics.Histogram(), trips = Metrics.Histogram(), totals = Metrics.Histogram()
    }

    /// What a WAIT answered: too few replicas is counted, and logged when it starts and ends.
    func replicated(_ replicas: Int64) {
        let short = replicas < configuration.waitReplicas
        if short { metrics.record { $0.add("apns_redis_replication_short_total", .init()) } }
        guard short != replicasShort else { return }
        replicasShort = short
        if short {
            logger.warning(
                "fewer replicas than redis.wait_replicas acknowledged a completion in time: a failover now may lose outcomes (they are sent again)",
                [
                    "replicas": .int(Int(replicas)), "wait_replicas": .int(configuration.waitReplicas),
                    "wait_timeout_ms": .int(configuration.waitTimeoutMs),
                ])
        } else {
            logger.info("replicas acknowledge completions again", ["replicas": .int(Int(replicas))])
        }
    }
}
