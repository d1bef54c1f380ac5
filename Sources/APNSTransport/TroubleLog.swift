import Telemetry

/// A pool's connection trouble, counted and logged in summary: a storm of GOAWAYs is one line
/// every so often with counts, not a line per GOAWAY (2,877 lines in 30 s).
struct TroubleLog {
    enum Event: String {
        case goAway = "goaways", closed = "closes", connectFailed = "connect_failures"
        case refused = "refused_streams", reset = "reset_streams", timedOut = "timeouts"
    }

    private var counts: [Event: Int] = [:]
    /// Connections opened since the summary before.
    var connectionsOpened = 0
    private var windowStartMs: UInt64?

    /// Counts `event`; true when it is the first after a quiet while, to be logged on its own.
    mutating func note(_ event: Event, nowMs: UInt64) -> Bool {
        guard windowStartMs != nil else {
            windowStartMs = nowMs
            counts = [:]
            connectionsOpened = 0
            return true
        }
        counts[event, default: 0] += 1
        return false
    }

    /// The counts since the last line, once `everyMs` has passed; nil when there is nothing new.
    /// A window with nothing in it ends the trouble: the next event is logged at once.
    mutating func summary(nowMs: UInt64, everyMs: UInt64) -> [String: LogValue]? {
        guard let start = windowStartMs, nowMs >= start + everyMs else { return nil }
        guard !counts.isEmpty else {
            windowStartMs = nil
            return nil
        }
        var fields: [String: LogValue] = ["connections_opened": .int(connectionsOpened), "seconds": .int(Int((nowMs - start) / 1000))]
        for (event, n) in counts { fields[event.rawValue] = .int(n) }
        counts = [:]
        connectionsOpened = 0
        windowStartMs = nowMs
        return fields
    }
}
