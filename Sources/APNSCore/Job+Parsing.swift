import Buffers

extension Job {
    /// The fields of schema v1. Unknown fields are rejected so that a typo such as
    /// `"priorty"` cannot silently send with a default.
    enum Field: Int, CaseIterable {
        case v, id, app, token, tokens, topic, pushType, priority, expiration, collapseID, apnsID
        case payload, notification, template, truncate, sendAt, maxAttempts, meta, channel, channelStorage, idempotencyKey, condition

        /// Matches a key's UTF-8 by its length, then its bytes: no String is built per key.
        init?(utf8 key: UnsafeBufferPointer<UInt8>) {
            func matches(_ name: StaticString) -> Bool { key.equals(name) }
            let field: Field?
            switch key.count {
            case 1: field = matches("v") ? .v : nil
            case 2: field = matches("id") ? .id : nil
            case 3: field = matches("app") ? .app : nil
            case 4: field = matches("meta") ? .meta : nil
            case 5: field = matches("token") ? .token : matches("topic") ? .topic : nil
            case 6: field = matches("tokens") ? .tokens : nil
            case 7:
                field =
                    matches("payload") ? .payload : matches("apns_id") ? .apnsID : matches("send_at") ? .sendAt : matches("channel") ? .channel : nil
            case 8: field = matches("priority") ? .priority : matches("template") ? .template : matches("truncate") ? .truncate : nil
            case 9: field = matches("push_type") ? .pushType : matches("condition") ? .condition : nil
            case 10: field = matches("expiration") ? .expiration : nil
            case 11: field = matches("collapse_id") ? .collapseID : nil
            case 12: field = matches("notification") ? .notification : matches("max_attempts") ? .maxAttempts : nil
            case 15: field = matches("channel_storage") ? .channelStorage : matches("idempotency_key") ? .idempotencyKey : nil
            default: field = nil
            }
            guard let field else { return nil }
            self = field
        }

        var name: String { Job.fieldNames[rawValue] }
    }

    public static let fieldNames: [String] = [
        "v", "id", "app", "token", "tokens", "topic", "push_type", "priority", "expiration", "collapse_id", "apns_id",
        "payload", "notification", "template", "truncate", "send_at", "max_attempts", "meta", "channel", "channel_storage",
        "idempotency_key", "condition",
    ]

    public static func parse(_ bytes: [UInt8]) throws(JobRejection) -> Job { try parse(bytes[...]) }

    /// Parses and checks one job in a single pass over its bytes. Ranges found are relative to
    /// the slice's start.
    /// `bytes` are consumed: the job keeps them without counting another reference.
    public static func parse(_ bytes: consuming ArraySlice<UInt8>) throws(JobRejection) -> Job {
        var fields = RawFields()
        do {
            try bytes.withUnsafeBufferPointer { (buf) throws(JSONSyntaxError) in
                try fields.read(buf)
            }
        } catch {
            switch error.kind {
            case .syntax: throw JobRejection(JobRejection.malformedJSON, "the job is not valid JSON: \(error)")
            case .notAWholeNumber:
                throw JobRejection(JobRejection.wrongType, "the job is valid JSON, but a field that takes a whole number has another: \(error)")
            case .tooDeep: throw JobRejection(JobRejection.malformedJSON, "the job is valid JSON, but its \(error)")
            }
        }
        if let error = fields.error { throw error }
        return try fields.build(raw: bytes)
    }

    /// A token as scanned: checked at once, its error raised by the rules that come later.
    /// `absent` rather than an optional: an optional's destroy went through generic value
    /// witnesses.
    enum ScannedToken {
        case absent
        case valid(DeviceToken)
        case invalid(characters: Int)

        var isAbsent: Bool { if case .absent = self { true } else { false } }

        mutating func take() -> ScannedToken {
            var taken = ScannedToken.absent
            swap(&self, &taken)
            return taken
        }

        init(_ utf8: UnsafeBufferPointer<UInt8>) {
            // Not hex: an FCM registration token, if it could be one; the app decides (`hexProblem`).
            if let token = DeviceToken(utf8: utf8) ?? DeviceToken(registration: utf8) {
                self = .valid(token)
            } else {
                self = .invalid(characters: utf8.count)
            }
        }
    }

