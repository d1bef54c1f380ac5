import APNSCore
import Foundation
import HTTP2

/// One client connection to the mock: gathers each request, decides, answers, logs.
final class MockConnection: HTTP2ConnectionDelegate {
    unowned let server: MockServer
    let id: Int
    /// The server loop this connection is served on.
    let loopIndex: Int
    /// Accepted on the channel-management listener, which serves `/1/apps/…` alone.
    let isManagement: Bool
    var connection: HTTP2Connection?
    private var requests = StreamTable<MockRequest>(capacity: 256)
    /// Requests of closed streams, kept for the next ones: a new one costs three allocations.
    private var spareRequests: [MockRequest] = []
    private var auth = MockValidator.ConnectionAuth()
    private var openStreams = 0
    private var streamLimit: Int
    /// Limits we sent and the client has not acknowledged yet, oldest first.
    private var pendingLimits: [Int]
    /// The limit the client has acknowledged; nil before its first SETTINGS ACK.
    private var ackedLimit: Int?
    private var raisedLimit = false
    private var goawayLastStream: Int32?
    /// After a drop fault nothing more is processed on this connection.
    private var dropped = false
    private var idGenerator = SplitMix64()
    /// Reused for every answer.
    private var headers = HeaderList()

    init(server: MockServer, id: Int, loopIndex: Int, streamLimit: Int, isManagement: Bool = false) {
        self.isManagement = isManagement
        self.server = server
        self.id = id
        self.loopIndex = loopIndex
        self.streamLimit = streamLimit
        pendingLimits = [streamLimit]
    }

    func http2SettingsAcknowledged() {
        if !pendingLimits.isEmpty { ackedLimit = pendingLimits.removeFirst() }
    }

    /// The limit the client must follow now (before any ACK, the one first advertised).
    private var enforcedLimit: Int { ackedLimit ?? streamLimit }

