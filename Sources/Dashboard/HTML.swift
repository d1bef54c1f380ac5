import APNSAdmin
import FoundationEssentials
import Glibc

/// HTML built as text. Everything from Redis or a request goes through `escape` (`e`): nothing
/// else writes markup, so a dead letter holding `<script>` shows as text.
enum HTML {
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for c in text.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// The pages in the navigation bar: path and title.
    static let sections = [
        ("/", "Overview"), ("/workers", "Workers"), ("/apps", "Apps"), ("/dead", "Dead letters"), ("/tokens", "Invalid tokens"),
        ("/channels", "Channels"),
    ]

    /// A whole page. `refresh`: the page reloads itself (app.js every 5 s; a meta refresh without JavaScript).
    /// `here`: the page's own path and query, where signing in comes back to.
    static func page(title: String, path: String, here: String? = nil, queue: String, user: Viewer, refresh: Bool, body: String) -> String {
        let nav = sections.map { href, name in
            "<a href=\"\(href)\"\(href == path ? " class=\"current\" aria-current=\"page\"" : "")>\(e(name))</a>"
        }.joined()
        let who: String
        switch user.mode {
        case .readOnly: who = "<span class=\"badge muted\">read-only</span>"
        case .signedIn:
            who = "<form method=\"post\" action=\"/logout\" class=\"inline\">\(user.csrfField)<button class=\"link\">Sign out</button></form>"
        case .anonymous: who = "<a href=\"/login?next=\(FormDecoding.encode(here ?? path))\">Sign in to act</a>"
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(e(title)) · apns-worker \(e(queue))</title><link rel="stylesheet" href="/static/app.css">
            \(refresh ? "<noscript><meta http-equiv=\"refresh\" content=\"10\"></noscript>" : "")
            <script src="/static/app.js" defer></script></head>
            <body\(refresh ? " data-refresh=\"5\"" : "")><a class="skip" href="#main">Skip to the content</a><header><span class="brand">apns-worker</span><span class="queue">queue \(e(queue))</span><nav>\(nav)</nav><span class="who">\(who)</span></header>
            <main id="main" tabindex="-1"><h1>\(e(title))</h1>
            \(body)
            </main><footer>Updated <time id="updated">\(e(clock(Int64(Date().timeIntervalSince1970 * 1000))))</time> UTC\(refresh ? " · refreshes every 5 s <button type=\"button\" class=\"link\" id=\"refresh-toggle\">Pause</button>" : "")</footer></body></html>
            """
    }

    /// A table; cells are markup already (build them with `e` or `cell`).
    static func table(_ columns: [String], _ rows: [[String]], id: String? = nil, empty: String = "Nothing here.") -> String {
        guard !rows.isEmpty else { return "<p class=\"empty\">\(e(empty))</p>" }
        let head = columns.map { "<th>\(e($0))</th>" }.joined()
        let body = rows.map { "<tr>" + $0.map { "<td>\($0)</td>" }.joined() + "</tr>" }.joined(separator: "\n")
        return
            "<div class=\"scroll\"><table\(id.map { " id=\"\($0)\"" } ?? "")><thead><tr>\(head)</tr></thead><tbody>\n\(body)\n</tbody></table></div>"
    }

    /// A number, right-aligned in its column.
    static func num<N: BinaryInteger>(_ n: N, tone: String? = nil) -> String {
        "<span class=\"num\(tone.map { " " + $0 } ?? "")\">\(grouped(Int64(n)))</span>"
    }

    static func badge(_ text: String, tone: String) -> String { "<span class=\"badge \(tone)\">\(e(text))</span>" }

    static func link(_ href: String, _ text: String) -> String { "<a href=\"\(e(href))\">\(e(text))</a>" }

    /// A filter's drop-down: "any" (empty), then each option, `chosen` selected.
    static func select(_ name: String, _ label: String, _ options: [String], _ chosen: String?) -> String {
        let items = ([""] + options).map { o in
            "<option value=\"\(e(o))\"\(o == (chosen ?? "") ? " selected" : "")>\(o.isEmpty ? "any" : e(o))</option>"
        }.joined()
        return "<label>\(e(label))<select name=\"\(name)\">\(items)</select></label>"
    }

    /// The opening of a list's count paragraph (the caller closes it): how many `noun`s there
    /// are (`match`: that a filter matches) and how many the page shows; when a filter's search
    /// stopped before the oldest, how far it went.
    static func count(_ page: RecordPage, _ noun: String, id: String, match: Bool, before: String?) -> String {
        guard let matched = page.matched else {
            return "<p id=\"\(id)\" data-count=\"\"><b>\(grouped(Int64(page.rows.count)))</b> shown of the \(noun)s that match among the "
                + "\(grouped(Int64(page.searched))) searched\(before == nil ? " (the newest)" : ""); older ones are searched page by page."
        }
        return "<p id=\"\(id)\" data-count=\"\(matched)\"><b>\(grouped(Int64(matched)))</b> \(noun)\(matched == 1 ? "" : "s")\(match ? " match" : "")"
            + (matched > page.rows.count ? "; \(page.rows.count) shown, newest first." : ", newest first.")
    }

    /// Links to the newest page and, when there is one, the next older page (`before` = `next`).
    static func pager(_ path: String, _ query: [(String, String?)], next: String?, paged: Bool) -> String {
        guard paged || next != nil else { return "" }
        let base = FormDecoding.query(query)
        var html = "<nav class=\"pager\" aria-label=\"pages\">" + link(path + (base.isEmpty ? "" : "?" + base), "Newest")
        if let next { html += " " + "<a id=\"older\" href=\"\(e(path + "?" + FormDecoding.query(query + [("before", next)])))\">Older →</a>" }
        return html + "</nav>"
    }

    static func hidden(_ name: String, _ value: String?) -> String {
        value.map { "<input type=\"hidden\" name=\"\(e(name))\" value=\"\(e($0))\">" } ?? ""
    }

    /// 1234567 → 1,234,567.
    static func grouped(_ n: Int64) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0, (digits.count - i) % 3 == 0 { out += "," }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }

    /// A span of milliseconds in words: 45 s, 12 min, 3 h, 2 d.
    static func span(_ ms: Int64) -> String {
        let s = max(0, ms) / 1000
        if s < 120 { return "\(s) s" }
        if s < 7200 { return "\(s / 60) min" }
        if s < 172_800 { return "\(s / 3600) h" }
        return "\(s / 86400) d"
    }

    /// UNIX ms → `2026-12-03 11:52:07` (UTC).
    static func clock(_ ms: Int64) -> String {
        var t = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return
            "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday)) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }
}

/// Shorthand for `HTML.escape`.
func e(_ text: String) -> String { HTML.escape(text) }
