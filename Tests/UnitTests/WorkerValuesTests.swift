@testable import APNSWorker
import APNSCore
import PointerTricks
import QueueContract
import Buffers
import Foundation
import Synchronization
import XCTest
import Configuration
@testable import APNSTransport

final class WorkerValuesTests: XCTestCase {
    func testStreamBudgetStartsAtOneUntilFirstSuccessThenFollowsSettings() {
        var b = StreamBudget(localLimit: 500, needsFirstSuccess: true)
        XCTAssertEqual(b.available, 1)
        b.settingsReceived(maxConcurrentStreams: 1000)
        XCTAssertEqual(b.available, 1)
        b.opened()
        XCTAssertEqual(b.available, 0)
        b.succeeded()
        XCTAssertEqual(b.available, 499)
        b.settingsReceived(maxConcurrentStreams: 1)
        XCTAssertEqual(b.available, 0, "never above the live server limit")
        b.closed()
        XCTAssertEqual(b.available, 1)
        b.settingsReceived(maxConcurrentStreams: 10)
        XCTAssertEqual(b.available, 10)
        b.goAway()
        XCTAssertEqual(b.available, 0)
        var cert = StreamBudget(localLimit: 5, needsFirstSuccess: false)
        cert.settingsReceived(maxConcurrentStreams: 100)
        XCTAssertEqual(cert.available, 5)
    }

    func testBackoffGrowsWithJitterUpToTheCap() {
        var b = Backoff(baseMs: 100, capMs: 1000)
        var g = SystemRandomNumberGenerator()
        let delays = (0..<8).map { _ in b.nextDelayMs(using: &g) }
        XCTAssertTrue((50...100).contains(delays[0]))
        XCTAssertTrue((100...200).contains(delays[1]))
        XCTAssertTrue((200...400).contains(delays[2]))
        XCTAssertTrue(delays[5...].allSatisfy { (500...1000).contains($0) })
        b.reset()
        XCTAssertTrue((50...100).contains(b.nextDelayMs(using: &g)))
    }

