import APNSCore
import Delivery
import HTTP2
import IOLoop
import Telemetry

/// Why a send came back without an answer.
enum UnansweredEvent: Equatable {
    /// Beyond the last stream of a GOAWAY, or on a connection that closed.
    case cutByGoAway, connectionLost
    /// RST_STREAM REFUSED_STREAM on a connection still open.
    case refused
    /// No answer within `request_timeout_ms`: we cancelled it.
    case timedOut
    /// RST_STREAM with another code.
    case reset(HTTP2ErrorCode)

    /// Why sending it again may deliver it twice; nil when APNs says it did not process it
    /// (beyond a GOAWAY's last stream, REFUSED_STREAM).
    var mayDuplicate: String? {
        switch self {
        case .cutByGoAway, .refused: nil
        case .connectionLost: "connection_lost"
        case .timedOut: "timed_out"
        case .reset: "stream_reset"
        }
    }
}

/// What the connections report, and what becomes of each send: delivered, decided, sent
/// again (on another connection or after a delay), or put back in the schedule while its pool
/// is paused. Loop thread.
extension APNSSender {
    // MARK: Connections

    /// `c` could not connect (its endpoint's name did not resolve, or no address took a connect).
    func connectFailed(_ c: APNSConnection, error: Error) {
        guard let s = slot(of: c) else { return }
        let p = c.poolIndex
        if pools[p].trouble.note(.connectFailed, nowMs: MonotonicClock.nowMilliseconds()) {
            logger.warning("cannot connect to APNs", ["apps": .string(pools[p].name), "error": .string("\(error)")])
        }
        pools[p].slots[s] = nil
        openRest(pool: p)
        replaceConnection(pool: p, slot: s, delivered: false)
    }

    func pingTimedOut(_ c: APNSConnection) {
        logger.warning("APNs connection did not answer a PING; replacing it", ["apps": .string(pools[c.poolIndex].name)])
    }

    /// Gauges and readiness follow connections at once, not at the next timer scan.
    func connectionBecameReady(_ c: APNSConnection) { publishGauges() }

    /// The server's first SETTINGS arrived on `c`.
    func connectionSettled(_ c: APNSConnection) { openRest(pool: c.poolIndex) }

    /// The first delivery on `c`: the way to APNs works again, so the pool's empty slots fill now.
    func connectionDelivered(_ c: APNSConnection) {
        let p = c.poolIndex
        guard pools[p].reconnect.failures > 0 else { return }
        pools[p].reconnect.reset()
        for s in pools[p].slots.indices where pools[p].slots[s] == nil { openConnection(pool: p, slot: s) }
    }

    /// `byServer`: APNs sent GOAWAY; otherwise the connection retired itself (`APNSConnection.retire`).
    func connectionDraining(_ c: APNSConnection, reason: String, byServer: Bool) {
        let p = c.poolIndex
        if byServer {
            metrics.record { $0.add("apns_goaways_total", .init(("pool", pools[p].name))) }
            if pools[p].trouble.note(.goAway, nowMs: MonotonicClock.nowMilliseconds()) {
                logger.info("APNs sent GOAWAY; replacing the connection", ["apps": .string(pools[p].name), "reason": .string(reason)])
            }
        } else {
            logger.info("replacing a connection", ["apps": .string(pools[p].name), "reason": .string(reason)])
        }
        guard let s = slot(of: c) else { return }
        draining[ObjectIdentifier(c)] = c
        pools[p].slots[s] = nil
        replaceConnection(pool: p, slot: s, delivered: c.hasDelivered)
    }

    func connectionClosed(_ c: APNSConnection, error: Error?, unanswered lost: [SendRequest]) {
        let p = c.poolIndex
        openRest(pool: p)
        for r in lost.reversed() { unanswered(r, on: nil, .connectionLost) }
        if draining.removeValue(forKey: ObjectIdentifier(c)) != nil { return }
        guard let s = slot(of: c) else { return }
        pools[p].slots[s] = nil
        publishGauges()
        guard !stopping else { return }
        metrics.record { $0.add("apns_reconnects_total", .init(("pool", pools[p].name))) }
        if pools[p].trouble.note(.closed, nowMs: MonotonicClock.nowMilliseconds()) {
            logger.warning(
                "APNs connection closed", ["apps": .string(pools[p].name), "error": .string(error.map { "\($0)" } ?? "closed by the server")])
        }
        replaceConnection(pool: p, slot: s, delivered: c.hasDelivered)
    }

