import APNSAdmin
import FoundationEssentials
import QueueContract

/// The overview, workers and apps pages.
enum QueuePages {
    static func overview(_ o: DashboardData.Overview) -> String {
        let s = o.stats
        var html = ""
        if !s.exists {
            html += "<p class=\"notice warn\">Redis holds no key of this queue at all: is its name right (--queue, or the configuration's queue)?</p>"
        }
        for p in s.paused {
            html += "<p class=\"notice bad\"><b>Paused:</b> app \(e(p.app)) on worker \(e(p.worker)): \(e(p.reason))</p>"
        }
        let alive = s.workers.filter { $0.leaseLeftMs > 0 }.count
        let oldest = o.oldestAgeMs.values.max() ?? 0
        let cards: [(String, String, String?)] = [
            ("Waiting", HTML.grouped(s.depth), nil), ("Oldest job", s.depth > 0 ? "≥ " + HTML.span(oldest) : "none", oldest > 60_000 ? "warn" : nil),
            ("In flight", HTML.grouped(s.inFlight), nil), ("Scheduled", HTML.grouped(s.scheduled), nil),
            ("Retries", HTML.grouped(s.retries), s.retries > 0 ? "warn" : nil),
            ("Dead letters", HTML.grouped(s.deadLetters), s.deadLetters > 0 ? "bad" : nil),
            ("Results/s", oneDecimal(s.resultsPerSecond), nil), ("Workers alive", "\(alive) of \(s.workers.count)", alive == 0 ? "bad" : nil),
        ]
        html += "<div class=\"cards\" id=\"cards\">"
        for (label, value, tone) in cards {
            html +=
                "<div class=\"card\" data-card=\"\(e(label))\"><div class=\"label\">\(e(label))</div><div class=\"value\(tone.map { " " + $0 } ?? "")\">\(e(value))</div></div>"
        }
        html += "</div>"
        html += "<div class=\"charts\">"
        html += Charts.chart(CounterHistory.minutes(o.history, count: 60, nowMs: o.nowMs), id: "chart-hour", title: "Jobs per minute, last hour")
        html += Charts.chart(CounterHistory.minutes(o.history, count: 1440, nowMs: o.nowMs), id: "chart-day", title: "Jobs per minute, last day")
        html += "</div>"
        html += DeadLetterPages.byReason(s.deadLetterReasons)
        if !o.queues.isEmpty {
            html += "<h2>Queues of this worker configuration</h2>"
            html += HTML.table(
                ["Queue", "Share", "Shards", "Waiting", "In flight", "Scheduled", "Dead letters", "Results/s"],
                o.queues.map { r in
                    [
                        r.queue.name == o.queue
                            ? "<b>\(e(r.queue.name))</b> <span class=\"muted\">(these pages)</span>"
                            : "\(e(r.queue.name)) <span class=\"muted\">(apnsctl web --queue \(e(r.queue.name)))</span>",
                        e(r.share), HTML.num(Int64(r.queue.shards)), HTML.num(r.stats.depth), HTML.num(r.stats.inFlight),
                        HTML.num(r.stats.scheduled), HTML.num(r.stats.deadLetters, tone: r.stats.deadLetters > 0 ? "bad" : nil),
                        "<span class=\"num\">\(oneDecimal(r.stats.resultsPerSecond))</span>",
                    ]
                }, id: "queues")
        }
        html += "<h2>Queues and shards</h2>"
        html += HTML.table(
            ["Keys", "Waiting", "Oldest job", "In flight", "Scheduled", "Retries", "Dead letters", "Results/s"],
            s.keySets.map { k in
                [
                    "<code>{\(e(k.keys))}</code>" + (k.draining ? " <span class=\"warn\">draining</span>" : ""), HTML.num(k.depth),
                    k.depth > 0 ? "≥ " + HTML.span(o.oldestAgeMs[k.keys] ?? 0) : "<span class=\"muted\">–</span>",
                    HTML.num(k.inFlight), HTML.num(k.scheduled), HTML.num(k.retries, tone: k.retries > 0 ? "warn" : nil),
                    HTML.num(k.deadLetters, tone: k.deadLetters > 0 ? "bad" : nil), "<span class=\"num\">\(oneDecimal(k.resultsPerSecond))</span>",
                ]
            }, id: "key-sets")
        let names = [
            "delivered", "invalid_token", "invalid_channel", "dead_lettered", "duplicate", "retried", "scheduled", "recovered", "may_duplicate",
        ]
        html += "<h2>Counters since the queue began</h2>"
        let columns: [String] = ["App"] + names.map { String($0.map { $0 == "_" ? " " : $0 }) }
        var rows: [[String]] = [["<b>all</b>"] + names.map { HTML.num(s.counters[$0] ?? 0) }]
        for app in QueueCommands.apps(s) {
            let cells: [String] = names.map { name in HTML.num(s.counters["\(name):\(app)"] ?? 0) }
            rows.append([e(app)] + cells)
        }
        html += HTML.table(columns, rows, id: "counters")
        return html
    }

