import FoundationEssentials
import Synchronization

/// Prometheus-style counters, gauges and histograms, shared by the worker's threads.
/// Hot paths record a whole batch under one lock (`record`), never one lock per notification.
public final class Metrics: Sendable {
    public struct Labels: Hashable, Sendable {
        let pairs: [String]  // name, value, name, value, …
        /// Labels are kept sorted by name, so each series has one spelling.
        public init(_ pairs: (String, String)...) { self.pairs = pairs.sorted { $0.0 < $1.0 }.flatMap { [$0.0, $0.1] } }
        var text: String {
            guard !pairs.isEmpty else { return "" }
            var parts: [String] = []
            for i in stride(from: 0, to: pairs.count, by: 2) {
                parts.append("\(pairs[i])=\"\(Labels.escaped(pairs[i + 1]))\"")
            }
            return "{" + parts.joined(separator: ",") + "}"
        }

        /// A label value as the exposition format quotes it: backslash, quote and newline escaped.
        static func escaped(_ value: String) -> String {
            var out = ""
            for c in value.unicodeScalars {
                switch c {
                case "\\": out += "\\\\"
                case "\"": out += "\\\""
                case "\n": out += "\\n"
                default: out.unicodeScalars.append(c)
                }
            }
            return out
        }
    }

    public struct Histogram: Sendable {
        /// Inline, as the buckets are: no array's uniqueness check per sample.
        public static let bounds: InlineArray<15, Double> = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
        /// One more than the bounds: the last counts what is above them all (+Inf only).
        public var buckets = InlineArray<16, UInt64>(repeating: 0)
        public var count: UInt64 = 0
        public var sum: Double = 0

        public init() {}

        /// Most samples fall in the first buckets, so a forward scan stops early.
        @inlinable
        public mutating func observe(_ seconds: Double) {
            count += 1
            sum += seconds
            var i = 0
            while i < Histogram.bounds.count && seconds > Histogram.bounds[i] { i += 1 }
            buckets[i] += 1
        }

        public mutating func add(_ other: Histogram) {
            count += other.count
            sum += other.sum
            for i in buckets.indices { buckets[i] += other.buckets[i] }
        }
    }

    public struct Store: Sendable {
        var counters: [String: [Labels: Double]] = [:]
        var gauges: [String: [Labels: Double]] = [:]
        var histograms: [String: [Labels: Histogram]] = [:]

        public mutating func add(_ name: String, _ labels: Labels = Labels(), _ value: Double = 1) {
            counters[name, default: [:]][labels, default: 0] += value
        }
        public mutating func set(_ name: String, _ labels: Labels = Labels(), _ value: Double) {
            gauges[name, default: [:]][labels] = value
        }
        /// Drops a gauge's series: a value that can no longer be read must not stay as if current.
        public mutating func unset(_ name: String, _ labels: Labels = Labels()) {
            gauges[name]?[labels] = nil
        }
        /// Adds samples observed elsewhere (a batch's, outside the lock).
        public mutating func add(_ name: String, _ labels: Labels, _ samples: Histogram) {
            guard samples.count > 0 else { return }
            histograms[name, default: [:]][labels, default: Histogram()].add(samples)
        }
    }

    private let store = Mutex(Store())
    private let help: [String: (String, String)]
    /// Sends that may reach a device twice, not yet added to the queue's stats hash.
    private let unflushedMayDuplicate = Atomic<Int>(0)

    /// `n` jobs go again although APNs may have taken them already (`cause`: what left it
    /// unknown): counted here, and in the stats hash once the worker moves them there.
    public func mayDuplicate(_ n: Int, cause: String) {
        guard n > 0 else { return }
        record { $0.add("apns_resends_may_duplicate_total", .init(("cause", cause)), Double(n)) }
        unflushedMayDuplicate.add(n, ordering: .relaxed)
    }

    /// The count `mayDuplicate` gathered since the last call, for the stats hash.
    public func takeMayDuplicate() -> Int { unflushedMayDuplicate.exchange(0, ordering: .relaxed) }

    /// Gives back a count taken that could not be written.
    public func returnMayDuplicate(_ n: Int) { unflushedMayDuplicate.add(n, ordering: .relaxed) }

