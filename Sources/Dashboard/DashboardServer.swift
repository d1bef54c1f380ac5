import APNSAdmin
import APNSCore
import FoundationEssentials
import IOLoop
import RedisClient

/// `apnsctl web`: routes each request to a page, the JSON API, an action or a static file, and
/// adds the security headers to every answer.
public final class DashboardServer: Sendable {
    let data: DashboardData
    let access: Access
    let queue: String
    private let channelLister: (@Sendable (String) throws -> [String])?

    /// `secret`: what signs in (nil: nothing may change data). `openReads`: reading needs no sign-in.
    public init(
        data: DashboardData, queue: String, secret: String?, readOnly: Bool, openReads: Bool,
        channelLister: (@Sendable (String) throws -> [String])? = nil
    ) {
        self.data = data
        self.queue = queue
        self.channelLister = channelLister
        access = Access(secret: secret, readOnly: readOnly, openReads: openReads)
    }

    static let securityHeaders: [(name: String, value: String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"), ("Referrer-Policy", "same-origin"), ("Cache-Control", "no-store"),
    ]

    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        var response = braked(request) ?? route(request)
        response.headers += Self.securityHeaders
        // HEAD: the same head, no body (Content-Length still says the GET's).
        if request.method == "HEAD" { response.omitsBody = true }
        return response
    }

    /// A try with a secret (an Authorization header, the sign-in form) from an address that
    /// must wait is refused before the secret is checked; a wrong header secret is noted.
    private func braked(_ request: HTTPRequest) -> HTTPResponse? {
        let presents = request.header("authorization") != nil || (request.method == "POST" && request.path == "/login")
        guard presents else { return nil }
        let now = WallClock.nowMilliseconds()
        if let (wait, locked) = access.brake.wait(request.peer, nowMs: now) {
            if locked { logLockout(request.peer) }
            var r = failure(
                429, "too many wrong secrets from \(request.peer): try again in \((wait + 999) / 1000) s", api: request.path.hasPrefix("/api/"))
            r.headers.append(("Retry-After", String((wait + 999) / 1000)))
            return r
        }
        guard request.header("authorization") != nil else { return nil }  // the form is checked in signIn
        if access.headerAuthenticated(request) {
            access.brake.succeeded(request.peer)
        } else if access.brake.failed(request.peer, nowMs: now) {
            logLockout(request.peer)
        }
        return nil
    }

    private func logLockout(_ peer: String) {
        FileStream.standardError.write(
            "apnsctl web: \(peer) gave \(SecretBrake.lockAfter) wrong or early secrets within \(SecretBrake.windowMs / 60_000) minutes: locked out for \(SecretBrake.lockMs / 60_000) minutes\n"
        )
    }

    private func route(_ request: HTTPRequest) -> HTTPResponse {
        let (method, path) = (request.method, request.path)
        if let file = StaticFiles.file(path) {
            return method == "GET" ? HTTPResponse(status: 200, type: file.type, body: Array(file.body.utf8)) : notAllowed("GET")
        }
        switch (method, path) {
        case ("GET", "/favicon.ico"): return HTTPResponse(status: 204, type: "image/x-icon", body: [])
        case ("GET", "/login"):
            return page(
                "Sign in", path, request, refresh: false,
                FeedPages.login(next: safeNext(request.query["next"]), failed: false, canSignIn: access.canSignIn))
        case ("POST", "/login"):
            let form = request.form
            guard let cookie = access.signIn(form["secret"] ?? "", peer: request.peer) else {
                var r = page(
                    "Sign in", path, request, refresh: false, FeedPages.login(next: safeNext(form["next"]), failed: true, canSignIn: access.canSignIn)
                )
                r.status = 401
                return r
            }
            return .redirect(safeNext(form["next"]), headers: [("Set-Cookie", cookie)])
        case ("POST", "/logout"):
            if let refused = access.refusal(request, csrf: request.form["csrf"]) { return failure(refused.0, refused.1, api: false) }
            return .redirect("/", headers: [("Set-Cookie", access.signOut(request))])
        default: break
        }
        let api = path.hasPrefix("/api/")
        guard access.mayRead(request) else {
            if api { return failure(401, "sign in first: give the dashboard's secret as a Bearer token or a basic-auth password", api: true) }
            return .redirect("/login?next=\(FormDecoding.encode(path))")
        }
        do {
            if method == "POST" { return try act(request, api: api) }
            guard method == "GET" || method == "HEAD" else { return notAllowed("GET, POST") }
            return try api ? read(api: request) : read(page: request)
        } catch let error as RedisError {
            return failure(502, "Redis does not answer: \(error)", api: api)
        } catch let error as AdminError {
            if case .redis = error { return failure(502, error.description, api: api) }
            return failure(error.exitCode == 1 ? 404 : 400, error.description, api: api)
        } catch {
            return failure(500, "\(error)", api: api)
        }
    }