    // MARK: Sends

    /// A send that APNs did not answer goes again and costs no attempt, however often (DESIGN.md
    /// §4): at once when its connection is gone, else after a growing delay, never at once on
    /// the connection that refused it. Only a stream reset alone, again and again, is the job's.
    func unanswered(_ r: SendRequest, on c: APNSConnection?, _ event: UnansweredEvent) {
        let p = poolOf[r.app]
        let now = MonotonicClock.nowMilliseconds()
        var answer = RejectionPolicy.Answer.unanswered
        var first = false
        switch event {
        case .refused: first = pools[p].trouble.note(.refused, nowMs: now)
        case .timedOut:
            first = pools[p].trouble.note(.timedOut, nowMs: now)
            // Its connection answered other streams or its PINGs while it waited: the job's own.
            if let c, c.lastReadMs > r.answer.sentAtNs / 1_000_000 {
                r.timeoutsAlone += 1
                answer = .timedOutAlone(times: r.timeoutsAlone)
            }
        case .reset(let code):
            first = pools[p].trouble.note(.reset, nowMs: now)
            if let c, c.lastAnswerMs + 5000 > now {
                r.resetsAlone += 1
                answer = .resetAlone(code: code.description, times: r.resetsAlone)
            }
        case .cutByGoAway, .connectionLost: break
        }
        // The first of a row is logged here; the rest go into the pool's trouble summary.
        if first {
            var fields = jobFields(r)
            fields["event"] = .string("\(event)")
            logger.warning("APNs did not answer a notification; sending it again", fields)
        }
        if pools[p].breaker.isOpen { pools[p].breaker.failed(.transport, nowMs: now, sentAtMs: r.answer.sentAtNs / 1_000_000) }
        if case .finish(let verdict) = decide(answer, for: r) {
            var fields = jobFields(r)
            let rejection = event == .timedOut ? RejectionPolicy.timedOut : RejectionPolicy.streamReset
            fields[event == .timedOut ? "timeouts" : "resets"] = .int(event == .timedOut ? r.timeoutsAlone : r.resetsAlone)
            logger.warning("APNs kept failing one notification while it answered others; dead-lettered as \(rejection.reason.rawValue)", fields)
            decided(r, outcome: .rejected(rejection, verdict))
            return
        }
        r.unansweredSends += 1
        if let cause = event.mayDuplicate, !stopping { metrics.mayDuplicate(1, cause: cause) }
        let gone = c == nil || event == .cutByGoAway
        requeue(r, afterMs: TransportWaits.resendMs(afterUnanswered: r.unansweredSends, connectionGone: gone, using: &rng))
    }

    /// Puts `r` back at the front of its pool's queue, now or after `afterMs`; a job whose
    /// expiration passed while it waited is given up instead.
    func requeue(_ r: SendRequest, afterMs: Int = 0) {
        let now = WallClock.nowMilliseconds()
        if let expiration = r.job.expiration, expiration > 0, expiration * 1000 <= now {
            logger.warning("a notification's expiration passed while it waited to be sent again; dead-lettered as Expired", jobFields(r))
            decided(r, outcome: .rejected(Self.expired, .deadLetter(detail: "its expiration (\(expiration)) passed before \(provider(r)) took it")))
            return
        }
        if let maxAge = settings.maxAgeMs, r.ticket.sinceMs + Int64(maxAge) <= now {
            logger.warning("a notification grew older than max_age_s while it waited to be sent again; dead-lettered as Expired", jobFields(r))
            decided(
                r,
                outcome: .rejected(
                    Self.expired, .deadLetter(detail: "\(provider(r)) had not taken it \(maxAge / 1000) s (max_age_s) after a worker first took it")))
            return
        }
        let p = poolOf[r.app]
        guard afterMs > 0 else { return pending[p].pushFront(r) }
        pools[p].waitingResends += 1
        loop.schedule(afterMilliseconds: afterMs) { [self] in
            pools[p].waitingResends -= 1
            if r.ticket.batch.takenBack { return sink.dropped(1) }
            if heldLanes.contains(r.ticket.batch.lane) { return parked.append(r) }
            if !stopping { pending[p].pushFront(r) }
        }
    }

    static let expired = Rejection(status: 0, reason: APNSReason("Expired"), apnsID: nil, timestamp: nil)

