import APNSCore
import Buffers
import Delivery
import Glibc
import HTTP2
import IOLoop
import PointerTricks

/// One HTTP/2 connection to APNs for one app, owned by one `APNSSender`, on its loop's thread.
final class APNSConnection: HTTP2ConnectionDelegate {
    /// The pool's credential and endpoint (the first app of the pool).
    let app: AppRuntime
    let poolIndex: Int
    /// Uncounted: the sender owns its connections (and drops them before it ends). A checked
    /// unowned reference counted once per answer, and so did an unowned(unsafe) one when called.
    private let owner: UncountedReference<APNSSender>
    private func withOwner<R>(_ body: (APNSSender) -> R) -> R { owner.withObject(body) }
    private(set) var http: HTTP2Connection?
    var budget: StreamBudget
    /// Open streams; each request carries its answer as it arrives.
    var streams: OpenRequests
    var headers = HeaderList()
    /// The header values the last requests shared, kept in `headers`.
    private var shared: APNSRequestHeaders.Shared<HeaderList.Kept>?
    /// An FCM app's: the header values its requests share.
    var fcmShared: FCMRequestHeaders?
    var jwtGeneration = 0
    private(set) var isReady = false
    private(set) var isClosed = false
    /// The server's first SETTINGS have arrived.
    private var settled = false
    /// Monotonic ms of the last frame received, and of an unanswered PING.
    private(set) var lastReadMs = MonotonicClock.nowMilliseconds()
    private var pingSentMs: UInt64?
    /// Monotonic ms of the last answer with a status, to tell a stream reset alone from trouble
    /// with the whole connection.
    private(set) var lastAnswerMs: UInt64 = 0
    /// A request on this connection was delivered: the way to APNs works (the pool's reconnect
    /// backoff ends only then, not when TLS is up).
    private(set) var hasDelivered = false

    /// Streams refused or reset with no answer between them: one that refuses everything goes.
    private var refusals = RefusalWatch()

    /// The per-connection rate cap, if one is set.
    var rate: TokenBucket?

    init(app: AppRuntime, poolIndex: Int, owner: APNSSender, streams: Int, rate: TokenBucket? = nil) {
        self.rate = rate
        self.app = app
        self.poolIndex = poolIndex
        self.owner = UncountedReference(owner)
        budget = StreamBudget(localLimit: streams, needsFirstSuccess: app.credential != nil)
        self.streams = OpenRequests(capacity: streams)
    }

    /// Looks the endpoint up (off the loop for a name), then connects, giving each address
    /// `timeoutMs` for the connect and the TLS handshake; a failure on the way goes to the owner
    /// (`connectFailed`), during this call or later.
    func connect(loop: EventLoop, resolver: HostResolver, timeoutMs: Int) {
        let e = app.configuration.endpoint
        resolver.resolve(e.host, port: e.port, on: loop) { [weak self] result in
            guard let self, !isClosed else { return }
            do {
                http = try HTTP2Connection(
                    connectingTo: result.get(), tls: app.tls, serverName: e.serverName, loop: loop,
                    delegate: self, timeoutMs: timeoutMs)
            } catch {
                isClosed = true
                withOwner { $0.connectFailed(self, error: error) }
            }
        }
    }

    /// Closes the connection, or stops one still looking its endpoint up from connecting.
    func close() {
        if let http { http.shutdown(error: nil) } else { isClosed = true }
    }

    var available: Int { isReady && !isClosed ? budget.available : 0 }
    /// Requests the rate cap lets go now (no cap: any number).
    func rateAllowance(nowMs: UInt64) -> Int { rate?.available(nowMs: nowMs) ?? .max }
    var msUntilRate: Int { rate?.msUntilNext ?? 0 }

    /// Requests whose streams are open here.
    var openRequests: Int { streams.count }
    var liveStreamLimit: Int { isReady && !isClosed ? budget.limit : 0 }
    var isDraining: Bool { budget.draining }

    /// Opens streams for up to `limit` requests from `queue` and returns how many it opened; a
    /// request the session refuses goes back to the front. The caller flushes once per batch. What
    /// every request shares (session, header buffer, credential) is taken once per batch: read
    /// per request from this object's properties, each cost a reference count.
    func send(from queue: inout PendingQueue, limit: Int, authorization: (token: String, generation: Int)?) -> Int {
        guard let http, let session = http.client, limit > 0 else { return 0 }
        if app.isFCM { return sendFCM(from: &queue, limit: limit, authorization: authorization, session: session, now: http.iterationNs) }
        let now = http.iterationNs
        let authority = app.configuration.endpoint.serverName, bearer = authorization?.token
        if let authorization { jwtGeneration = authorization.generation }
        var headers = HeaderList(unreserved: ()), shared = self.shared
        swap(&headers, &self.headers)
        defer { swap(&headers, &self.headers); self.shared = shared }
        return openStreams(from: &queue, limit: limit, session: session, now: now) { request in
            Self.submit(request, session, &headers, &shared, authority: authority, bearer: bearer)
        }
    }

