import APNSAdmin
import APNSCore
import FoundationEssentials

/// The dead-letter filter as a page's query or a form's fields: reason, app, newer_than and
/// older_than (15m, 2h, 7d), or one id.
struct DeadLetterQuery {
    var reason: String?
    var app: String?
    var newerThan: String?
    var olderThan: String?
    var id: String?

    init(_ fields: [String: String]) {
        func value(_ name: String) -> String? { fields[name].flatMap { $0.isEmpty ? nil : $0 } }
        (reason, app, newerThan, olderThan, id) = (value("reason"), value("app"), value("newer_than"), value("older_than"), value("id"))
    }

    /// The filter apnsctl's commands take; a bad duration or id names itself.
    func filter() throws -> DeadLetterFilter {
        var f = DeadLetterFilter()
        if let id {
            guard DeadLetterFilter.isValidID(id) else { throw AdminError.invalid("\"\(id)\" is not a dead-letter id") }
            f.ids = [id]
            return f
        }
        f.reason = reason
        f.app = app
        f.newerThanMs = try newerThan.map(parseDuration)
        f.olderThanMs = try olderThan.map(parseDuration)
        f.all = f.reason == nil && f.app == nil && f.newerThanMs == nil && f.olderThanMs == nil
        return f
    }

    var pairs: [(String, String?)] { [("reason", reason), ("app", app), ("newer_than", newerThan), ("older_than", olderThan), ("id", id)] }
    var queryString: String { FormDecoding.query(pairs) }
    var hiddenFields: String { pairs.map { HTML.hidden($0.0, $0.1) }.joined() }
}

enum DeadLetterPages {
    static func list(_ found: DashboardData.DeadLetterPage, query: DeadLetterQuery, before: String?, viewer: Viewer, notice: String?) -> String {
        let (rows, matched, choices) = (found.page.rows, found.page.matched, found.choices)
        var html = notice.map { "<p class=\"notice ok\" id=\"notice\">\(e($0))</p>" } ?? ""
        html += byReason(found.byReason)
        html += "<form class=\"filters\" method=\"get\" action=\"/dead\" id=\"filters\">"
        html += HTML.select("reason", "Reason", choices.reasons, query.reason) + HTML.select("app", "App", choices.apps, query.app)
        html += "<label>Newer than<input name=\"newer_than\" placeholder=\"15m\" size=\"6\" value=\"\(e(query.newerThan ?? ""))\"></label>"
        html += "<label>Older than<input name=\"older_than\" placeholder=\"2h\" size=\"6\" value=\"\(e(query.olderThan ?? ""))\"></label>"
        html += "<button type=\"submit\">Filter</button> <a href=\"/dead\">Clear</a></form>"
        html += HTML.count(found.page, "dead letter", id: "matched", match: true, before: before) + "</p>"
        if viewer.canAct, matched ?? rows.count > 0 {
            let these = matched.map { "these " + HTML.grouped(Int64($0)) } ?? "all that match…"
            html += "<div class=\"actions\">"
            html +=
                "<form method=\"post\" action=\"/dead/requeue\">\(viewer.csrfField)\(query.hiddenFields)<button class=\"primary\" id=\"requeue-all\">Requeue \(these)</button></form>"
            html +=
                "<form method=\"post\" action=\"/dead/purge\">\(viewer.csrfField)\(query.hiddenFields)<button class=\"danger\" id=\"purge-all\">Purge \(these)</button></form>"
            html += "</div>"
        }
        html += HTML.table(
            ["Id", "Age", "Reason", "App", "Job id", "Token", "Detail"],
            rows.map { r in
                [
                    HTML.link("/dead/show?id=\(FormDecoding.encode(r.id))", r.id), e(DeadLetterCommands.age(r.timeMs)),
                    HTML.badge(r.string("reason"), tone: "bad"), e(r.string("app")), "<code>\(e(r.string("job_id")))</code>",
                    "<code>\(e(String(r.string("token").prefix(16))))\(r.string("token").count > 16 ? "…" : "")</code>",
                    e(String(r.string("detail").prefix(160))),
                ]
            }, id: "dead-letters", empty: "No dead letter matches.")
        return html + HTML.pager("/dead", query.pairs, next: found.page.next, paged: before != nil)
    }

    /// The queue's dead letters by reason, counted by the workers as they write them: why jobs
    /// die, without reading the letters.
    static func byReason(_ tally: [(reason: String, count: Int64)]) -> String {
        guard !tally.isEmpty else { return "" }
        return "<h2>Dead-lettered by reason</h2>"
            + HTML.table(
                ["Reason", "Letters written"],
                tally.map { [HTML.link("/dead?reason=\(FormDecoding.encode($0.reason))", $0.reason), HTML.num($0.count)] }, id: "by-reason")
            + "<p class=\"hint\">Counted since the queue began; a purge or requeue does not lower it.</p>"
    }

