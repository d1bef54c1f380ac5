import APNSCore
import Buffers
import Delivery
import PointerTricks

/// The JSON records a worker writes for each outcome (README "Outcome records").
/// Every record has `"v":1`; fields absent from an outcome are left out.
public enum OutcomeRecord {
    /// Context of the job an outcome belongs to. Not copyable: the writers borrow it, so that a
    /// record costs no reference count per string it names.
    public struct Context: ~Copyable, @unchecked Sendable {
        /// The job's handle, written as a string of its digits.
        public var handle: Int64
        /// The job's id, when there is no `job` to take it from.
        public var jobID: String?
        /// The job, whose id a record copies from the job's own bytes; lent (see `init(handle:lending:…)`).
        @usableFromInline let job: UncountedReference<Job>?
        /// `DeviceToken.absent` when the job has none. Not optional: an optional's copies go
        /// through generic value witnesses.
        public var token: DeviceToken
        /// App, topic, worker and time as JSON (`SharedFields`), which the records of a batch
        /// mostly share; `owner` keeps them when they are not lent.
        @usableFromInline let shared: UnsafeBufferPointer<UInt8>
        private let owner: SharedFields?
        /// What a job that failed its checks says about itself (`job` is nil then).
        public var names: JobNames?
        /// The answer's `apns-unique-id` (development only), written into results when not empty.
        public var uniqueID = APNSID()

        public init(handle: Int64, jobID: String?, token: DeviceToken?, shared: SharedFields) {
            self.handle = handle
            self.jobID = jobID
            self.job = nil
            self.token = token ?? .absent
            self.shared = shared.jsonBytes
            self.owner = shared
        }

        /// A context that borrows `job` and `shared` (`SharedFields.jsonBytes`): the caller keeps
        /// both alive while the context is used: the completer writes a batch's records without
        /// counting references to them.
        public init(
            handle: Int64, lending job: UncountedReference<Job>?, token: DeviceToken?, shared: UnsafeBufferPointer<UInt8>, names: JobNames? = nil
        ) {
            self.handle = handle
            self.names = names
            self.jobID = nil
            self.job = job
            self.token = token ?? .absent
            self.shared = shared
            self.owner = nil
        }

        public init(handle: Int64, jobID: String?, app: String?, token: DeviceToken?, topic: String?, worker: String, timeMs: Int64) {
            self.init(handle: handle, jobID: jobID, token: token, shared: SharedFields(app: app, topic: topic, worker: worker, timeMs: timeMs))
        }
    }

    /// The fields a record takes from its app, its topic, the worker and the time, written as
    /// JSON once (`"app":…,"topic":…,"worker":…,"time_ms":…`) and copied into each record that
    /// shares them. Escaping those four values for each record, and counting references to
    /// them, was about a quarter of the cost of a result record.
    public final class SharedFields: @unchecked Sendable {  // immutable: `jsonBytes` points into `json`
        public let app: String?
        public let topic: String?
        private let json: [UInt8]
        /// The JSON's bytes, valid while this object lives (they never change).
        public let jsonBytes: UnsafeBufferPointer<UInt8>

        public init(app: String?, topic: String?, worker: String, timeMs: Int64) {
            self.app = app
            self.topic = topic
            var json: [UInt8] = []
            JSONCursor.append(to: &json, maxCount: JSONCursor.room(for: app) + JSONCursor.room(for: topic) + JSONCursor.room(for: worker) + 64) { w in
                w.fieldIfPresent(literal: "app", app)
                w.fieldIfPresent(literal: "topic", topic)
                w.field(literal: "worker", worker)
                w.field(literal: "time_ms", timeMs)
            }
            self.json = json
            jsonBytes = StableBytes.of(json)
        }
    }

    /// `{"v":1,"status":"ok"|"failed",…}` for the results stream.
    public static func result(_ c: borrowing Context, delivered apnsID: APNSID?, rejection: Rejection?, attempts: Int) -> [UInt8] {
        ByteBuffer.array { out in result(c, delivered: apnsID, rejection: rejection, attempts: attempts, into: &out) }
    }

    public static func result(_ c: borrowing Context, delivered apnsID: APNSID?, rejection: Rejection?, attempts: Int, into out: inout ByteBuffer) {
        if let rejected = rejection?.apnsID {
            result(c, id: APNSID(rejected), hasID: true, rejection: rejection, attempts: attempts, into: &out)
        } else if let apnsID {
            result(c, id: apnsID, hasID: true, rejection: rejection, attempts: attempts, into: &out)
        } else {
            result(c, id: APNSID(), hasID: false, rejection: rejection, attempts: attempts, into: &out)
        }
    }