    /// Opens a stream for each of up to `limit` requests that `submit` takes; a request the
    /// session refuses goes back to the front. Both providers' sends go through it.
    @inline(__always)
    func openStreams(from queue: inout PendingQueue, limit: Int, session: HTTP2ClientSession, now: UInt64, submit: (SendRequest) -> Int32?) -> Int {
        var opened = 0
        while opened < limit, let request = queue.popFirst() {
            guard let stream = submit(request) else {
                queue.pushFront(request)
                break
            }
            request.beginSend(atNs: now)
            streams.open(stream, request)
            budget.opened()
            opened += 1
        }
        if opened > 0 { rate?.take(opened) }
        if !session.canOpenStreams { retire(session, reason: "stream ids used up") }
        return opened
    }

    /// A connection whose stream ids ran out, or that refuses every stream, takes no more
    /// requests: it finishes those it has, says GOAWAY (NO_ERROR) and closes, and the pool opens
    /// another, as after a server's GOAWAY.
    func retire(_ session: HTTP2ClientSession, reason: String) {
        guard !budget.draining else { return }
        session.goAway()
        budget.goAway()
        withOwner { $0.connectionDraining(self, reason: reason, byServer: false) }
    }

    /// One request's HEADERS and body, nil if the session refuses it. The request is borrowed here,
    /// so its job and token are read without a reference count each.
    private static func submit(
        _ request: SendRequest, _ session: HTTP2ClientSession, _ headers: inout HeaderList,
        _ shared: inout APNSRequestHeaders.Shared<HeaderList.Kept>?, authority: String, bearer: String?
    ) -> Int32? {
        let job = request.job
        headers.clear()
        if job.isBroadcast {
            headers.clearAll()
            shared = nil
            APNSRequestHeaders.writeBroadcast(job: job, bundle: request.topic, authority: authority, bearer: bearer, into: &headers)
            return job.withPayload { try? session.submitRequest(headers, body: $0) }
        }
        if shared?.fits(authority: authority, bearer: bearer, pushType: job.pushType, topic: request.topic, priority: job.effectivePriority) != true {
            headers.clearAll()
            shared = APNSRequestHeaders.share(
                authority: authority, bearer: bearer, pushType: job.pushType, topic: request.topic,
                priority: job.effectivePriority, into: &headers)
        }
        APNSRequestHeaders.write(job: job, token: request.token, shared: shared!, into: &headers)
        return job.withPayload { try? session.submitRequest(headers, body: $0) }
    }

    func flush() { http?.flushOrClose() }

    /// Cancels streams older than `timeoutMs`; their jobs are sent again elsewhere.
    func expireRequests(olderThan timeoutMs: UInt64, now: UInt64) {
        var cancelled = false
        for (id, s) in streams.entries where !s.answer.answered && now - s.answer.sentAtNs / 1_000_000 > timeoutMs {
            http?.client.resetStream(id, errorCode: .cancel)
            cancelled = true
        }
        if cancelled { flush() }
    }

    /// PINGs an idle connection, and replaces one whose PING went unanswered: idle
    /// connections die silently in the network path (apns-protocol.md §9).
    func checkLiveness(now: UInt64, pingAfterMs: UInt64, timeoutMs: UInt64) {
        guard isReady, !isClosed, let http else { return }
        if let sent = pingSentMs {
            if now - sent > timeoutMs {
                withOwner { $0.pingTimedOut(self) }
                http.shutdown(error: nil)
            }
        } else if now - lastReadMs >= pingAfterMs {
            pingSentMs = now
            http.client.submitPing()
            flush()
        }
    }

    // MARK: HTTP2ConnectionDelegate

    func connectionReady(_ connection: HTTP2Connection) {
        isReady = true
        withOwner { $0.connectionBecameReady(self) }
    }

    func connectionClosed(_ connection: HTTP2Connection, error: Error?) {
        isClosed = true
        isReady = false
        http = nil  // it holds this object through its session (the loop keeps it to the end of the turn)
        let unanswered = streams.closeAll().filter { !$0.answer.answered }
        withOwner { $0.connectionClosed(self, error: error, unanswered: unanswered) }
    }

