import APNSCore
import Buffers
import Delivery

/// The wrapper a worker puts around a job it sends back to the queue (a retry, a schedule, a
/// recovery): `{"_apnsw":{meta},"job":<the producer's job, byte for byte>}`.
///
/// Producers never write it (`_apnsw` is not a job field). The Lua recovery script writes it
/// too, so its layout is fixed: the meta object first, the job last.
public enum JobEnvelope {
    public struct Meta: Sendable, Equatable {
        /// Send only to this token (one member of a fan-out).
        public var token: String?
        /// Every try so far: time, status, reason.
        public var attempts: [SendAttempt] = []
        /// How many times the job was taken back from a worker that died.
        public var recoveries = 0
        /// Keeps envelopes unique inside the schedule's sorted set.
        public var nonce: String?
        /// Tokens of a fan-out job that have their result already (hex): a job taken back part
        /// way is sent to the others only. Written by the take-back scripts.
        public var done: [String] = []
        /// When a worker first took the job (UNIX ms): its age for `max_age_s`.
        public var since: Int64?
        /// The claim on the job's `idempotency_key` it holds (the handle it was first taken
        /// under): a later take that finds the key held by it sends it. Written by the worker's
        /// envelopes and by the take-back scripts.
        public var claim: Int64?

        public init(
            token: String? = nil, attempts: [SendAttempt] = [], recoveries: Int = 0, nonce: String? = nil, done: [String] = [],
            since: Int64? = nil, claim: Int64? = nil
        ) {
            self.claim = claim
            self.done = done
            self.since = since
            self.token = token
            self.attempts = attempts
            self.recoveries = recoveries
            self.nonce = nonce
        }
    }

    public static let prefix: [UInt8] = Array(#"{"_apnsw":"#.utf8)

    /// Compares through borrowed pointers: a slice of the bytes would count a reference on the
    /// buffer that every job of the batch shares.
    public static func isEnvelope(_ bytes: ArraySlice<UInt8>) -> Bool {
        bytes.withUnsafeBufferPointer { isEnvelope($0) }
    }

    public static func isEnvelope(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard b.count > prefix.count else { return false }
        return prefix.withUnsafeBufferPointer { p in (0..<p.count).allSatisfy { b[$0] == p[$0] } }
    }

    public static func wrap(job: ArraySlice<UInt8>, meta: Meta) -> [UInt8] {
        ByteBuffer.array { out in wrap(job: job, meta: meta, into: &out) }
    }

    public static func wrap(job: ArraySlice<UInt8>, meta: Meta, into out: inout ByteBuffer) {
        let room =
            128 + job.count + JSONCursor.room(for: meta.token) + JSONCursor.room(for: meta.nonce) + 32
            + meta.done.reduce(0) { $0 + JSONCursor.room(for: $1) }
            + OutcomeRecord.room(for: meta.attempts)
        JSONCursor.append(to: &out, maxCount: room) { w in
            w.beginObject()
            w.key(literal: "_apnsw")
            w.beginObject()
            w.fieldIfPresent(literal: "token", meta.token)
            if !meta.attempts.isEmpty { OutcomeRecord.writeAttempts(meta.attempts, to: &w) }
            if meta.recoveries > 0 { w.field(literal: "recoveries", meta.recoveries) }
            w.fieldIfPresent(literal: "nonce", meta.nonce)
            w.fieldIfPresent(literal: "since", meta.since)
            w.fieldIfPresent(literal: "claim", meta.claim.map { String($0) })
            if !meta.done.isEmpty {
                w.key(literal: "done")
                w.beginArray()
                for t in meta.done { w.string(t) }
                w.endArray()
            }
            w.endObject()
            w.key(literal: "job")
            job.withUnsafeBufferPointer { w.raw($0) }
            w.endObject()
        }
    }

    /// Splits an envelope into its meta and the original job bytes (a slice of `bytes`).
    public static func open(_ bytes: ArraySlice<UInt8>) throws(JobRejection) -> (meta: Meta, job: ArraySlice<UInt8>) {
        var meta = Meta()
        var jobRange: Range<Int>?
        do {
            try bytes.withUnsafeBufferPointer { (buf) throws(JSONSyntaxError) in
                var s = JSONScanner(buf)
                try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                    switch key {
                    case "_apnsw": try readMeta(&s, into: &meta)
                    case "job": jobRange = try s.skipValue().range
                    default: try s.skipValue()
                    }
                }
            }
        } catch {
            throw JobRejection(JobRejection.malformedJSON, "a worker envelope is damaged: \(error)")
        }
        guard let jobRange else { throw JobRejection(JobRejection.malformedJSON, "a worker envelope has no job") }
        return (meta, bytes.dropFirst(jobRange.lowerBound).prefix(jobRange.count))
    }

    private static func readMeta(_ s: inout JSONScanner, into meta: inout Meta) throws(JSONSyntaxError) {
        try s.forEachMember { (key, s) throws(JSONSyntaxError) in
            switch key {
            case "token": meta.token = try s.readString()
            case "nonce": meta.nonce = try s.readString()
            case "recoveries": meta.recoveries = Int(try s.readInt())
            case "since": meta.since = try s.readInt()
            case "claim": meta.claim = Int64(try s.readString())
            case "done":
                // Lua's cjson writes an empty list as {}.
                if try s.peek() == UInt8(ascii: "[") { meta.done = try readStrings(&s) } else { try s.skipValue() }
            case "attempts":
                // Lua's cjson writes an empty list as {}.
                if try s.peek() == UInt8(ascii: "[") { meta.attempts = try readAttempts(&s) } else { try s.skipValue() }
            default: try s.skipValue()
            }
        }
    }

    private static func readStrings(_ s: inout JSONScanner) throws(JSONSyntaxError) -> [String] {
        var out: [String] = []
        try s.expect(UInt8(ascii: "["))
        if try s.consume(UInt8(ascii: "]")) { return out }
        repeat { out.append(try s.readString()) } while try s.consume(UInt8(ascii: ","))
        try s.expect(UInt8(ascii: "]"))
        return out
    }

    private static func readAttempts(_ s: inout JSONScanner) throws(JSONSyntaxError) -> [SendAttempt] {
        var out: [SendAttempt] = []
        try s.expect(UInt8(ascii: "["))
        if try s.consume(UInt8(ascii: "]")) { return out }
        repeat {
            var a = SendAttempt(timeMs: 0, status: 0, reason: nil)
            try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                switch key {
                case "time_ms": a.timeMs = try s.readInt()
                case "status": a.status = Int(try s.readInt())
                case "reason": a.reason = try s.readString()
                default: try s.skipValue()
                }
            }
            out.append(a)
        } while try s.consume(UInt8(ascii: ","))
        try s.expect(UInt8(ascii: "]"))
        return out
    }
}