    /// Field values as scanned, before the rules of the schema are applied.
    private struct RawFields {
        var version: Int64?
        /// A plain id is kept as its range, not built into a String (`Job.id`).
        var id: JSONScanner.ScannedString?
        var app: String?, topic: String?, pushType: String?
        /// The token as scanned: read from the job's bytes without building a String.
        var token = ScannedToken.absent
        var collapseID: String?, apnsID: String?, channel: String?, channelStorage: String?, idempotencyKey: String?, condition: String?
        var priority: Int64?, expiration: Int64?, sendAt: Int64?, maxAttempts: Int64?
        var tokenList: [String]?
        var payload: Range<Int>?
        var notification: Range<Int>?
        var meta: Range<Int>?
        var templateName: String?, templateLocale: String?, templateData: Range<Int>?, hasTemplate = false
        var truncate: Bool?
        /// Bit i set: the field with raw value i was seen (a Set<String> costs a hash per key).
        var seen: UInt32 = 0
        var error: JobRejection?

        mutating func read(_ buf: UnsafeBufferPointer<UInt8>) throws(JSONSyntaxError) {
            var s = JSONScanner(buf)
            guard try s.peek() == UInt8(ascii: "{") else {
                error = JobRejection(JobRejection.malformedJSON, "the job must be a JSON object")
                return
            }
            try s.forEachMember(lendingKeys: { key, s throws(JSONSyntaxError) in
                guard let field = Field(utf8: key) else {
                    if error == nil {
                        let name = String(decoding: key, as: UTF8.self)
                        error = JobRejection(
                            JobRejection.unknownField,
                            "unknown field \"\(name)\" (schema v1 fields: \(Job.fieldNames.sorted().joined(separator: ", ")))")
                    }
                    try s.skipValue()
                    return
                }
                guard seen & (1 << field.rawValue) == 0 else {
                    if error == nil { error = JobRejection(JobRejection.malformedJSON, "field \"\(field.name)\" appears twice") }
                    try s.skipValue()
                    return
                }
                seen |= 1 << field.rawValue
                try readField(field, &s)
            })
            try s.expectEnd()
        }

        private mutating func readField(_ field: Field, _ s: inout JSONScanner) throws(JSONSyntaxError) {
            let kind = try Self.kind(of: s.peek())
            func want(_ expected: JSONKind) -> Bool {
                if kind == expected || kind == .null { return kind == expected }
                if error == nil {
                    error = JobRejection(JobRejection.wrongType, "field \"\(field.name)\" must be \(expected.withArticle), not \(kind.withArticle)")
                }
                return false
            }
            switch field {
            case .v: if want(.number) { version = try s.readInt(); return }
            case .id: if want(.string) { id = try s.readPlainOrDecoded(); return }
            case .app: if want(.string) { app = try s.readString(); return }
            case .token: if want(.string) { token = try s.readString { ScannedToken($0) }; return }
            case .topic: if want(.string) { topic = try s.readString(); return }
            case .pushType: if want(.string) { pushType = try s.readString(); return }
            case .collapseID: if want(.string) { collapseID = try s.readString(); return }
            case .apnsID: if want(.string) { apnsID = try s.readString(); return }
            case .channel: if want(.string) { channel = try s.readString(); return }
            case .channelStorage: if want(.string) { channelStorage = try s.readString(); return }
            case .idempotencyKey: if want(.string) { idempotencyKey = try s.readString(); return }
            case .condition: if want(.string) { condition = try s.readString(); return }
            case .priority: if want(.number) { priority = try s.readInt(); return }
            case .expiration: if want(.number) { expiration = try s.readInt(); return }
            case .sendAt: if want(.number) { sendAt = try s.readInt(); return }
            case .maxAttempts: if want(.number) { maxAttempts = try s.readInt(); return }
            case .tokens:
                if want(.array) { tokenList = try readStrings(&s, field.name); return }
            case .payload:
                if kind == .object { payload = try s.skipValue().range; return }
                if error == nil { error = JobRejection(JobRejection.wrongType, "field \"payload\" must be a JSON object, not \(kind.withArticle)") }
            case .notification:
                if want(.object) { notification = try s.skipValue().range; return }
            case .meta:
                guard want(.object) else { break }
                meta = try s.skipValue().range
                if meta!.count > Job.maxMetaBytes, error == nil {
                    error = JobRejection(JobRejection.metaTooLarge, "\"meta\" is \(meta!.count) bytes; the limit is \(Job.maxMetaBytes)")
                }
                return
            case .truncate:
                if want(.bool) { truncate = try s.peek() == UInt8(ascii: "t"); try s.skipValue(); return }
            case .template:
                if want(.object) { try readTemplate(&s); return }
            }
            try s.skipValue()
        }