    /// The result of a delivery.
    public static func delivered(_ c: borrowing Context, apnsID: APNSID, attempts: Int, into out: inout ByteBuffer) {
        result(c, id: apnsID, hasID: true, rejection: nil, attempts: attempts, into: &out)
    }

    /// `id` is written if `hasID`: an optional id would be destroyed through generic value
    /// witnesses.
    private static func result(
        _ c: borrowing Context, id: borrowing APNSID, hasID: Bool, rejection: Rejection?, attempts: Int,
        into out: inout ByteBuffer
    ) {
        let room =
            c.room + fixedRoom + (hasID ? id.withBytes { JSONCursor.room(forString: $0.count) } : 0)
            + JSONCursor.room(for: rejection?.reason.rawValue)
            + (c.uniqueID.isEmpty ? 0 : c.uniqueID.withBytes { JSONCursor.room(forString: $0.count) } + 24)
        JSONCursor.append(to: &out, maxCount: room) { w in
            w.beginObject()
            w.field(literal: "v", 1)
            common(&w, c)
            // Status 0 means APNs never saw the job: it was dead-lettered before sending.
            w.field(literal: "status", literal: rejection == nil ? "ok" : rejection!.status == 0 ? "dead_letter" : "failed")
            if hasID {
                // A broadcast's answer names the request, not a notification (apns-protocol.md §3.1).
                if c.isBroadcast {
                    w.key(literal: "apns_request_id")
                } else if id.isFCMName {
                    w.field(literal: "provider", literal: "fcm")
                    w.key(literal: "fcm_name")
                } else {
                    w.key(literal: "apns_id")
                }
                let plain = id.isPlainJSON
                id.withBytes { plain ? w.string(plain: $0) : w.string(utf8: $0) }
            }
            if !c.uniqueID.isEmpty {
                w.key(literal: "apns_unique_id")
                c.uniqueID.withBytes { w.string(utf8: $0) }
            }
            if let rejection {
                if rejection.status != 0 { w.field(literal: "http_status", rejection.status) }
                w.field(literal: "reason", rejection.reason.rawValue)
                w.fieldIfPresent(literal: "apns_timestamp", rejection.timestamp)
            }
            w.field(literal: "attempts", attempts)
            w.endObject()
        }
    }

    /// The result of a job not sent because another took its `idempotency_key` first:
    /// `"status":"duplicate"`, and the first one's handle as `duplicate_of`.
    public static func duplicate(_ c: borrowing Context, of first: String, into out: inout ByteBuffer) {
        JSONCursor.append(to: &out, maxCount: c.room + fixedRoom + JSONCursor.room(for: first)) { w in
            w.beginObject()
            w.field(literal: "v", 1)
            common(&w, c)
            w.field(literal: "status", literal: "duplicate")
            w.field(literal: "duplicate_of", first)
            w.field(literal: "attempts", 0)
            w.endObject()
        }
    }

    /// `{"v":1,"token":…,"reason":…}` for the invalid-token stream.
    public static func invalidToken(_ c: borrowing Context, rejection: Rejection) -> [UInt8] {
        ByteBuffer.array { out in invalidToken(c, rejection: rejection, into: &out) }
    }

    public static func invalidToken(_ c: borrowing Context, rejection: Rejection, into out: inout ByteBuffer) {
        JSONCursor.append(to: &out, maxCount: c.room + fixedRoom + JSONCursor.room(for: rejection.reason.rawValue)) { w in
            w.beginObject()
            w.field(literal: "v", 1)
            common(&w, c)
            w.field(literal: "reason", rejection.reason.rawValue)
            w.field(literal: "http_status", rejection.status)
            w.fieldIfPresent(literal: "apns_timestamp", rejection.timestamp)
            w.endObject()
        }
    }

    /// A dead letter: the original job (embedded as JSON when it is JSON), every attempt and the reason.
    public static func deadLetter(
        _ c: borrowing Context, reason: String, detail: String, job raw: ArraySlice<UInt8>, attempts: [SendAttempt]
    ) -> [UInt8] {
        ByteBuffer.array { out in deadLetter(c, reason: reason, detail: detail, job: raw, attempts: attempts, into: &out) }
    }

