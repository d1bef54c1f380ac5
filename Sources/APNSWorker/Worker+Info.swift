import APNSCore
import FCMTransport
import FoundationEssentials
import Glibc
import IOLoop
import Telemetry

extension Worker {
    /// This worker's entry in the worker-info hash: where it runs, and each app's connections,
    /// stream limits, pause, last success and JWT age (never the JWT).
    func describe(startedMs: Int64, host: String) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.field("worker", workerID)
        w.field("host", host)
        w.field("pid", Int(getpid()))
        w.field("version", BuildInfo.line("apns-worker"))
        w.field("started_ms", startedMs)
        w.field("lease_ms", configuration.leaseMs)
        w.field("time_ms", WallClock.nowMilliseconds())
        w.key("apps")
        w.beginArray()
        let now = Int64(Date().timeIntervalSince1970)
        for app in appRuntimes {
            let status = health.status(app: app.name)
            w.beginObject()
            w.field("app", app.name)
            w.field("provider", app.isFCM ? "fcm" : "apns")
            if !app.isFCM { w.field("bundle_id", app.configuration.bundleID) }
            if let left = (app.credential as? FCMAccessToken)?.secondsLeft { w.field("token_left_s", left) }
            w.field("ready", status.usable)  // /readyz's rule, so the dashboard need not repeat it
            w.field("connections", status.connections)
            w.field("stream_limit", status.streamLimit)
            w.fieldIfPresent("paused", status.paused)
            w.fieldIfPresent("last_success_ms", status.lastSuccessMs)
            if let jwt = app.jwt {
                w.field("key_id", jwt.keyID)
                w.field("jwt_age_s", now - jwt.issuedAt)
            }
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        return String(decoding: name.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