        /// `{"name": "...", "locale": "pt-BR", "data": {...}}`
        private mutating func readTemplate(_ s: inout JSONScanner) throws(JSONSyntaxError) {
            hasTemplate = true
            try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                let kind = try Self.kind(of: s.peek())
                switch (key, kind) {
                case ("name", .string): templateName = try s.readString()
                case ("locale", .string): templateLocale = try s.readString()
                case ("data", .object): templateData = try s.skipValue().range
                case ("name", _), ("locale", _), ("data", _):
                    if error == nil { error = JobRejection(JobRejection.wrongType, "template.\(key) has the wrong type (\(kind.rawValue))") }
                    try s.skipValue()
                default:
                    if error == nil {
                        error = JobRejection(JobRejection.unknownField, "unknown field \"template.\(key)\" (known: name, locale, data)")
                    }
                    try s.skipValue()
                }
            }
        }

        /// Reads an array of strings; anything else in it is a type error.
        private mutating func readStrings(_ s: inout JSONScanner, _ key: String) throws(JSONSyntaxError) -> [String] {
            var out: [String] = []
            try s.expect(UInt8(ascii: "["))
            if try s.consume(UInt8(ascii: "]")) { return out }
            repeat {
                if try s.peek() == UInt8(ascii: "\"") {
                    out.append(try s.readString())
                } else {
                    if error == nil { error = JobRejection(JobRejection.wrongType, "\"\(key)\" must be a list of strings") }
                    try s.skipValue()
                }
            } while try s.consume(UInt8(ascii: ","))
            try s.expect(UInt8(ascii: "]"))
            return out
        }

        private func checkedStorage() throws(JobRejection) -> ChannelStorage? {
            guard let channelStorage else { return nil }
            guard let storage = ChannelStorage(name: channelStorage) else {
                throw JobRejection(JobRejection.wrongType, "channel_storage is \"none\" or \"most-recent\", not \"\(channelStorage)\"")
            }
            return storage
        }

        static func kind(of first: UInt8) -> JSONKind {
            switch first {
            case UInt8(ascii: "{"): return .object
            case UInt8(ascii: "["): return .array
            case UInt8(ascii: "\""): return .string
            case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
            case UInt8(ascii: "n"): return .null
            default: return .number
            }
        }

