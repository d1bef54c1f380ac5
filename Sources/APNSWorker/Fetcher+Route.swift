import APNSCore
import Delivery
import IOLoop
import QueueContract

/// Routing a fetch's jobs: each parsed once, resolved to its app and topic, checked, and handed
/// to the transport as sends (a fan-out job as one per token) or to the completer as decided.
extension Fetcher {
    /// Parses each taken job once; the payload bytes are kept, never re-encoded.
    /// `claims`: a second pass, for the keyed jobs alone, with their claims' answers.
    func route(_ taken: TakenJobs, batch: TakenBatch, claims: [Int: IdempotencyClaim.Answer]? = nil) {
        let now = MonotonicClock.nowNanoseconds()
        let nowMs = WallClock.nowMilliseconds()
        var sends: [SendRequest?] = []  // optional for the send loop's queue to move them out (PendingQueue)
        sends.reserveCapacity(taken.count)
        var decided: [FinishedJob] = []
        var units = 0
        var keyed: [PendingClaim] = []  // jobs whose idempotency keys are claimed before they go
        let library = templates.library
        // Once a batch: the router's arrays, read from the fetcher per job, counted a reference each time.
        let router = router
        // Read in place; a job's slice of the buffer is made once, for the job to keep.
        taken.bytes.withUnsafeBufferPointer { all in
            for (index, range) in taken.ranges.enumerated() {
                if let claims, claims[index] == nil { continue }
                unfreed.freeOne()
                let handle = taken.first + Int64(index)
                var meta = JobEnvelope.Meta()
                var opened: ArraySlice<UInt8>?  // the job inside an envelope
                do throws(JobRejection) {
                    if JobEnvelope.isEnvelope(UnsafeBufferPointer(rebasing: all[range])) {
                        (meta, opened) = try JobEnvelope.open(taken.bytes[range])
                    }
                    let parsed = try Job.parse(opened ?? taken.bytes[range])
                    let (app, topic) = try router.resolve(parsed)
                    var claim: Int64 = 0
                    if let key = parsed.idempotencyKey {
                        let mine = meta.claim ?? handle
                        switch claims?[index] {
                        case nil:
                            keyed.append(PendingClaim(index: index, key: key, claim: mine))
                            continue
                        case .duplicate(let first)?:
                            units += 1
                            decided.append(
                                .unsent(
                                    handle: handle, batch: batch, index: index, raw: parsed.raw, job: parsed, appName: router.apps[app].name,
                                    topic: topic, outcome: .duplicate(of: first), attempts: meta.attempts, recoveries: meta.recoveries))
                            continue
                        case .ours?: claim = mine
                        }
                    }
                    let parked = !router.active[app]
                    let fcm = router.isFCM[app]
                    let job: Job
                    // An FCM message names its token: the first token's send is rendered (and the
                    // job checked) here, each other token's in `request`.
                    var firstSend: Job?
                    if fcm {
                        firstSend = try FCMMessage.render(parsed, token: parsed.token, templates: library, nowSeconds: nowMs / 1000)
                        job = parsed
                    } else {
                        job = try PayloadRenderer.render(consume parsed, templates: library, truncateByDefault: router.apps[app].truncateBody)
                    }
                    // max_age_s counts from the first take, or from the time it was to be sent.
                    let sinceMs = max(meta.since ?? nowMs, (job.sendAt ?? 0) * 1000)
                    if let maxAge = configuration.maxAgeSeconds, sinceMs + Int64(maxAge) * 1000 <= nowMs {
                        throw JobRejection("Expired", "a worker first took it more than max_age_s (\(maxAge) s) ago, and APNs has not taken it")
                    }
                    if let sendAt = job.sendAt, sendAt * 1000 > nowMs {
                        units += 1
                        decided.append(
                            .unsent(
                                handle: handle, batch: batch, index: index, raw: job.raw, job: job, appName: router.apps[app].name, topic: topic,
                                outcome: .scheduled(atMs: sendAt * 1000), attempts: meta.attempts,
                                recoveries: meta.recoveries, claim: claim))
                        continue
                    }
                    // The job is consumed by its last request: passed on, not counted once more.
                    // `first`: the send is to the job's own first token (its FCM body is rendered).
                    func request(_ job: consuming Job, _ token: DeviceToken, fanout: Int, first: Bool) -> SendRequest {
                        var sent = job
                        if let firstSend {
                            if first {
                                sent = firstSend
                            } else if let own = try? FCMMessage.render(sent, token: token, templates: library, nowSeconds: nowMs / 1000) {
                                sent = own
                            }
                        }
                        let ticket = QueueTicket(
                            handle: handle, batch: batch, index: index, takenAtNs: now, sinceMs: sinceMs, attempts: meta.attempts,
                            recoveries: meta.recoveries, fanout: fanout, claim: claim)
                        return SendRequest(ticket: ticket, job: sent, token: token, app: app, topic: topic)
                    }
                    // A removed app's sends wait in the schedule, each with its token, as a paused pool's do.
                    func emit(_ r: consuming SendRequest) {
                        guard parked else { return sends.append(r) }
                        var rng = SystemRandomNumberGenerator()
                        decided.append(r.decide(.deferred(afterMs: AppRouter.parkingMs(using: &rng)), appName: router.apps[app].name))
                    }
                    // A retried piece of a fan-out job carries its one token in its envelope.
                    switch FanOut.plan(job, retried: meta.token.flatMap(DeviceToken.init), done: meta.done) {
                    case .one(let token):
                        units += 1
                        emit(request(consume job, token, fanout: 1, first: meta.token == nil))
                    case .left(let left):
                        units += left.count
                        for token in left { emit(request(job, token, fanout: left.count, first: false)) }
                    case .every(let fanout):
                        units += fanout
                        emit(request(job, job.token, fanout: fanout, first: true))
                        for token in job.otherTokens { emit(request(job, token, fanout: fanout, first: false)) }
                    }
                } catch {
                    units += 1
                    // Its records name it as it names itself; it counts under its app only if that is configured.
                    let raw = opened ?? taken.bytes[range]
                    let names = JobNames(scanning: raw)
                    let counted = names.app.map { n in router.firstActive(named: n) != nil ? n : nil } ?? router.defaultApp
                    decided.append(
                        .unsent(
                            handle: handle, batch: batch, index: index, raw: raw, job: nil, appName: counted, topic: nil,
                            outcome: .deadLetter(error.bounded), attempts: meta.attempts, recoveries: meta.recoveries, names: names))
                }
            }
        }
        // A fan-out job records many sends: what one freed per job taken cannot keep up with goes now.
        if unfreed.count > 4 * configuration.batchSize { unfreed.freeAll() }
        if !keyed.isEmpty { sendClaims(Claiming(taken: taken, batch: batch, claims: keyed)) }
        gate.add(sent: units - decided.count, decided: decided.count)
        if !sends.isEmpty { deliver(sends) }
        if !decided.isEmpty {
            let dead = decided.filter { if case .deadLetter = $0.outcome { return true } else { return false } }
            if !dead.isEmpty {
                logger.info("dead-lettered jobs that cannot be sent", ["count": .int(dead.count), "first_reason": .string(Self.reason(dead[0]))])
            }
            completer.submit(decided)
        }
    }

    private static func reason(_ f: FinishedJob) -> String {
        if case .deadLetter(let why) = f.outcome { return why.description }
        return ""
    }
}