    static func workers(_ rows: [DashboardData.WorkerRow]) -> String {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return HTML.table(
            ["Worker", "Host", "State", "Last heartbeat", "Lease", "Batches held", "Jobs in flight", "Started", "Version"],
            rows.map { w in
                let started = w.info?["started_ms"]?.integer
                return [
                    "<code>\(e(w.id))</code>", e(w.info?["host"]?.string ?? "–"),
                    w.alive ? HTML.badge("alive", tone: "ok") : HTML.badge("lease ran out", tone: "bad"),
                    w.lastHeartbeatAgoMs.map { e(HTML.span($0) + " ago") } ?? "<span class=\"muted\">–</span>",
                    w.alive ? e(HTML.span(w.leaseLeftMs) + " left") : "<span class=\"bad\">ran out \(e(HTML.span(-w.leaseLeftMs))) ago</span>",
                    HTML.num(w.batches), HTML.num(w.inFlight), started.map { e(HTML.span(now - $0) + " ago") } ?? "–",
                    "<span class=\"muted\">\(e(w.info?["version"]?.string ?? "–"))</span>",
                ]
            }, id: "workers", empty: "No worker has registered with this queue.")
    }

    static func apps(_ rows: [DashboardData.AppRow]) -> String {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let tones: [DashboardData.AppRow.State: String] = [.ready: "ok", .paused: "bad", .connecting: "warn", .unserved: "muted"]
        return HTML.table(
            [
                "App", "Health", "Provider", "Why", "Last success", "Connections", "Stream limit", "JWT age / token", "Workers", "Delivered",
                "Invalid tokens",
                "Dead letters",
            ],
            rows.map { a in
                let jwt =
                    a.jwtAgeSeconds.map { age in
                        "<span class=\"\(age >= 3300 ? "bad" : age >= 3000 ? "warn" : "ok")\">\(e(HTML.span(age * 1000)))</span>"
                    }
                    ?? a.tokenLeftSeconds.map { left in
                        "<span class=\"\(left <= 0 ? "bad" : left < 300 ? "warn" : "ok")\">access token, \(e(HTML.span(max(0, left) * 1000))) left</span>"
                    }
                let provider = a.provider.map { $0 == "fcm" ? "FCM" : "APNs" } ?? "<span class=\"muted\">–</span>"
                return [
                    "<b>\(e(a.app))</b>", HTML.badge(a.state.rawValue, tone: tones[a.state] ?? "muted"), provider,
                    a.paused.isEmpty ? "<span class=\"muted\">–</span>" : a.paused.map(e).joined(separator: "<br>"),
                    a.lastSuccessMs.map { e(HTML.span(now - $0) + " ago") } ?? "<span class=\"muted\">never</span>", HTML.num(a.connections),
                    HTML.num(a.streamLimit), jwt ?? "<span class=\"muted\">certificate</span>", HTML.num(a.workers),
                    HTML.num(a.counters["delivered"] ?? 0), HTML.num(a.counters["invalid_token"] ?? 0),
                    HTML.num(a.counters["dead_lettered"] ?? 0, tone: (a.counters["dead_lettered"] ?? 0) > 0 ? "bad" : nil),
                ]
            }, id: "apps", empty: "No app is configured or counted yet.")
    }
}
