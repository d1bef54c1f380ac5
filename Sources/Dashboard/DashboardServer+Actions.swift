import APNSAdmin
import APNSCore
import FoundationEssentials
import QueueContract

/// The JSON API's reads, and the actions (requeue, purge) from forms and from the API.
extension DashboardServer {
    func read(api request: HTTPRequest) throws -> HTTPResponse {
        let q = request.query
        let filled = request.parameter
        let limit = try pageSize(request), before = try cursor(request)
        switch request.path {
        case "/api/overview": return json(try data.overview().json)
        case "/api/workers": return json(try data.workers().map(\.json))
        case "/api/apps": return json(try data.apps().map(\.json))
        case "/api/dead":
            let found = try data.deadLetters(try DeadLetterQuery(q).filter(), before: before, limit: limit)
            var answer: [String: Any] = [
                "dead_letters": found.page.rows.map(\.json), "searched": found.page.searched,
                "dead_lettered_by_reason": Dictionary(uniqueKeysWithValues: found.byReason.map { ($0.reason, $0.count) }),
            ]
            answer["matched"] = found.page.matched
            answer["next"] = found.page.next
            return json(answer)
        case "/api/dead/show":
            guard let id = filled("id") else { return failure(400, "say which dead letter: /api/dead/show?id=ID", api: true) }
            guard let r = try data.deadLetter(id: id) else { return failure(404, "no dead letter \(id)", api: true) }
            return json(r.json)
        case "/api/tokens", "/api/channels":
            let stream: KeyPath<QueueKeys, String> = request.path == "/api/tokens" ? \.invalidTokens : \.invalidChannels
            let page = try data.feed(stream, app: filled("app"), reason: filled("reason"), before: before, limit: limit).page
            var response = json(page.rows.map(\.json))
            // An array stays an array: the next page and the count go in headers.
            if let next = page.next {
                let query = FormDecoding.query([("app", filled("app")), ("reason", filled("reason")), ("limit", filled("limit")), ("before", next)])
                response.headers.append(("Link", "<\(request.path)?\(query)>; rel=\"next\""))
            }
            if let matched = page.matched { response.headers.append(("X-Total-Count", String(matched))) }
            return response
        default: return failure(404, "no API \(request.path) (see docs/dashboard.md)", api: true)
        }
    }

    /// `limit`: a page's rows, 100 unless said, 1 to 1,000.
    func pageSize(_ request: HTTPRequest) throws -> Int {
        guard let text = request.parameter("limit") else { return 100 }
        guard let n = Int(text), (1...1000).contains(n) else { throw AdminError.usage("limit must be a whole number from 1 to 1000, not \(text)") }
        return n
    }

    /// `before`: where a page starts, the id of the record the previous page ended with.
    func cursor(_ request: HTTPRequest) throws -> String? {
        guard let text = request.parameter("before") else { return nil }
        guard DeadLetterFilter.isValidID(text) else { throw AdminError.usage("before must be a record id (as a page's next gives it), not \(text)") }
        return text
    }

    /// POST /dead/requeue, /dead/purge and their /api/ twins. One id requeues at once (edited
    /// if `job` is given); a purge, or a requeue of a filtered set, first answers with the count
    /// and goes ahead only when `confirm` repeats it (and `until` bounds it to what was counted).
    func act(_ request: HTTPRequest, api: Bool) throws -> HTTPResponse {
        let fields = request.form.merging(request.query) { form, _ in form }
        if let refused = access.refusal(request, csrf: fields["csrf"] ?? request.header("x-csrf-token")) {
            return failure(refused.0, refused.1, api: api)
        }
        let verb: String
        switch request.path {
        case "/dead/requeue", "/api/dead/requeue": verb = "requeue"
        case "/dead/purge", "/api/dead/purge": verb = "purge"
        default: return failure(404, "no action \(request.path)", api: api)
        }
        let query = DeadLetterQuery(fields)
        var filter = try query.filter()
        let edited = fields["job"]
        if let edited, query.id == nil { return failure(400, "an edited job needs the id of its dead letter", api: api) }
        if let edited {
            do { _ = try Job.parse(Array(edited.utf8)) } catch {
                let why = "the edited job is not a valid job, nothing was requeued: \(error)"
                return api ? failure(422, why, api: true) : try show(id: query.id!, request: request, edited: edited, error: why)
            }
        }
        let asks = verb == "purge" || query.id == nil
        if asks {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            filter.untilMs = Int64(fields["until"] ?? "") ?? now
            let count = try data.countDeadLetters(filter)
            guard count > 0 else { return failure(404, "no dead letter matches (\(filter.summary))", api: api) }
            if fields["confirm"] != String(count) {
                if api {
                    let ask: [String: Any] = [
                        "confirm_needed": true, "would_\(verb)": count, "until": filter.untilMs!,
                        "hint": "send again with confirm=\(count) and until=\(filter.untilMs!)",
                    ]
                    return json(ask, status: 409)
                }
                let body = DeadLetterPages.confirm(
                    verb: verb, count: count, untilMs: filter.untilMs!, summary: filter.summary, query: query, viewer: access.viewer(request))
                return page(verb == "purge" ? "Purge dead letters" : "Requeue dead letters", "/dead", request, refresh: false, body)
            }
        }
        let done = try data.with { ctx in
            verb == "purge"
                ? try DeadLetterCommands.purge(ctx, filter)
                : try DeadLetterCommands.requeue(ctx, filter, edit: edited.map { text in { _ in Array(text.utf8) } })
        }
        if api { return json([verb == "purge" ? "purged" : "requeued": done]) }
        var back = query
        back.id = nil
        let rest = back.queryString
        return .redirect("/dead?done=\(verb == "purge" ? "purged" : "requeued")&n=\(done)\(rest.isEmpty ? "" : "&" + rest)")
    }
}