        /// Mutating: the job's strings are taken out of these fields, not copied (a retain each,
        /// and a release when the fields go).
        mutating func build(raw: consuming ArraySlice<UInt8>) throws(JobRejection) -> Job {
            if let version, version != Job.schemaVersion {
                throw JobRejection(
                    JobRejection.unsupportedVersion, "job schema version \(version) is not supported (this worker reads v\(Job.schemaVersion))")
            }
            if !token.isAbsent && tokenList != nil {
                throw JobRejection(JobRejection.malformedJSON, "give either \"token\" or \"tokens\", not both")
            }
            let storage = try checkedStorage()
            if let channel {
                guard token.isAbsent && tokenList == nil else {
                    throw JobRejection(JobRejection.malformedJSON, "give either \"channel\" (a broadcast) or \"token\"/\"tokens\", not both")
                }
                try BroadcastRules.check(
                    channel: channel, pushType: pushType, topic: topic, collapseID: collapseID, expiration: expiration, storage: storage)
                pushType = pushType ?? PushType.liveactivity.rawValue
            } else if storage != nil {
                throw JobRejection(JobRejection.wrongType, "channel_storage describes a broadcast's \"channel\", and the job has none")
            }
            if condition != nil, !token.isAbsent || tokenList != nil || channel != nil {
                throw JobRejection(JobRejection.malformedJSON, "give either \"condition\" (FCM) or \"token\"/\"tokens\"/\"channel\", not both")
            }
            // An FCM topic or condition is the one target of a job without tokens (its app decides: `AppRouter`).
            let untargeted = token.isAbsent && tokenList == nil && (topic != nil || condition != nil)
            let count = channel != nil || untargeted ? 1 : tokenList?.count ?? (token.isAbsent ? 0 : 1)
            guard count > 0 else {
                throw JobRejection(.missingDeviceToken, "the job has no \"token\" (or an empty one)")
            }
            guard count <= Job.maxTokens else {
                throw JobRejection(JobRejection.tooManyTokens, "\"tokens\" has \(count) entries; the limit is \(Job.maxTokens) per job")
            }
            func deviceToken(_ scanned: consuming ScannedToken) throws(JobRejection) -> DeviceToken {
                switch consume scanned {
                case .valid(let t): return t
                case .absent, .invalid(characters: 0): throw JobRejection(.missingDeviceToken, "the job has no \"token\" (or an empty one)")
                case .invalid(let n): throw DeviceToken.hexProblem(characters: n)
                }
            }
            func deviceToken(_ text: String) throws(JobRejection) -> DeviceToken {
                try deviceToken(text.withUTF8Bytes { ScannedToken($0) })
            }
            // A single token builds no array.
            let first =
                try channel != nil || untargeted ? DeviceToken.absent : token.isAbsent ? deviceToken(tokenList![0]) : deviceToken(token.take())
            var others: [DeviceToken] = []
            if let tokenList, tokenList.count > 1 {
                others.reserveCapacity(tokenList.count - 1)
                for text in tokenList.dropFirst() { others.append(try deviceToken(text)) }
            }
            if let maxAttempts, !(1...100).contains(maxAttempts) {
                throw JobRejection(JobRejection.wrongType, "max_attempts must be 1-100, got \(maxAttempts)")
            }
            if let sendAt, sendAt < 0 || sendAt > 0xFFFF_FFFF {
                throw JobRejection(JobRejection.wrongType, "send_at must be UNIX seconds, got \(sendAt)")
            }
            let type: PushType
            if let pushType {
                guard let known = PushType(pushType) else {
                    throw JobRejection(
                        .invalidPushType, "push_type \"\(pushType)\" is not one of \(PushType.all.map(\.rawValue).joined(separator: ", "))")
                }
                type = known
            } else {
                type = .alert
            }
            var checkedPriority: Priority?
            if let priority {
                guard let p = Priority(priority) else {
                    throw JobRejection(.badPriority, "priority must be 10, 5 or 1, got \(priority)")
                }
                checkedPriority = p
            }
            let forms = (payload != nil ? 1 : 0) + (notification != nil ? 1 : 0) + (hasTemplate ? 1 : 0)
            guard forms == 1 else {
                throw JobRejection(
                    JobRejection.missingPayload,
                    forms == 0
                        ? "the job has no \"payload\", \"notification\" or \"template\""
                        : "give one of \"payload\", \"notification\" and \"template\", not several")
            }
            let content: Job.Content
            if let notification {
                content = .notification(notification)
            } else if hasTemplate {
                guard let name = templateName.take(), !name.isEmpty else {
                    throw JobRejection(JobRejection.unknownTemplate, "\"template\" needs a \"name\"")
                }
                content = .template(name: name, locale: templateLocale.take(), data: templateData)
            } else {
                content = .raw
            }
            // The payload's range is relative to the job's start, which need not be index 0.
            let start = raw.startIndex + (payload?.lowerBound ?? 0)
            let payloadRange = start..<(start + (payload?.count ?? 0))
            let idField: JSONScanner.ScannedString? =
                switch id.take() {
                case .plain(let range)?: .plain((raw.startIndex + range.lowerBound)..<(raw.startIndex + range.upperBound))
                case let other: other
                }
            let job = Job(
                raw: raw, idField: idField, app: app.take(), token: first, otherTokens: others, topic: topic.take(), pushType: type,
                priority: checkedPriority, expiration: expiration, collapseID: collapseID.take(),
                apnsID: apnsID.take().map { $0.lowercased() }, payload: .inRaw(payloadRange), content: content,
                truncate: truncate, sendAt: sendAt, maxAttempts: maxAttempts.map(Int.init), channel: channel.take(), channelStorage: storage)
            job.metaRange = meta.map { (job.raw.startIndex + $0.lowerBound)..<(job.raw.startIndex + $0.upperBound) }
            if let key = idempotencyKey.take() {
                try Job.checkIdempotencyKey(key)
                job.idempotencyKey = key
            }
            job.condition = condition.take()
            try RequestRules.check(job: job)
            return job
        }
    }
}