    /// The most of a job a page shows (and edits); a larger one is cut, with a link to it whole.
    static let shownBytes = 64 * 1024

    /// One letter: its facts, attempts and original job, and (signed in) the editor holding `editing`.
    static func show(_ r: StreamRecord, job: String, editing: String, viewer: Viewer, error: String?) -> String {
        var html = error.map { "<p class=\"notice bad\" id=\"error\">\(e($0))</p>" } ?? ""
        html += "<dl class=\"facts\" id=\"facts\"><dt>Id</dt><dd><code>\(e(r.id))</code> (\(e(DeadLetterCommands.age(r.timeMs))) ago)</dd>"
        for key in ["reason", "detail", "app", "job_id", "token", "topic", "channel", "worker"] where r.fields[key] != nil {
            html += "<dt>\(e(key))</dt><dd>\(key == "reason" ? HTML.badge(r.string(key), tone: "bad") : e(r.string(key)))</dd>"
        }
        html += "</dl><h2>Attempts</h2>"
        html += HTML.table(
            ["#", "Status", "Reason", "At", "Detail"],
            (r.fields["attempts"]?.array ?? []).enumerated().map { i, a in
                [
                    HTML.num(i + 1), e(a["status"]?.display ?? "–"), e(a["reason"]?.display ?? ""),
                    a["time_ms"]?.integer.map { e(HTML.clock($0) + " UTC") } ?? "–", e(a["detail"]?.display ?? ""),
                ]
            }, id: "attempts", empty: "No attempt was recorded.")
        let size = job.utf8.count, download = "/dead/job?id=\(FormDecoding.encode(r.id))"
        if size > shownBytes {
            // A job can be any size: a page that held 5 MB twice never loaded.
            let start = String(decoding: Array(job.utf8.prefix(shownBytes)), as: UTF8.self)
            html += "<h2>Original job</h2><pre id=\"job\">\(e(start))</pre>"
            html +=
                "<p class=\"notice warn\" id=\"job-cut\">The job is \(HTML.grouped(Int64(size))) bytes: its first \(HTML.grouped(Int64(shownBytes))) are shown. "
            html += "<a href=\"\(e(download))\" id=\"job-download\">Download it whole</a>.</p>"
        } else {
            html += "<h2>Original job</h2><pre id=\"job\">\(e(job))</pre><p><a href=\"\(e(download))\" id=\"job-download\">Download it</a></p>"
        }
        guard viewer.canAct else {
            html += "<p class=\"muted\">Sign in to requeue or purge this dead letter.</p>"
            return html
        }
        html += "<h2>Requeue</h2><form method=\"post\" action=\"/dead/requeue\" id=\"editor\">\(viewer.csrfField)\(HTML.hidden("id", r.id))"
        if editing.utf8.count > shownBytes {
            html +=
                "<p class=\"notice warn\" id=\"too-large\">This job is too large to edit here (\(HTML.grouped(Int64(shownBytes))) bytes at most): "
            html += "requeue it as it is, or download it, fix it, and run <code>apnsctl dead requeue \(e(r.id)) --replace FILE</code>.</p>"
        } else {
            html += "<p class=\"muted\">Edit the job if it needs it; it is checked as a producer's job would be before it goes back on the queue.</p>"
            html += "<textarea name=\"job\" id=\"job-editor\" spellcheck=\"false\">\(e(editing))</textarea>"
        }
        html += "<div class=\"actions\"><button class=\"primary\" id=\"requeue-one\">Requeue this job</button></div></form>"
        html +=
            "<form method=\"post\" action=\"/dead/purge\">\(viewer.csrfField)\(HTML.hidden("id", r.id))<button class=\"danger\" id=\"purge-one\">Purge this dead letter</button></form>"
        return html
    }

    /// Asks once, with the count: the form sends it back with `confirm` and `until`.
    static func confirm(verb: String, count: Int, untilMs: Int64, summary: String, query: DeadLetterQuery, viewer: Viewer) -> String {
        let what = "\(HTML.grouped(Int64(count))) dead letter\(count == 1 ? "" : "s")"
        var html =
            "<div class=\"notice \(verb == "purge" ? "bad" : "warn")\" id=\"confirm\"><p><b>\(verb == "purge" ? "Purge" : "Requeue") \(what)?</b> "
        html +=
            "They match: \(e(summary)). \(verb == "purge" ? "Purged letters are gone for good." : "Each job goes back on the queue as it was.")</p>"
        html += "<form method=\"post\" action=\"/dead/\(verb)\" class=\"inline\">\(viewer.csrfField)\(query.hiddenFields)"
        html += HTML.hidden("confirm", String(count)) + HTML.hidden("until", String(untilMs))
        html +=
            "<button class=\"\(verb == "purge" ? "danger" : "primary")\" id=\"confirm-button\">\(verb == "purge" ? "Purge" : "Requeue") \(what)</button></form> "
        html += "<a href=\"/dead?\(e(query.queryString))\">Cancel</a></div>"
        return html
    }
}
