import QueueContract

/// The overview's charts, drawn as inline SVG (no script, no outside files): per-minute bars for
/// the last hour, lines for the last day. Colours come from app.css classes.
enum Charts {
    static let series: [(name: String, label: String, value: @Sendable (CounterHistory.Minute) -> Int64)] = [
        ("delivered", "delivered", { $0.delivered }), ("failed", "failed (invalid token or channel)", { $0.failed }),
        ("dead", "dead-lettered", { $0.deadLettered }),
    ]

    static func chart(_ minutes: [CounterHistory.Minute], id: String, title: String) -> String {
        let (width, height, left, bottom) = (720.0, 170.0, 44.0, 22.0)
        let plotW = width - left - 6, plotH = height - bottom - 10
        let top = max(1, minutes.map { m in series.map { $0.value(m) }.max() ?? 0 }.max() ?? 1)
        func y(_ v: Int64) -> Double { 10 + plotH - plotH * Double(v) / Double(top) }
        var svg = "<svg class=\"chart\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" role=\"img\" aria-label=\"\(e(title))\">"
        svg += "<title>\(e(title))</title>"
        for tick in [0, top / 2, top] {
            svg += "<line class=\"grid\" x1=\"\(left)\" x2=\"\(width - 6)\" y1=\"\(fmt(y(tick)))\" y2=\"\(fmt(y(tick)))\"/>"
            svg += "<text class=\"axis\" x=\"\(left - 4)\" y=\"\(fmt(y(tick) + 4))\" text-anchor=\"end\">\(HTML.grouped(tick))</text>"
        }
        let step = plotW / Double(max(1, minutes.count))
        if minutes.count <= 120 {
            let barW = max(1, step / Double(series.count) - 0.5)
            for (i, m) in minutes.enumerated() {
                for (s, one) in series.enumerated() {
                    let v = one.value(m)
                    guard v > 0 else { continue }
                    let x = left + Double(i) * step + Double(s) * barW
                    svg +=
                        "<rect class=\"bar \(one.name)\" x=\"\(fmt(x))\" y=\"\(fmt(y(v)))\" width=\"\(fmt(barW))\" height=\"\(fmt(10 + plotH - y(v)))\""
                    svg += " data-minute=\"\(m.startMs)\" data-series=\"\(one.name)\" data-value=\"\(v)\">"
                    svg += "<title>\(e(HTML.clock(m.startMs).suffix(8).prefix(5) + " UTC")): \(HTML.grouped(v)) \(e(one.label))</title></rect>"
                }
            }
        } else {
            for one in series {
                let points = minutes.enumerated().map { i, m in "\(fmt(left + (Double(i) + 0.5) * step)),\(fmt(y(one.value(m))))" }
                svg += "<polyline class=\"line \(one.name)\" points=\"\(points.joined(separator: " "))\" data-series=\"\(one.name)\"/>"
            }
        }
        if let first = minutes.first, let last = minutes.last {
            let labels = [(first, "start"), (minutes[minutes.count / 2], "middle"), (last, "end")]
            for (m, anchor) in labels {
                let x = anchor == "start" ? left : anchor == "end" ? width - 6 : left + plotW / 2
                svg +=
                    "<text class=\"axis\" x=\"\(fmt(x))\" y=\"\(Int(height) - 6)\" text-anchor=\"\(anchor)\">\(e(String(HTML.clock(m.startMs).suffix(8).prefix(5))))</text>"
            }
        }
        svg += "</svg>"
        let totals = series.map { one in
            "<span class=\"key \(one.name)\"><i></i>\(e(one.label)) <b class=\"num\" data-total=\"\(one.name)\">\(HTML.grouped(minutes.reduce(0) { $0 + one.value($1) }))</b></span>"
        }.joined()
        return "<figure class=\"chart-box\" id=\"\(id)\"><figcaption>\(e(title))</figcaption>\(svg)<div class=\"legend\">\(totals)</div></figure>"
    }

    private static func fmt(_ x: Double) -> String {
        let tenths = Int((x * 10).rounded())
        return "\(tenths / 10).\(abs(tenths % 10))"
    }
}