    func connectionReady(_ connection: HTTP2Connection) {
        if connection.resumedTLSSession { server.stats.withLock { $0.resumedHandshakes += 1 } }
        switch server.currentStorm {
        case .goaway?, .goawayClose?:
            connection.server.submitGoAway(lastStreamID: 0, errorCode: .noError, debugData: Array(#"{"reason":"Shutdown"}"#.utf8))
            goawayLastStream = 0
            server.stats.withLock {
                $0.goawaysSent += 1; $0.stormEvents += 1
            }
            if server.currentStorm == .goawayClose { connection.cut(graceMs: 20) }
        case .noSettings?:
            connection.writeRaw(RawFrame.ping(ack: false))
            server.stats.withLock { $0.stormEvents += 1 }
        case .pingFlood?:
            let ping = RawFrame.ping(ack: false)
            connection.server.submitMaxConcurrentStreams(streamLimit)  // SETTINGS first, as the protocol asks
            try? connection.flush()
            for _ in 0..<5000 { connection.writeRaw(ping) }
            server.stats.withLock { $0.stormEvents += 1 }
        default: break
        }
        auth.certificateUID = connection.peerSubjectUID
        if auth.certificateUID != nil { raiseLimit() }
    }

    func connectionClosed(_ connection: HTTP2Connection, error: Error?) {
        server.connectionClosed(self)
        self.connection = nil
    }

    func http2BeginStream(_ stream: Int32) {
        openStreams += 1
        if let spare = spareRequests.popLast() {
            spare.reuse(stream: stream)
            requests[stream] = spare
        } else {
            requests[stream] = MockRequest(stream: stream)
        }
        let (open, acked) = (openStreams, ackedLimit)
        server.stats.withLock {
            $0.maxConcurrentStreams = max($0.maxConcurrentStreams, open)
            if let acked, open > acked { $0.streamLimitViolations += 1 }
        }
    }

    func http2Header(stream: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        requests[stream]?.add(name: name, value: value)
    }

    func http2Data(stream: Int32, bytes: UnsafeBufferPointer<UInt8>) {
        requests[stream]?.appendBody(bytes)
    }

    func http2StreamClosed(_ stream: Int32, errorCode: HTTP2ErrorCode) {
        openStreams -= 1
        if let request = requests.removeValue(forKey: stream), spareRequests.count < 128 { spareRequests.append(request) }
    }

    func http2RemoteSettings(maxConcurrentStreams: Int) {}
    func http2PingReceived() { server.stats.withLock { $0.pingsReceived += 1 } }
    func http2GoAway(lastStreamID: Int32, errorCode: HTTP2ErrorCode, debugData: [UInt8]) {
        server.stats.withLock { $0.goawaysReceived[errorCode.rawValue, default: 0] += 1 }
    }

    func http2EndStream(_ stream: Int32) {
        guard let request = requests[stream], let connection else { return }
        if dropped {
            record(request, MockDecision(status: 0), answeredID: request.value("apns-id").map { APNSID($0) }, note: "dropped")
            return
        }
        if let storm = server.currentStorm, misbehave(storm, on: request, connection) { return }
        if !isManagement, id <= server.configuration.faults.refuseFirstConnections {
            connection.server.resetStream(stream, errorCode: .refusedStream)
            server.stats.withLock { $0.refusedStreams += 1 }
            record(request, MockDecision(status: 0), answeredID: nil, note: "refused")
            return
        }
        if let last = goawayLastStream, stream > last {
            // Beyond our GOAWAY: never processed, so the client may safely send it again.
            connection.server.resetStream(stream, errorCode: .refusedStream)
            return
        }
        let seen = server.requestsSeen.add(1, ordering: .relaxed).newValue
        let faults = server.configuration.faults
        if faults.dropAfter > 0, seen % faults.dropAfter == 0 {
            record(request, MockDecision(status: 0), answeredID: request.value("apns-id").map { APNSID($0) }, note: "dropped")
            server.stats.withLock { $0.drops += 1 }
            // Like a connection lost mid-flight: answers already given arrive, this one never does.
            dropped = true
            connection.cut(graceMs: 200)
            return
        }
        var decision =
            if let fcm = server.fcm {
                fcm.decide(request)
            } else if isManagement {
                server.validator.decideManagement(request, auth: &auth, channels: server.channels)
            } else if request.pathStarts(with: "/4/broadcasts/apps/") {
                server.validator.decideBroadcast(request, path: request.value(":path")!, auth: &auth, channels: server.channels)
            } else {
                server.validator.decide(request, auth: &auth)
            }
        if decision.status == 200, !faults.tokens.isEmpty, let token = request.pathToken ?? decision.fcmToken, let fault = server.fault(for: token) {
            decision.delayMs = fault.delayMs ?? 0
            if let status = fault.status, server.fcm != nil {
                decision = MockFCM.fault(status: status, reason: fault.reason, body: fault.body, delayMs: decision.delayMs, token: token)
            } else if let status = fault.status {
                decision.status = status
                decision.reason = APNSReason(fault.reasonPerToken == true ? "Odd" + token : fault.reason ?? Self.defaultReason(status))
                decision.rawBody = fault.body.map { Array($0.utf8) }
                if status == 410 { decision.timestamp = Int64(Date().timeIntervalSince1970 * 1000) }
            }
        }
        let apnsID =
            request.value(decision.idHeader == .apnsID ? "apns-id" : "apns-request-id").flatMap {
                UUIDText.isValid($0) ? APNSID($0.lowercased()) : nil
            } ?? UUIDText.randomID(using: &idGenerator)
        record(request, decision, answeredID: apnsID, note: nil)
        if decision.delayMs > 0 {
            connection.loop.schedule(afterMilliseconds: decision.delayMs) { [weak self] in
                guard let self, let connection = self.connection else { return }
                self.respond(stream, decision, apnsID: apnsID)
                connection.flushOrClose()
            }
        } else {
            respond(stream, decision, apnsID: apnsID)
        }
        if (200..<300).contains(decision.status) {
            raiseLimit()
        } else if decision.status < 500, decision.status != 410, server.configuration.throttleAfterRejection, server.fcm == nil {
            throttle()
        }
        if faults.goawayAfter > 0, seen % faults.goawayAfter == 0, goawayLastStream == nil {
            goawayLastStream = stream
            connection.server.submitGoAway(lastStreamID: stream, errorCode: .noError, debugData: Array(#"{"reason":"Shutdown"}"#.utf8))
            server.stats.withLock { $0.goawaysSent += 1 }
        }
    }

    /// What a storm does to a request: true when it was not answered.
    private func misbehave(_ storm: MockConfiguration.Storm.Kind, on request: MockRequest, _ connection: HTTP2Connection) -> Bool {
        switch storm {
        case .refuse: connection.server.resetStream(request.stream, errorCode: .refusedStream)
        case .timeout, .noSettings, .pingFlood: break  // a hostile server processes nothing
        case .closeNotify: connection.loop.schedule(afterMilliseconds: 0) { connection.shutdown(error: nil) }
        case .pushPromise:
            connection.writeRaw(RawFrame.pushPromise(stream: request.stream, promised: request.stream + 1))
            connection.flushOrClose()
        case .goaway, .goawayClose: return false
        }
        server.stats.withLock { $0.stormEvents += 1 }
        record(request, MockDecision(status: 0), answeredID: nil, note: storm.rawValue)
        return true
    }

    /// After an accepted request, a connection gets the configured stream limit back.
    private func raiseLimit() {
        guard !raisedLimit, let connection else { return }
        raisedLimit = true
        streamLimit = server.configuration.maxConcurrentStreams
        pendingLimits.append(streamLimit)
        connection.server.submitMaxConcurrentStreams(streamLimit)
        server.stats.withLock { $0.settingsChanges += 1 }
    }

    /// A rejection (410 aside) drops the limit to one stream until the next success, as APNs does.
    private func throttle() {
        guard raisedLimit, let connection else { return }
        raisedLimit = false
        streamLimit = 1
        pendingLimits.append(1)
        connection.server.submitMaxConcurrentStreams(1)
        server.stats.withLock { $0.settingsChanges += 1 }
    }

    private func respond(_ stream: Int32, _ decision: MockDecision, apnsID: APNSID) {
        guard let connection else { return }
        headers.clear()
        headers.add(":status", decision.status == 200 ? "200" : String(decision.status))
        // A fresh value per answer: indexing it would only churn both sides' HPACK tables.
        switch decision.idHeader {
        case .apnsID: apnsID.withBytes { headers.add("apns-id", "", utf8: $0, sensitive: true) }
        case .requestID: apnsID.withBytes { headers.add("apns-request-id", "", utf8: $0, sensitive: true) }
        case .none: break
        }
        if let seconds = decision.retryAfterSeconds { headers.add("retry-after", String(seconds)) }
        if let channel = decision.channelID { headers.add("apns-channel-id", channel, sensitive: true) }
        if server.configuration.isDevelopment {
            UUIDText.randomID(using: &idGenerator).withBytes { headers.add("apns-unique-id", "", utf8: $0, sensitive: true) }
        }
        if let raw = decision.rawBody {
            if !raw.isEmpty { headers.add("content-type", decision.rawIsJSON ? "application/json; charset=UTF-8" : "text/html") }
            connection.server.submitResponse(stream: stream, headers, body: raw.isEmpty ? nil : raw)
            return
        }
        guard let reason = decision.reason else {
            if decision.body != nil { headers.add("content-type", "application/json") }
            connection.server.submitResponse(stream: stream, headers, body: decision.body)
            return
        }
        headers.add("content-type", "application/json")
        var body = JSONWriter(capacity: 64)
        body.beginObject()
        body.field("reason", reason.rawValue)
        body.fieldIfPresent("timestamp", decision.timestamp)
        body.endObject()
        connection.server.submitResponse(stream: stream, headers, body: body.bytes)
    }

    static func defaultReason(_ status: Int) -> String {
        switch status {
        case 410: return APNSReason.unregistered.rawValue
        case 429: return APNSReason.tooManyRequests.rawValue
        case 500: return APNSReason.internalServerError.rawValue
        case 503: return APNSReason.serviceUnavailable.rawValue
        case 403: return APNSReason.invalidProviderToken.rawValue
        default: return "BadRequest"
        }
    }

    /// One JSON line per request: what arrived (headers, payload) and what the mock answered.
    private func record(_ request: MockRequest, _ decision: MockDecision, answeredID: APNSID?, note: String?) {
        let (open, limit, thread) = (openStreams, enforcedLimit, loopIndex)
        server.stats.withLock {
            $0.requests += 1
            $0.requestsPerThread[thread] += 1
            $0.byStatus[decision.status, default: 0] += 1
            if let reason = decision.reason { $0.byReason[reason.rawValue, default: 0] += 1 }
        }
        guard server.log.isEnabled else { return }
        if let prefix = server.configuration.logTokenPrefix, (request.pathToken ?? decision.fcmToken)?.hasPrefix(prefix) != true { return }
        let body = request.body
        var w = JSONWriter(capacity: 512 + body.count)
        w.beginObject()
        w.field("time_ms", Int64(Date().timeIntervalSince1970 * 1000))
        w.field("conn", id)
        w.field("stream", Int(request.stream))
        w.fieldIfPresent("token", request.pathToken ?? decision.fcmToken)
        w.fieldIfPresent("name", decision.messageName)
        if !request.pathStarts(with: "/3/device/") { w.fieldIfPresent("path", request.value(":path")) }
        w.field("status", decision.status)
        w.fieldIfPresent("reason", decision.reason?.rawValue)
        w.fieldIfPresent("apns_id", decision.idHeader == .none ? nil : answeredID?.description)
        w.fieldIfPresent("note", note ?? decision.fcmNote)
        w.fieldIfPresent("key_id", decision.keyID)
        w.field("concurrent", open)
        w.field("stream_limit", limit)
        w.key("headers")
        w.beginObject()
        for h in request.headers {
            // The JWT is a secret: log only that one was sent.
            w.field(h.name, h.name == "authorization" ? "bearer <redacted>" : h.value)
        }
        w.endObject()
        guard !decision.hideBody else {
            w.field("payload_bytes", body.count)
            w.endObject()
            server.log.append(w.bytes)
            return
        }
        let isJSON = request.withBody { (try? JSONScanner.validateObject($0)) != nil }
        if isJSON { w.key("payload"); w.raw(body) } else { w.key("payload_text"); w.stringBytes(body) }
        w.field("payload_bytes", body.count)
        w.endObject()
        server.log.append(w.bytes)
    }
}
