import APNSCore
import IOLoop
import Telemetry

/// APNs's refusals in the log: a warning line each, with the job, the token, the status, the
/// reason, the apns-id and APNs's timestamp (the default); or, for high volume, one line per
/// app, status and reason per interval, with a count and one sample (`log_rejections: summary`).
struct RejectionLog {
    enum Mode: String, Sendable { case each, summary }

    let mode: Mode
    /// Whole tokens (the default) or their first 8 and last 4 digits: tokens are personal data.
    let wholeTokens: Bool
    private var pending: [String: (count: Int, sample: [String: LogValue])] = [:]
    private var windowStartMs: UInt64 = 0

    init(mode: Mode, wholeTokens: Bool) {
        windowStartMs = MonotonicClock.nowMilliseconds()
        self.mode = mode
        self.wholeTokens = wholeTokens
    }

    /// A token as the log shows it.
    func show(_ token: DeviceToken) -> String {
        let hex = token.hex
        return wholeTokens || hex.count <= 12 ? hex : hex.prefix(8) + "…" + hex.suffix(4)
    }

    /// Logs one refusal now, or counts it for the summary.
    mutating func note(_ message: String, _ fields: [String: LogValue], key: String, logger: Logger) {
        guard mode == .summary else { return logger.warning(message, fields) }
        if pending[key] == nil { pending[key] = (0, fields) }
        pending[key]!.count += 1
    }

    /// The summary's lines, once `everyMs` has passed since the last.
    mutating func flush(nowMs: UInt64, everyMs: UInt64, logger: Logger) {
        guard mode == .summary else { return }
        // A quiet scan starts the window: the first refusal after it is reported `everyMs` on.
        guard !pending.isEmpty else { return windowStartMs = nowMs }
        guard nowMs >= windowStartMs + everyMs else { return }
        for (_, entry) in pending.sorted(by: { $0.key < $1.key }) {
            var fields = entry.sample
            fields["count"] = .int(entry.count)
            fields["seconds"] = .int(Int((nowMs - windowStartMs) / 1000))
            logger.warning("APNs rejected notifications (summary: one sample)", fields)
        }
        pending.removeAll()
        windowStartMs = nowMs
    }
}