    func testPendingQueueIsFIFOWithFrontPushes() throws {
        let job = try Job.parse(Array(#"{"token":"\#(String(repeating: "ab", count: 32))","payload":{"a":1}}"#.utf8))
        let batch = TakenBatch(id: "b", number: 1, jobs: 5000)
        func r(_ h: Int64) -> SendRequest {
            SendRequest(handle: h, batch: batch, index: 0, job: job, token: job.tokens[0], app: 0, topic: "t", takenAtNs: 0, attempts: [], recoveries: 0, fanout: 1)
        }
        var q = PendingQueue()
        for i in 0..<5000 { q.append(r(Int64(i))) }
        XCTAssertEqual(q.popFirst()?.handle, 0)
        q.pushFront(r(-1))
        XCTAssertEqual(q.popFirst()?.handle, -1)
        for i in 1..<5000 { XCTAssertEqual(q.popFirst()?.handle, Int64(i)) }
        XCTAssertTrue(q.isEmpty)
        XCTAssertNil(q.popFirst())
    }

    func testConfigurationFileAndEnvironmentOverrides() throws {
        let path = NSTemporaryDirectory() + "cfg-\(getpid()).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try """
        {"redis":{"host":"10.0.0.1","port":7000,"password":"s3cret"},"queue":"q1","connections":3,"connect_timeout_ms":2500,
         "apps":[{"name":"a","bundle_id":"com.a","environment":"development",
                  "token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}]}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        let c = try WorkerConfiguration.load(path: path, environment: ["APNSW_REDIS_PORT": "7001", "APNSW_STREAMS": "50",
                                                                       "APNSW_APNS_HOST": "127.0.0.1", "APNSW_APNS_PORT": "8443"])
        XCTAssertEqual(c.redis.host, "10.0.0.1")
        XCTAssertEqual(c.redis.port, 7001)
        XCTAssertEqual(c.redis.password, "s3cret")
        XCTAssertFalse(c.redis.description.contains("s3cret"))
        XCTAssertEqual(c.queue, "q1")
        XCTAssertEqual(c.connections, 3)
        XCTAssertEqual(c.connectTimeoutMs, 2500)
        XCTAssertEqual(c.streams, 50)
        XCTAssertEqual(c.apps.first?.endpoint, APNSEndpoint(host: "127.0.0.1", port: 8443, caFile: nil))
        XCTAssertEqual(APNSEndpoint.development.host, "api.sandbox.push.apple.com")
        XCTAssertNil(c.redis.socket)
        let local = try WorkerConfiguration.load(path: path, environment: ["APNSW_REDIS_SOCKET": "/run/redis/redis.sock"])
        XCTAssertEqual(local.redis.socket, "/run/redis/redis.sock")
        XCTAssertEqual(local.redis.description, "redis+unix:///run/redis/redis.sock?db=0")
        XCTAssertFalse(local.redis.description.contains("s3cret"))
    }

    func testConfigurationErrorsAreClear() throws {
        let path = NSTemporaryDirectory() + "cfg-bad-\(getpid()).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try #"{"queue":"q","connections":true,"apps":[]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("connections must be a whole number"), "\(error)")
        }
        try #"{"queue":"q","connections":1,"max_recoveries":0}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("no apps"), "0 and 1 are numbers, not booleans: \(error)")
        }
        try #"{"queue":"q","connect_timeout_ms":0,"apps":[{"name":"a","bundle_id":"com.a","token":{"team_id":"T","key_id":"K","key_file":"/k.p8"}}]}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("connect_timeout_ms must be in 100...600000, got 0"), "\(error)")
        }
        try #"{"queue":"q","conections":3}"#.write(toFile: path, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try WorkerConfiguration.load(path: path, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("unknown setting \"conections\""), "\(error)")
        }
        XCTAssertThrowsError(try WorkerConfiguration.load(path: nil, environment: [:])) { error in
            XCTAssertTrue("\(error)".contains("no apps"), "\(error)")
        }
    }

    /// Records and envelopes are written into room sized beforehand: every field at its
    /// longest (each byte escaped as six, numbers of 20 characters) must still fit, and read
    /// back. The cursor checks each write against the room.
    func testRecordsWithEveryFieldAtItsLongestFitTheirRoom() throws {
        let worst = String(repeating: "\u{1}", count: 40)
        let longestToken = DeviceToken(String(repeating: "f", count: DeviceToken.lengthRange.upperBound))
        let ctx = OutcomeRecord.Context(handle: .min, jobID: worst, app: worst, token: longestToken, topic: worst, worker: worst, timeMs: .min)
        let r = APNSRejection(status: .min, reason: APNSReason(worst), apnsID: worst, timestamp: .min)
        let attempts = [OutcomeRecord.Attempt](repeating: .init(timeMs: .min, status: .min, reason: worst), count: 3)
        let records = [
            OutcomeRecord.result(ctx, delivered: APNSID(worst), rejection: r, attempts: .min),
            OutcomeRecord.invalidToken(ctx, rejection: r),
            OutcomeRecord.deadLetter(ctx, reason: worst, detail: worst, job: (Array(worst.utf8) + [0xFF])[...], attempts: attempts),
            OutcomeRecord.deadLetter(ctx, reason: worst, detail: worst, job: Array("[1]".utf8)[...], attempts: []),
            JobEnvelope.wrap(job: Array("{}".utf8)[...], meta: JobEnvelope.Meta(token: worst, attempts: attempts, recoveries: .min, nonce: worst)),
        ]
        for record in records {
            let object = try JSONSerialization.jsonObject(with: Data(record)) as? [String: Any]
            XCTAssertNotNil(object, String(decoding: record, as: UTF8.self))
        }
        XCTAssertEqual((try JSONSerialization.jsonObject(with: Data(records[0])) as? [String: Any])?["handle"] as? String, String(Int64.min))
        XCTAssertEqual(try JobEnvelope.open(records[4][...]).meta.attempts, attempts)
    }

    func testOutcomeRecordsAreJSONWithTheContractFields() throws {
        let ctx = OutcomeRecord.Context(handle: 7, jobID: "j", app: "a", token: DeviceToken("ABCDEF0123456789"), topic: "t", worker: "w", timeMs: 5)
        let ok = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: "id-1", rejection: nil, attempts: 1))) as! [String: Any]
        XCTAssertEqual(ok["status"] as? String, "ok")
        XCTAssertEqual(ok["token"] as? String, "abcdef0123456789")
        XCTAssertEqual(ok["apns_id"] as? String, "id-1")
        XCTAssertEqual(ok["v"] as? Int, 1)
        XCTAssertEqual(ok["handle"] as? String, "7", "a handle is a string of its digits")
        let r = APNSRejection(status: 410, reason: .unregistered, apnsID: "id-2", timestamp: 99)
        let failed = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: nil, rejection: r, attempts: 2))) as! [String: Any]
        XCTAssertEqual(failed["status"] as? String, "failed")
        XCTAssertEqual(failed["http_status"] as? Int, 410)
        XCTAssertEqual(failed["reason"] as? String, "Unregistered")
        XCTAssertEqual(failed["apns_timestamp"] as? Int, 99)
        XCTAssertEqual(failed["apns_id"] as? String, "id-2", "the id APNs gave with its rejection")
        var delivered = ByteBuffer(capacity: 16) // grows: the writer reserves its room first
        OutcomeRecord.delivered(ctx, apnsID: "id-1", attempts: 1, into: &delivered)
        XCTAssertEqual(Array(delivered.bytes()), OutcomeRecord.result(ctx, delivered: "id-1", rejection: nil, attempts: 1))
        let dead = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.deadLetter(ctx, reason: "X", detail: "d", job: Array("not json".utf8)[...],
                                                                                       attempts: [.init(timeMs: 1, status: 500, reason: "InternalServerError")]))) as! [String: Any]
        XCTAssertEqual(dead["job_text"] as? String, "not json")
        XCTAssertEqual((dead["attempts"] as? [[String: Any]])?.first?["status"] as? Int, 500)
    }

    /// A batch's records share one set of app, topic, worker and time fields per app and
    /// topic; a record written through them reads back with each of its own fields.
    func testRecordsShareTheirAppTopicWorkerAndTimeFields() throws {
        var cache = SharedFieldsCache(worker: "w-1", timeMs: 42)
        let a = cache.fields(app: "app", topic: "t.1"), b = cache.fields(app: "app", topic: "t.2")
        XCTAssertEqual(cache.fields(app: "app", topic: "t.1").baseAddress, a.baseAddress, "met again after another")
        XCTAssertEqual(cache.fields(app: "app", topic: "t.2").baseAddress, b.baseAddress)
        XCTAssertNotEqual(cache.fields(app: nil, topic: "t.2").baseAddress, b.baseAddress)
        let none = cache.fields(app: nil, topic: nil)
        let job = try Job.parse(Array(#"{"id":"j\"9","token":"00ff00ff00ff00ff","payload":{"aps":{}}}"#.utf8))
        for (shared, app, topic) in [(a, "app", "t.1"), (b, "app", "t.2"), (none, nil, nil)] as [(UnsafeBufferPointer<UInt8>, String?, String?)] {
            // Lent: `cache` and `job` outlive the context.
            let ctx = OutcomeRecord.Context(handle: 9, lending: UncountedReference(job), token: DeviceToken("00ff00ff00ff00ff"), shared: shared)
            let record = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: "id", rejection: nil, attempts: 1))) as! [String: Any]
            XCTAssertEqual(record["app"] as? String, app)
            XCTAssertEqual(record["topic"] as? String, topic)
            XCTAssertEqual(record["worker"] as? String, "w-1")
            XCTAssertEqual(record["time_ms"] as? Int, 42)
            XCTAssertEqual(record["job_id"] as? String, "j\"9")
            XCTAssertEqual(record["token"] as? String, "00ff00ff00ff00ff")
            XCTAssertEqual(record.count, app == nil ? 9 : 11, "\(record.keys.sorted())")
            withExtendedLifetime(job) {}
        }
        withExtendedLifetime(cache) {}
        let noToken = OutcomeRecord.Context(handle: 1, jobID: nil, token: nil, shared: OutcomeRecord.SharedFields(app: nil, topic: nil, worker: "w", timeMs: 1))
        let record = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(noToken, delivered: nil, rejection: nil, attempts: 0))) as! [String: Any]
        XCTAssertNil(record["token"], "an absent token is left out")
        XCTAssertNil(record["apns_id"], "no id, none written")
        XCTAssertTrue(DeviceToken.absent.isAbsent)
        XCTAssertFalse(DeviceToken("00ff00ff00ff00ff")!.isAbsent)
    }

    /// A completion groups its marks by batch; a batch goes once its last unfinished job is
    /// acked, and the oldest batch touched is the one whose list proves none was taken back.
    func testAcksAreGroupedByBatchAndABatchFinishesWithItsLastJob() {
        let older = TakenBatch(id: "x-3", number: 3, jobs: 3), newer = TakenBatch(id: "x-4", number: 4, jobs: 2)
        var groups = AckGroups()
        XCTAssertNil(groups.oldest)
        XCTAssertTrue(groups.note(newer, index: 0, piece: nil) == (0, nil))
        XCTAssertTrue(groups.note(older, index: 2, piece: nil) == (1, nil))
        XCTAssertTrue(groups.note(newer, index: 1, piece: "ab") == (0, "1:ab"), "a fan-out piece that is not the job's last acks nothing")
        XCTAssertTrue(groups.note(newer, index: 1, piece: nil) == (0, nil))
        XCTAssertEqual(groups.all.map(\.batch.id), ["x-4", "x-3"])
        XCTAssertEqual(groups.all.map(\.acks), [[0, 1], [2]])
        XCTAssertEqual(groups.all.map(\.pieces), [["1:ab"], []])
        XCTAssertEqual(groups.all.map(\.finishes), [true, false])
        XCTAssertTrue(groups.oldest === older)
        XCTAssertTrue(groups.finishing.count == 1 && groups.finishing[0] === newer)
        groups.commit()
        XCTAssertEqual([older.unfinished, newer.unfinished], [2, 0])
        var next = AckGroups()
        _ = next.note(older, index: 0, piece: nil)
        _ = next.note(older, index: 1, piece: nil)
        XCTAssertTrue(next.all[0].finishes, "the rest of the batch")
    }

    /// The oldest batch with unfinished jobs, not counting those a completion is finishing.
    func testTheOldestUnfinishedBatchSkipsFinishedOnes() {
        let ledger = UnfinishedBatches()
        let batches = (1...3).map { ledger.open(id: "b-\($0)", jobs: 1) }
        XCTAssertEqual(batches.map(\.number), [1, 2, 3], "numbered in the order opened")
        XCTAssertTrue(ledger.oldest(besides: []) === batches[0])
        XCTAssertTrue(ledger.oldest(besides: [batches[0]]) === batches[1])
        batches[0].unfinished = 0
        batches[1].unfinished = 0
        XCTAssertTrue(ledger.oldest(besides: []) === batches[2])
        XCTAssertNil(ledger.oldest(besides: [batches[2]]))
    }

    /// An apns-id is kept inline when short and plain JSON string content (a UUID), as text
    /// otherwise (a byte above 0x7F, a quote, a backslash or a control character, in any word or
    /// in the tail); either way it reads back and goes into records, escaped as needed, as APNs
    /// sent it.
    func testAnAPNSIDReadsBackAsSentInlineOrNot() throws {
        let uuid = "1f00193f-cf32-4254-abc1-eefeb1c5c3a4"
        for text in [uuid, "", "x", String(repeating: "7", count: 40), String(repeating: "7", count: 41), "héllo \"quoted\"", "é", "1234567é", "12345678é",
                     "a\"b", "back\\slash", "tab\there", "1234\"678", "12345678\"", "12345678\\9"] {
            let id = Array(text.utf8).withUnsafeBufferPointer { APNSID($0) }
            XCTAssertEqual(id.description, text)
            XCTAssertEqual(id, APNSID(text))
            XCTAssertEqual(id.isEmpty, text.isEmpty)
            XCTAssertEqual(id.isPlainJSON, text.utf8.count <= 40 && text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x80 && $0 != 0x22 && $0 != 0x5C })
            let ctx = OutcomeRecord.Context(handle: 1, jobID: nil, app: nil, token: nil, topic: nil, worker: "w", timeMs: 1)
            let record = try JSONSerialization.jsonObject(with: Data(OutcomeRecord.result(ctx, delivered: id, rejection: nil, attempts: 1)))
            XCTAssertEqual((record as? [String: Any])?["apns_id"] as? String, text)
        }
        XCTAssertNotEqual(APNSID(uuid), APNSID(uuid.uppercased()))
    }

    /// The gate's room follows connection pools: apps sharing endpoint and credential share one.
    func testGateCapacitiesCountPoolsNotApps() {
        let endpoint = APNSEndpoint(host: "127.0.0.1", port: 1, caFile: nil)
        func app(_ name: String, key: String) -> AppConfiguration {
            AppConfiguration(name: name, bundleID: "com.example.\(name)", endpoint: endpoint,
                             auth: .token(teamID: "TEAM123456", keyID: key, keyFile: "/dev/null"))
        }
        var config = WorkerConfiguration()
        config.connections = 2
        config.streams = 100
        config.apps = [app("a", key: "KEY1")]
        XCTAssertEqual(config.sendingCapacity, 400)
        XCTAssertEqual(config.recordingCapacity, 400, "twice what the connections carry")
        config.apps = [app("a", key: "KEY1"), app("b", key: "KEY1")]
        XCTAssertEqual(config.sendingCapacity, 400, "one shared pool")
        config.apps = [app("a", key: "KEY1"), app("b", key: "KEY2")]
        XCTAssertEqual(config.sendingCapacity, 800, "two pools")
        config.streams = 500
        XCTAssertEqual(config.recordingCapacity, 4000)
        config.streams = 10
        XCTAssertEqual(config.recordingCapacity, 256, "at least one batch")
    }

    /// Sends and unrecorded outcomes are bounded apart: a completion backlog within its own
    /// limit does not hold the fetcher back, one above it does, and recording frees it.
    func testGateBoundsSendingAndRecordingApart() {
        let gate = InFlightGate(sendingCapacity: 10, recordingCapacity: 5)
        let woken = DispatchSemaphore(value: 0)
        gate.add(sent: 8, decided: 1)
        XCTAssertFalse(gate.hasRoom(for: 3, waiter: ObjectIdentifier(self), orWake: {}), "8 sending + 3 > 10")
        gate.answered(4)
        XCTAssertEqual(gate.current, 9, "answered jobs are held until recorded")
        XCTAssertTrue(gate.hasRoom(for: 3, waiter: ObjectIdentifier(self), orWake: { XCTFail("no wait, no wake") }), "4 sending + 3 fit, and 5 recording is within its limit")
        gate.answered(2)
        XCTAssertFalse(gate.hasRoom(for: 3, waiter: ObjectIdentifier(self), orWake: { woken.signal() }), "7 recording is over its limit")
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { gate.recorded(4) }
        XCTAssertEqual(woken.wait(timeout: .now() + 5), .success, "recording wakes the waiting fetcher")
        XCTAssertTrue(gate.hasRoom(for: 3, waiter: ObjectIdentifier(self), orWake: {}))
        gate.answered(2)
        gate.recorded(5)
        XCTAssertTrue(gate.waitUntilEmpty(timeout: 1))
    }

    /// Waiters are woken only once what they wait for holds, so no wake may be missed: answers
    /// that free room a little at a time wake the fetcher when the last of it comes (once), and
    /// the last record wakes a shutdown waiting to drain.
    func testGateWakesEachWaiterWhenItsConditionHolds() {
        let gate = InFlightGate(sendingCapacity: 10, recordingCapacity: 100)
        gate.add(sent: 10, decided: 0)
        let wakes = Mutex<[Int]>([])
        let woken = DispatchSemaphore(value: 0)
        XCTAssertFalse(gate.hasRoom(for: 5, waiter: ObjectIdentifier(self), orWake: { wakes.withLock { $0.append(gate.current) }; woken.signal() }))
        let answers = DispatchGroup()
        DispatchQueue.global().async(group: answers) {
            for _ in 0..<5 {
                usleep(10_000)
                gate.answered(1)
            }
        }
        XCTAssertEqual(woken.wait(timeout: .now() + 10), .success, "five answers of one make room for five")
        answers.wait()
        XCTAssertEqual(wakes.withLock { $0 }, [10], "woken once, when the room was there")
        DispatchQueue.global().async {
            gate.answered(5)
            for _ in 0..<10 {
                usleep(5_000)
                gate.recorded(1)
            }
        }
        XCTAssertTrue(gate.waitUntilEmpty(timeout: 10), "the last record wakes the drain")
        XCTAssertEqual(gate.current, 0)
    }
}