    func http2Header(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let isStatus = name.equals(":status")
        // The only three read (a broadcast's answer has apns-request-id for apns-id); apns-unique-id
        // comes from the development environment alone.
        guard isStatus || name.equals("apns-id") || name.equals("apns-request-id") else {
            if name.equals("retry-after") {
                let ms = Rejection.retryAfterMs(String(decoding: value, as: UTF8.self)) ?? 0
                streams[stream]?.withObject { s in s.answer.retryAfterMs = ms }
            }
            if name.equals("apns-unique-id") { streams[stream]?.withObject { s in s.answer.uniqueID = APNSID(value) } }
            return
        }
        streams[stream]?.withObject { s in
            if isStatus { s.answer.status = Self.parseStatus(value) } else { s.answer.id = APNSID(value) }
        }
    }

    func http2Data(stream: Int32, bytes: UnsafeBufferPointer<UInt8>) {
        streams[stream]?.withObject { s in
            if s.answer.body.count < 4096 { s.answer.body.append(contentsOf: bytes) }
        }
    }

    func http2EndStream(_ stream: Int32) {
        // The loop's time read through the connection: a local reference to the loop counted one.
        guard let nowNs = http?.iterationNs else { return }
        lastReadMs = nowNs / 1_000_000
        guard let lent = streams[stream] else { return }
        let status = lent.withObject { s -> Int in
            guard s.answer.status != 0 else { return 0 }
            s.answer.answered = true
            s.answer.answeredAtNs = nowNs
            return s.answer.status
        }
        guard status != 0 else { return }
        lastAnswerMs = lastReadMs
        refusals.answered()
        if status == 200 {
            budget.succeeded()
            if !hasDelivered {
                hasDelivered = true
                withOwner { $0.connectionDelivered(self) }
            }
            // The table's reference goes on with the outcome, moved (`take`), never counted.
            var delivered = streams.handOver(stream)
            let fcm = app.isFCM
            withOwner { owner in
                let s = delivered.take()!
                let id = fcm ? FCMRequestHeaders.messageName(s.answer.body) : s.answer.id.isEmpty ? APNSID(s.job.apnsID ?? "") : s.answer.id
                owner.finished(s, outcome: .delivered(id: id))
            }
            return
        }
        // A reference of its own: handling a rejection may close this connection's streams.
        let s = lent.object
        let now = http?.iterationWallMs ?? WallClock.nowMilliseconds()
        let rejection =
            app.isFCM
            ? Rejection.parseFCM(status: s.answer.status, body: s.answer.body, retryAfterMs: s.answer.retryAfterMs == 0 ? nil : s.answer.retryAfterMs)
            : Rejection.parse(status: s.answer.status, body: s.answer.body, apnsID: s.answer.id.isEmpty ? nil : s.answer.id.description)
        s.ticket.attempts.append(.init(timeMs: now, status: s.answer.status, reason: rejection.reason.rawValue))
        withOwner { $0.rejected(s, rejection: rejection, on: self, jwtGeneration: jwtGeneration) }
    }

    /// The three-digit `:status` without going through String; 0 for anything else (the
    /// client session does not check a response's fields: `HTTP2ClientSession`).
    private static func parseStatus(_ value: UnsafeBufferPointer<UInt8>) -> Int {
        guard value.count == 3 else { return 0 }
        var n = 0
        for b in value {
            guard b >= 0x30, b <= 0x39 else { return 0 }
            n = n * 10 + Int(b - 0x30)
        }
        return n
    }

    func http2StreamClosed(_ stream: Int32, errorCode: HTTP2ErrorCode) {
        let (wasOpen, request) = streams.close(stream)
        guard wasOpen else { return }
        budget.closed()
        if let s = request, !s.answer.answered {
            // Refused, cut by GOAWAY, cancelled on timeout or reset: not processed, send again.
            let event: UnansweredEvent =
                switch errorCode {
                case .refusedStream: budget.draining ? .cutByGoAway : .refused
                case .cancel: .timedOut
                default: .reset(errorCode)
                }
            withOwner { $0.unanswered(s, on: self, event) }
            guard event != .timedOut, event != .cutByGoAway, let http else { return }
            let now = http.iterationNs / 1_000_000
            if refusals.refused(atMs: now) {
                retire(http.client, reason: "every stream refused or reset for \(refusals.refusingMs(atMs: now)) ms, none answered")
                flush()
            }
        }
    }

    func http2RemoteSettings(maxConcurrentStreams: Int) {
        budget.settingsReceived(maxConcurrentStreams: maxConcurrentStreams)
        if !settled {
            settled = true
            withOwner { $0.connectionSettled(self) }
        }
    }

    func http2GoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) {
        budget.goAway()
        withOwner { $0.connectionDraining(self, reason: String(decoding: debugData.prefix(200), as: UTF8.self), byServer: true) }
    }

    func http2PingAck() {
        pingSentMs = nil
        lastReadMs = (http?.iterationNs ?? MonotonicClock.nowNanoseconds()) / 1_000_000
    }
}

extension HeaderList: HeaderSink {}
