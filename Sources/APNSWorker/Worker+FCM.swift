import FCMTransport
import IOLoop
import Synchronization
import Telemetry

/// When each FCM app's token trouble was last said, and how often since.
private let tokenTrouble = Mutex<[String: (saidMs: UInt64, since: Int)]>([:])

extension Worker {
    /// Renews an FCM app's access token when it is due (on a thread of its own), and while the
    /// token endpoint refuses says so once a minute with a count, never in a loop (DESIGN.md §4b).
    func renew(_ token: FCMAccessToken, of app: String) {
        token.renewInBackground(refusedGeneration: nil)
        let now = MonotonicClock.nowMilliseconds()
        guard let failure = token.renewalFailure else {
            if tokenTrouble.withLock({ $0.removeValue(forKey: app) }) != nil {
                logger.info("the FCM app has an access token again", ["app": .string(app)])
            }
            return
        }
        let say = tokenTrouble.withLock { t -> Int? in
            var entry = t[app] ?? (0, 0)
            entry.since += 1
            defer { t[app] = entry }
            guard entry.saidMs == 0 || now - entry.saidMs >= 60_000 else { return nil }
            entry.saidMs = now
            return entry.since
        }
        if let count = say {
            logger.error(
                "cannot get an FCM access token; the app's jobs wait", ["app": .string(app), "error": .string(failure), "tries": .int(count)])
        }
    }
}