final class RetryAndEnvelopeTests: XCTestCase {
    func testBackoffGapsGrowAndStopAtTheLimit() {
        var policy = RetryPolicy()
        policy.backoffBaseMs = 1000
        var g = SystemRandomNumberGenerator()
        var last = 0
        for attempt in 1..<8 {
            guard case .retry(let ms) = policy.decide(.tooManyRequests, attempts: attempt, jobMaxAttempts: nil, using: &g) else {
                return XCTFail("attempt \(attempt) should be retried")
            }
            XCTAssertGreaterThan(ms, last)
            XCTAssertLessThanOrEqual(ms, policy.backoffCapMs)
            last = min(ms, policy.backoffCapMs / 2)
        }
        XCTAssertEqual(policy.decide(.tooManyRequests, attempts: 8, jobMaxAttempts: nil, using: &g), .giveUp)
        XCTAssertEqual(policy.decide(.tooManyRequests, attempts: 2, jobMaxAttempts: 2, using: &g), .giveUp)
    }

    func testServerErrorsGetThreeTriesOneToFiveSecondsApart() {
        let policy = RetryPolicy()
        var g = SystemRandomNumberGenerator()
        for attempt in 1...2 {
            guard case .retry(let ms) = policy.decide(.serverError, attempts: attempt, jobMaxAttempts: nil, using: &g) else {
                return XCTFail("try \(attempt) of 3 should be retried")
            }
            XCTAssertTrue((1000...5000).contains(ms))
        }
        XCTAssertEqual(policy.decide(.serverError, attempts: 3, jobMaxAttempts: nil, using: &g), .giveUp)
    }