    /// A paused pool keeps `heldWhilePaused` sends (the probe among them); the rest wait in the
    /// schedule until about when the pause ends, so that they hold up no other pool's jobs.
    func deferExcess(pool p: Int, now: UInt64) {
        // A retired pool keeps none: its jobs go out again through the pools that replaced it.
        let excess = pending[p].count - (pools[p].retired ? 0 : settings.heldWhilePaused)
        guard excess > 0 else { return }
        let pauseLeftMs = pools[p].breaker.remainingPauseMs(nowMs: now), retired = pools[p].retired
        for _ in 0..<excess {
            guard let r = pending[p].popFirst() else { break }
            decided(r, outcome: .deferred(afterMs: TransportWaits.deferralMs(pauseLeftMs: pauseLeftMs, retired: retired, using: &rng)))
        }
        logger.info("the app is paused; sends beyond what it holds wait in the schedule", ["apps": .string(pools[p].name), "deferred": .int(excess)])
    }

    private func decide(_ answer: RejectionPolicy.Answer, for r: SendRequest) -> RejectionPolicy.Action {
        settings.rejections.decide(answer, attempts: r.ticket.attempts.count, jobMaxAttempts: r.job.maxAttempts, using: &rng)
    }

    /// APNs answered `r` with a verdict; `r` is consumed: its reference goes on with the outcome.
    func finished(_ r: consuming SendRequest, outcome: Outcome) {
        let app = r.app
        pools[poolOf[app]].breaker.succeeded()
        if case .delivered = outcome { deliveredApps[app] = true }
        decided(r, outcome: outcome)
    }

    /// `r` is decided, by APNs or by us: its outcome goes to Redis.
    func decided(_ r: consuming SendRequest, outcome: Outcome) {
        let app = r.app
        sink.add(r.decide(outcome, appName: apps[app].name))
        decidedThisTurn += 1
    }

    func rejected(_ r: SendRequest, rejection: Rejection, on c: APNSConnection, jwtGeneration: Int) {
        let p = poolOf[r.app]
        pools[p].lastProgressMs = MonotonicClock.nowMilliseconds()
        var fields = jobFields(r)
        fields["status"] = .int(rejection.status)
        fields["reason"] = .string(rejection.reason.rawValue)
        fields["apns_id"] = .string(rejection.apnsID ?? "")
        fields["apns_timestamp"] = .int(Int(rejection.timestamp ?? 0))
        rejectionLog.note(
            "APNs rejected a notification", fields, key: "\(apps[r.app].name)/\(rejection.status)/\(rejection.reason.rawValue)", logger: logger)
        switch decide(.rejected(rejection), for: r) {
        case .refreshTokenAndResend where apps[r.app].isFCM:
            refreshFCMToken(after: r, rejection: rejection, generation: jwtGeneration)
        case .refreshTokenAndResend:
            // The connection is wedged after this error: new JWT, new connection, same job.
            if (try? apps[r.app].jwt?.refreshAfterExpiry(of: jwtGeneration)) == true {
                metrics.record { $0.add("apns_jwt_mints_total", .init(("app", apps[r.app].name))) }
            }
            c.http?.shutdown(error: nil)
            requeue(withoutLastAttempt(r))
        case .reconnectAndResend:
            c.http?.shutdown(error: nil)
            requeue(withoutLastAttempt(r))
        case .resend:
            requeue(withoutLastAttempt(r))
        case .pauseCredential(let closeConnection):
            // The credential, not the job, is at fault: the app waits (with probes) and the
            // job costs no attempt. One outage is one pause: answers to requests sent before it
            // change nothing. TooManyProviderTokenUpdates also retires the connection.
            pauseCredential(of: r, reason: rejection.reason.rawValue)
            if closeConnection { c.http?.shutdown(error: nil) }
            requeue(withoutLastAttempt(r))
        case .finish(let verdict):
            finished(r, outcome: .rejected(rejection, verdict))
        }
    }
}

/// Forgets the request's last answer: a try that was not the job's fault.
func withoutLastAttempt(_ r: SendRequest) -> SendRequest {
    if !r.ticket.attempts.isEmpty { r.ticket.attempts.removeLast() }
    return r
}

extension APNSSender {
    /// What every log line about one notification carries.
    func jobFields(_ r: SendRequest) -> [String: LogValue] {
        let target: (String, String) = r.job.channel.map { ("channel", $0) } ?? ("token", rejectionLog.show(r.token))
        return ["app": .string(apps[r.app].name), target.0: .string(target.1), "job_id": .string(r.job.id ?? "")]
    }
}