    public static func deadLetter(
        _ c: borrowing Context, reason: String, detail: String, job raw: ArraySlice<UInt8>, attempts: [SendAttempt], into out: inout ByteBuffer
    ) {
        let isJSON = raw.withUnsafeBufferPointer { buf -> Bool in
            var s = JSONScanner(buf)
            return (try? s.skipValue()) != nil && (try? s.expectEnd()) != nil
        }
        // Text that is not JSON is embedded as a string, after repairing invalid UTF-8.
        let text = isJSON ? "" : String(decoding: raw, as: UTF8.self)
        let room =
            c.room + fixedRoom + JSONCursor.room(for: reason) + JSONCursor.room(for: detail) + room(for: attempts)
            + (isJSON ? raw.count : JSONCursor.room(for: text))
        JSONCursor.append(to: &out, maxCount: room) { w in
            w.beginObject()
            w.field(literal: "v", 1)
            common(&w, c)
            w.field(literal: "reason", reason)
            w.field(literal: "detail", detail)
            writeAttempts(attempts, to: &w)
            if isJSON {
                w.key(literal: "job")
                raw.withUnsafeBufferPointer { w.raw($0) }
            } else {
                w.field(literal: "job_text", text)
            }
            w.endObject()
        }
    }

    /// Room for a record's keys, numbers and fixed strings (under 200 bytes in the largest).
    private static let fixedRoom = 256

    /// Room for `writeAttempts` (an attempt's keys and numbers take under 80 bytes).
    public static func room(for attempts: [SendAttempt]) -> Int {
        attempts.reduce(32) { $0 + 96 + JSONCursor.room(for: $1.reason) }
    }

    /// `"attempts":[{"time_ms":…,"status":…,"reason":…},…]`, as in dead letters and envelopes.
    public static func writeAttempts(_ attempts: [SendAttempt], to w: inout JSONCursor) {
        w.key(literal: "attempts")
        w.beginArray()
        for a in attempts {
            w.beginObject()
            w.field(literal: "time_ms", a.timeMs)
            w.field(literal: "status", a.status)
            w.fieldIfPresent(literal: "reason", a.reason)
            w.endObject()
        }
        w.endArray()
    }

    private static func common(_ w: inout JSONCursor, _ c: borrowing Context) {
        if let job = c.job {
            _ = job.withObject {
                $0.withID { id, isPlainJSON in
                    w.key(literal: "job_id")
                    if isPlainJSON { w.string(plain: id) } else { w.string(utf8: id) }
                }
            }
        } else {
            w.fieldIfPresent(literal: "job_id", c.jobID ?? c.names?.id)
        }
        w.key(literal: "handle")
        w.quoted(c.handle)
        if !c.token.isAbsent {
            w.key(literal: "token")
            c.token.withHex { w.string(plain: $0) }
        } else if let job = c.job, job.withObject({ $0.isBroadcast }) {
            job.withObject { w.field(literal: "channel", $0.channel!) }
        } else {
            w.fieldIfPresent(literal: "token", c.names?.token)
            w.fieldIfPresent(literal: "channel", c.names?.channel)
        }
        // The producer's meta, byte for byte, in every record about the job.
        var wroteMeta = false
        if let job = c.job {
            _ = job.withObject { j in
                j.withMeta { bytes in
                    w.key(literal: "meta")
                    w.raw(bytes)
                    wroteMeta = true
                }
            }
        }
        if !wroteMeta, let meta = c.names?.meta {
            w.key(literal: "meta")
            meta.withUnsafeBufferPointer { w.raw($0) }
        }
        w.raw(c.shared)
    }
}

extension OutcomeRecord.Context {
    /// The record is of a broadcast: it names a channel and the answer's `apns-request-id`.
    public var isBroadcast: Bool { job?.withObject(\.isBroadcast) ?? (names?.channel != nil) }

    /// Room for the fields `common` writes: their values, the handle (20 digits at most, and
    /// quotes), and their keys and separators (under 100 bytes).
    @inlinable
    public var room: Int {
        ((job.map { $0.withObject(\.idCount) } ?? jobID?.utf8.count).map { JSONCursor.room(forString: $0) } ?? 0)
            + token.utf8Count + 2 + 22 + shared.count + 128 + (job?.withObject { $0.metaRange?.count } ?? 0)
            + (names.map { n in [n.id, n.token, n.channel].reduce(n.meta?.count ?? 0) { $0 + JSONCursor.room(for: $1) } } ?? 0)
            + (job.map { $0.withObject { JSONCursor.room(for: $0.channel) } } ?? 0)
    }
}