    func testEnvelopeRoundTripKeepsTheJobBytes() throws {
        let job = Array(#"{"token":"ab","payload":{"x":1.50,"y":"é"}}"#.utf8)[...]
        let meta = JobEnvelope.Meta(token: "abcd", attempts: [.init(timeMs: 1_700_000_000_000, status: 429, reason: "TooManyRequests")],
                                    recoveries: 2, nonce: "w/1")
        let wrapped = JobEnvelope.wrap(job: job, meta: meta)
        XCTAssertTrue(JobEnvelope.isEnvelope(wrapped[...]))
        XCTAssertFalse(JobEnvelope.isEnvelope(job))
        let (m, inner) = try JobEnvelope.open(wrapped[...])
        XCTAssertEqual(m, meta)
        XCTAssertEqual(inner, job)
        // Inside a batch's shared buffer the envelope starts past index 0, and so does its job.
        let before = Array("[\"x\",".utf8)
        let shared = before + wrapped + Array("]".utf8)
        let slice = shared[before.count..<(before.count + wrapped.count)]
        XCTAssertTrue(JobEnvelope.isEnvelope(slice))
        let (m3, inner3) = try JobEnvelope.open(slice)
        XCTAssertEqual(m3, meta)
        XCTAssertTrue(inner3.elementsEqual(job))
        // The Lua recovery script writes an empty list as {} and adds fields in its own order.
        let lua = Array(#"{"_apnsw":{"recoveries":1,"attempts":{}},"job":{"token":"ab","payload":{}}}"#.utf8)
        let (m2, inner2) = try JobEnvelope.open(lua[...])
        XCTAssertEqual(m2.recoveries, 1)
        XCTAssertEqual(m2.attempts, [])
        XCTAssertEqual(String(decoding: inner2, as: UTF8.self), #"{"token":"ab","payload":{}}"#)
    }

    func testFanOutAndScheduleFieldsParse() throws {
        let a = String(repeating: "ab", count: 32), b = String(repeating: "cd", count: 32)
        let job = try Job.parse(Array(#"{"tokens":["\#(a)","\#(b)"],"send_at":1800000000,"max_attempts":5,"payload":{"a":1}}"#.utf8))
        XCTAssertEqual(job.tokens.map(\.hex), [a, b])
        XCTAssertEqual(job.sendAt, 1_800_000_000)
        XCTAssertEqual(job.maxAttempts, 5)
        XCTAssertThrowsError(try Job.parse(Array(#"{"token":"\#(a)","tokens":["\#(b)"],"payload":{"a":1}}"#.utf8)))
        XCTAssertThrowsError(try Job.parse(Array(#"{"tokens":[],"payload":{"a":1}}"#.utf8)))
        XCTAssertThrowsError(try Job.parse(Array(#"{"tokens":[1],"payload":{"a":1}}"#.utf8)))
        let many = (0...Job.maxTokens).map { "\"\(String(format: "%064x", $0))\"" }.joined(separator: ",")
        XCTAssertThrowsError(try Job.parse(Array(#"{"tokens":[\#(many)],"payload":{"a":1}}"#.utf8))) { error in
            XCTAssertEqual((error as? JobRejection)?.reason, JobRejection.tooManyTokens)
        }
    }
}