    private func read(page request: HTTPRequest) throws -> HTTPResponse {
        let q = request.query
        let filled = request.parameter
        switch request.path {
        case "/": return page("Overview", "/", request, refresh: true, QueuePages.overview(try data.overview()))
        case "/workers": return page("Workers", "/workers", request, refresh: true, QueuePages.workers(try data.workers()))
        case "/apps": return page("Apps", "/apps", request, refresh: true, QueuePages.apps(try data.apps()))
        case "/dead":
            let query = DeadLetterQuery(q)
            let before = try cursor(request)
            let found = try data.deadLetters(try query.filter(), before: before, limit: try pageSize(request))
            let notice = q["done"].flatMap { done in
                q["n"].flatMap { Int($0) }.map { "\(done == "purged" ? "Purged" : "Requeued") \($0) dead letter(s)." }
            }
            return page(
                "Dead letters", "/dead", request, refresh: notice == nil,
                DeadLetterPages.list(found, query: query, before: before, viewer: access.viewer(request), notice: notice))
        case "/dead/show":
            guard let id = filled("id") else { return failure(400, "say which dead letter: /dead/show?id=ID", api: false) }
            return try show(id: id, request: request, edited: nil, error: nil)
        case "/dead/job":
            // The original job whole, as a file: the page shows a large one cut.
            guard let id = filled("id") else { return failure(400, "say which dead letter: /dead/job?id=ID", api: false) }
            guard let r = try data.deadLetter(id: id) else { return failure(404, "no dead letter \(id)", api: false) }
            let name = id.filter { $0.isLetter || $0.isNumber || $0 == "-" }
            return HTTPResponse(
                status: 200, type: "application/json", body: try DeadLetterCommands.originalJob(r),
                headers: [("Content-Disposition", "attachment; filename=\"dead-letter-\(name).json\"")])
        case "/tokens", "/tokens.csv":
            if request.path == "/tokens.csv" {
                // Every token the filters match, however many: read and written 10,000 at a time.
                var csv = Array(FeedPages.csvHeader.utf8)
                try data.feedAll(\.invalidTokens, app: filled("app"), reason: filled("reason")) { csv += FeedPages.csv($0).utf8 }
                return HTTPResponse(
                    status: 200, type: "text/csv; charset=utf-8", body: csv,
                    headers: [("Content-Disposition", "attachment; filename=\"invalid-tokens.csv\"")])
            }
            let before = try cursor(request)
            let (found, choices) = try data.feed(
                \.invalidTokens, app: filled("app"), reason: filled("reason"), before: before, limit: try pageSize(request))
            return page(
                "Invalid tokens", "/tokens", request, refresh: true,
                FeedPages.tokens(found, before: before, app: filled("app"), reason: filled("reason"), choices: choices))
        case "/channels":
            let before = try cursor(request)
            let (found, choices) = try data.feed(
                \.invalidChannels, app: filled("app"), reason: filled("reason"), before: before, limit: try pageSize(request))
            var listed: (app: String, ids: [String])?
            var listError: String?
            if let app = filled("list"), let channelLister {
                do { listed = (app, try channelLister(app)) } catch { listError = "\(error)" }
            }
            let body = FeedPages.channels(
                found, before: before, app: filled("app"), reason: filled("reason"), choices: choices,
                apps: channelLister == nil ? [] : data.configuredApps,
                listed: listed,
                listError: listError)
            return page("Channels", "/channels", request, refresh: filled("list") == nil, body)
        default: return failure(404, "no page \(request.path)", api: false)
        }
    }

    func show(id: String, request: HTTPRequest, edited: String?, error: String?) throws -> HTTPResponse {
        guard let r = try data.deadLetter(id: id) else {
            return failure(404, "no dead letter \(id): it may have been requeued or purged", api: false)
        }
        let job = String(decoding: try DeadLetterCommands.originalJob(r), as: UTF8.self)
        let body = DeadLetterPages.show(r, job: job, editing: edited ?? job, viewer: access.viewer(request), error: error)
        var response = page("Dead letter \(r.id)", "/dead", request, refresh: false, body)
        if error != nil { response.status = 422 }
        return response
    }

    func page(_ title: String, _ path: String, _ request: HTTPRequest, refresh: Bool, _ body: String) -> HTTPResponse {
        let html = HTML.page(
            title: title, path: path, here: request.method == "GET" ? request.target : nil, queue: queue, user: access.viewer(request),
            refresh: refresh, body: body)
        return HTTPResponse(status: 200, type: "text/html; charset=utf-8", body: request.method == "HEAD" ? [] : Array(html.utf8))
    }

    func json(_ value: Any, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, type: "application/json", body: Array((AdminContext.encode(value) + "\n").utf8))
    }

    func failure(_ status: Int, _ message: String, api: Bool) -> HTTPResponse {
        if api { return json(["error": message], status: status) }
        let html = HTML.page(
            title: "Error \(status)", path: "", queue: queue, user: Viewer(mode: .anonymous, csrf: nil), refresh: false,
            body: "<p class=\"notice bad\" id=\"error\">\(e(message))</p>")
        return HTTPResponse(status: status, type: "text/html; charset=utf-8", body: Array(html.utf8))
    }

    private func notAllowed(_ allowed: String) -> HTTPResponse {
        var r = HTTPResponse(status: 405, text: "method not allowed")
        r.headers.append(("Allow", allowed))
        return r
    }

    /// Where to go after signing in: a path of this site only, never another site.
    /// Where a sign-in goes on to: a page of this dashboard (with its query), never anything
    /// else (another host, a header of someone's own).
    private func safeNext(_ next: String?) -> String {
        guard let next, HTTPResponse.isSafe(next), !next.contains("\\") else { return "/" }
        let path = String(next.prefix { $0 != "?" && $0 != "#" })
        return Self.pages.contains(path) ? next : "/"
    }

    /// The pages a sign-in may go on to.
    static let pages: Set<String> = ["/", "/workers", "/apps", "/dead", "/dead/show", "/tokens", "/channels"]
}