    public init() {
        help = [
            "apns_notifications_total": ("counter", "Decided notifications by app, push type, HTTP status (0: not sent) and reason"),
            "apns_retries_total": ("counter", "Notifications scheduled for another try"),
            "apns_dead_letters_total": ("counter", "Jobs dead-lettered, by reason"),
            "apns_invalid_tokens_total": ("counter", "Device tokens reported invalid"),
            "apns_invalid_channels_total": ("counter", "Broadcast channels reported gone (ChannelNotRegistered)"),
            "apns_recoveries_total": ("counter", "Jobs taken back from workers whose lease ran out"),
            "apns_resends_may_duplicate_total": (
                "counter",
                "Jobs sent again although APNs may have taken them already, by cause (connection_lost, timed_out, stream_reset, handed_back, taken_back)"
            ),
            "apns_jwt_mints_total": ("counter", "Provider tokens minted"),
            "apns_goaways_total": ("counter", "GOAWAY frames received"),
            "apns_reconnects_total": ("counter", "APNs connections lost and replaced"),
            "apns_credential_pauses_total": ("counter", "Times an app was paused because APNs refused its credentials"),
            "apns_in_flight": ("gauge", "Jobs taken from Redis and not yet recorded"),
            "apns_stream_limit": ("gauge", "Sum of the live stream limits of the app's connections"),
            "apns_connections": ("gauge", "Ready APNs connections"),
            "apns_queue_depth": ("gauge", "Jobs waiting in the queue's list (absent while Redis does not answer)"),
            "apns_queue_oldest_age_seconds": (
                "gauge", "How long the oldest queued job has been the oldest, at least (absent while Redis does not answer)"
            ),
            "apns_redis_up": ("gauge", "1 when every Redis connection of the worker is up"),
            "apns_app_paused": ("gauge", "1 while the app is paused because APNs (or FCM) refused its credentials"),
            "apns_app_info": ("gauge", "1 for each app the worker sends with, labelled with its provider (apns or fcm)"),
            "fcm_token_renewals_total": ("counter", "FCM access tokens asked for after FCM refused one"),
            "apns_queue_wait_seconds": ("histogram", "Time from taking a job from Redis to sending it"),
            "apns_round_trip_seconds": ("histogram", "Time from sending a request to APNs' answer"),
            "apns_end_to_end_seconds": ("histogram", "Time from taking a job from Redis to its outcome being decided"),
        ]
    }

    /// Runs `body` with the store locked: record a batch of events at once.
    public func record(_ body: (inout Store) -> Void) {
        store.withLock { body(&$0) }
    }

    /// The Prometheus text format (version 0.0.4).
    public func render() -> String {
        let s = store.withLock { $0 }
        var out = ""
        func header(_ name: String) {
            let (type, text) = help[name] ?? ("untyped", name)
            out += "# HELP \(name) \(text)\n# TYPE \(name) \(type)\n"
        }
        for name in s.counters.keys.sorted() {
            header(name)
            for (labels, v) in s.counters[name]!.sorted(by: { $0.key.text < $1.key.text }) { out += "\(name)\(labels.text) \(format(v))\n" }
        }
        for name in s.gauges.keys.sorted() {
            header(name)
            for (labels, v) in s.gauges[name]!.sorted(by: { $0.key.text < $1.key.text }) { out += "\(name)\(labels.text) \(format(v))\n" }
        }
        for name in s.histograms.keys.sorted() {
            header(name)
            for (labels, h) in s.histograms[name]!.sorted(by: { $0.key.text < $1.key.text }) {
                var cumulative: UInt64 = 0
                for i in Histogram.bounds.indices {
                    let bound = Histogram.bounds[i]
                    cumulative += h.buckets[i]
                    out += "\(name)_bucket\(with(labels, "le", format(bound))) \(cumulative)\n"
                }
                out += "\(name)_bucket\(with(labels, "le", "+Inf")) \(h.count)\n"
                out += "\(name)_sum\(labels.text) \(format(h.sum))\n\(name)_count\(labels.text) \(h.count)\n"
            }
        }
        return out
    }

    private func with(_ labels: Labels, _ name: String, _ value: String) -> String {
        Labels(pairs: labels.pairs + [name, value]).text
    }

    private func format(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v)
    }
}

extension Metrics.Labels {
    init(pairs: [String]) { self.pairs = pairs }
}
