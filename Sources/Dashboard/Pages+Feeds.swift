import APNSAdmin

/// The invalid-token and invalid-channel feeds, and the sign-in page.
enum FeedPages {
    static func filters(action: String, app: String?, reason: String?, choices: DashboardData.Choices) -> String {
        return "<form class=\"filters\" method=\"get\" action=\"\(action)\">" + HTML.select("app", "App", choices.apps, app)
            + HTML.select("reason", "Reason", choices.reasons, reason)
            + "<button type=\"submit\">Filter</button> <a href=\"\(action)\">Clear</a></form>"
    }

    static func tokens(_ page: RecordPage, before: String?, app: String?, reason: String?, choices: DashboardData.Choices) -> String {
        var html = filters(action: "/tokens", app: app, reason: reason, choices: choices)
        let csv = "/tokens.csv" + { $0.isEmpty ? "" : "?" + $0 }(FormDecoding.query([("app", app), ("reason", reason)]))
        html += HTML.count(page, "invalid token", id: "count", match: false, before: before)
        html += " <a href=\"\(e(csv))\" id=\"csv\" download>Export CSV (all of them)</a></p>"
        html += HTML.table(
            ["Id", "Time", "Token", "App", "Topic", "Reason", "APNs timestamp"],
            page.rows.map { r in
                [
                    "<code>\(e(r.id))</code>", e(HTML.clock(r.timeMs)), "<code>\(e(r.string("token")))</code>", e(r.string("app")),
                    e(r.string("topic")), HTML.badge(r.string("reason"), tone: "warn"), e(r.string("apns_timestamp")),
                ]
            }, id: "tokens", empty: "No invalid token matches.")
        return html + HTML.pager("/tokens", [("app", app), ("reason", reason)], next: page.next, paged: before != nil)
    }

    /// The feed as CSV; a cell a spreadsheet would run as a formula is quoted with a leading '.
    static func csvCell(_ text: String) -> String {
        let safe = text.first.map { "=+-@\t\r".contains($0) } == true ? "'" + text : text
        return safe.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
            ? "\"" + safe.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\"" : safe
    }

    static let csvHeader = ["id", "time_ms", "token", "app", "topic", "reason", "apns_timestamp"].joined(separator: ",") + "\r\n"

    /// Rows of the CSV export (after `csvHeader`).
    static func csv(_ rows: [StreamRecord]) -> String {
        var out = ""
        for r in rows {
            out +=
                [r.id, String(r.timeMs), r.string("token"), r.string("app"), r.string("topic"), r.string("reason"), r.string("apns_timestamp")]
                .map(csvCell).joined(separator: ",") + "\r\n"
        }
        return out
    }

    static func channels(
        _ page: RecordPage, before: String?, app: String?, reason: String?, choices: DashboardData.Choices, apps: [String],
        listed: (app: String, ids: [String])?,
        listError: String?
    ) -> String {
        var html = ""
        if !apps.isEmpty {
            html += "<h2>Channels at APNs</h2><form class=\"filters\" method=\"get\" action=\"/channels\">"
            html += "<label>App<select name=\"list\">" + apps.map { "<option\(listed?.app == $0 ? " selected" : "")>\(e($0))</option>" }.joined()
            html += "</select></label><button type=\"submit\">List its channels (asks APNs)</button></form>"
            if let listError { html += "<p class=\"notice bad\">\(e(listError))</p>" }
            if let listed {
                html += HTML.table(
                    ["Channel", "App"], listed.ids.map { ["<code>\(e($0))</code>", e(listed.app)] }, id: "channel-list",
                    empty: "App \(listed.app) has no channel.")
            }
        } else {
            html +=
                "<p class=\"muted\">Start apnsctl web with --config to list each app's channels at APNs; create and delete them with apnsctl channels.</p>"
        }
        html += "<h2>Invalid channels</h2>" + filters(action: "/channels", app: app, reason: reason, choices: choices)
        html += HTML.count(page, "refused channel", id: "count", match: false, before: before) + "</p>"
        html += HTML.table(
            ["Id", "Time", "Channel", "App", "Reason", "Job id"],
            page.rows.map { r in
                [
                    "<code>\(e(r.id))</code>", e(HTML.clock(r.timeMs)), "<code>\(e(r.string("channel")))</code>", e(r.string("app")),
                    HTML.badge(r.string("reason"), tone: "warn"), "<code>\(e(r.string("job_id")))</code>",
                ]
            }, id: "invalid-channels", empty: "No broadcast channel has been refused.")
        return html + HTML.pager("/channels", [("app", app), ("reason", reason)], next: page.next, paged: before != nil)
    }

    static func login(next: String, failed: Bool, canSignIn: Bool) -> String {
        guard canSignIn else {
            return
                "<p class=\"notice warn\">This dashboard takes no sign-in: it was started \(e("with --read-only or without a secret (--auth-file, APNSW_WEB_TOKEN)")), so it only shows.</p>"
        }
        var html = failed ? "<p class=\"notice bad\" id=\"error\">That is not the dashboard's secret.</p>" : ""
        html += "<form class=\"login\" method=\"post\" action=\"/login\">\(HTML.hidden("next", next))"
        html += "<label for=\"secret\">The dashboard's secret (its token file or APNSW_WEB_TOKEN)</label>"
        html += "<input type=\"password\" id=\"secret\" name=\"secret\" autocomplete=\"current-password\" autofocus>"
        html += "<button class=\"primary\" id=\"sign-in\">Sign in</button></form>"
        return html
    }
}
