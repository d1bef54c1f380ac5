import APNSCore
import Delivery
import IOLoop
import Telemetry

extension APNSSender {
    /// FCM refused an app's access token (401 UNAUTHENTICATED): a new one is asked for off this
    /// thread, once per token however many sends were refused, and the send goes again when
    /// it may have come. A token endpoint that keeps failing pauses the app as a refused APNs
    /// key does: its jobs wait, and probes go out until a token works.
    func refreshFCMToken(after r: SendRequest, rejection: Rejection, generation: Int) {
        let app = apps[r.app]
        if app.credential?.renew(refusedGeneration: generation) == true {
            metrics.record { $0.add("fcm_token_renewals_total", .init(("app", app.name))) }
            logger.info("FCM refused the app's access token; getting a new one", ["app": .string(app.name)])
        } else if let failure = app.credential?.renewalFailure {
            pauseCredential(of: r, reason: "token endpoint: " + failure)
        }
        requeue(withoutLastAttempt(r), afterMs: TransportWaits.tokenRenewalMs)
    }

    /// Opens the app's pool's breaker for its credential (one outage, one pause).
    func pauseCredential(of r: SendRequest, reason: String) {
        let p = poolOf[r.app]
        let now = MonotonicClock.nowMilliseconds()
        pools[p].pauseReason = reason
        if let pause = pools[p].breaker.failed(.credential, nowMs: now, sentAtMs: r.answer.sentAtNs / 1_000_000) {
            let label = apps[r.app].isFCM && reason.hasPrefix("token endpoint") ? "TokenEndpoint" : reason
            metrics.record { $0.add("apns_credential_pauses_total", .init(("app", apps[r.app].name), ("reason", label))) }
            logger.error(
                "\(provider(r)) refused the app's credentials; pausing the app and probing",
                ["app": .string(apps[r.app].name), "reason": .string(reason), "pause_ms": .int(pause)])
        }
    }

    /// "APNs" or "FCM", for what a log line or a dead letter says.
    func provider(_ r: SendRequest) -> String { apps[r.app].isFCM ? "FCM" : "APNs" }
}
