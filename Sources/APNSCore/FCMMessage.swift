/// Who an FCM message goes to: exactly one of a registration token, a topic or a condition
/// (fcm-protocol.md §2.3).
public enum FCMTarget: Sendable, Equatable {
    case token(String)
    case topic(String)
    case condition(String)

    /// Topic and condition messages have the smaller payload limit (fcm-protocol.md §2.7).
    public var isFanOut: Bool { if case .token = self { false } else { true } }

    var field: (name: String, value: String) {
        switch self {
        case .token(let t): ("token", t)
        case .topic(let t): ("topic", t)
        case .condition(let c): ("condition", c)
        }
    }
}

/// The body of `POST /v1/projects/<id>/messages:send` (fcm-protocol.md §2.2) from a job's
/// `payload` (FCM's message object, sent byte for byte with the target added) or its
/// `notification` fields. What Google would refuse with a 400 is refused here, naming the field.
public enum FCMMessage {
    /// Keys and values of `data`, and the notification's title and body, at most (fcm-protocol.md §2.7).
    public static let payloadLimit = 4096
    public static let fanOutPayloadLimit = 2048
    public static let maxTTLSeconds: Int64 = 2_419_200

    /// The message object's fields (both spellings Google accepts); the job names the target.
    static let messageFields: Set<String> = ["data", "notification", "android", "apns", "webpush", "fcm_options", "fcmOptions"]
    static let targetFields: Set<String> = ["token", "topic", "condition", "fid", "name"]

    /// A job's `payload` object, its target filled in.
    public static func request(payload: UnsafeBufferPointer<UInt8>, target: FCMTarget, validateOnly: Bool = false) throws(JobRejection) -> [UInt8] {
        var s = JSONScanner(payload)
        var counted = 0
        var sawObject = false
        do {
            sawObject = try s.peek() == UInt8(ascii: "{")
            if sawObject {
                try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                    let (kind, range) = try s.skipValue()
                    guard !targetFields.contains(key) else { throw s.fail("TARGET:\(key)") }
                    guard messageFields.contains(key) else { throw s.fail("FIELD:\(key)") }
                    if key == "data" || key == "notification" || key == "android" {
                        guard kind == .object else { throw s.fail("TYPE:\(key)") }
                        counted += try measure(UnsafeBufferPointer(rebasing: payload[range]), path: "payload.\(key)")
                    }
                }
                try s.expectEnd()
            }
        } catch {
            throw rejection(error, in: "payload")
        }
        guard sawObject else { throw JobRejection(JobRejection.wrongType, "payload must be an FCM message object for an FCM app") }
        try checkSize(counted, target)
        var w = JSONWriter(capacity: payload.count + 96)
        w.beginObject()
        if validateOnly { w.field("validate_only", true) }
        w.key("message")
        w.beginObject()
        w.field(target.field.name, target.field.value)
        w.endObject()
        // The payload's members follow the target: `{"token":"…"` + `,` + the object's inside.
        let inside = payload.firstIndex(of: UInt8(ascii: "{"))! + 1
        let rest = UnsafeBufferPointer(rebasing: payload[inside...])
        _ = w.bytes.popLast()
        if rest.first(where: { !isJSONSpace($0) }) != UInt8(ascii: "}") { w.bytes.append(UInt8(ascii: ",")) }
        w.bytes.append(contentsOf: rest.reversed().drop(while: isJSONSpace).reversed())
        w.endObject()
        return w.bytes
    }

    /// Counts the bytes of `data` keys and values, and of title and body, inside `object`
    /// (a `data`, `notification` or `android` member), checking `data` as Google does.
    static func measure(_ object: UnsafeBufferPointer<UInt8>, path: String) throws(JSONSyntaxError) -> Int {
        var s = JSONScanner(object)
        var n = 0
        let isData = path.hasSuffix(".data")
        try s.forEachMember { (key, s) throws(JSONSyntaxError) in
            let (kind, range) = try s.skipValue()
            if isData {
                guard kind == .string else { throw s.fail("DATATYPE:\(path).\(key)") }
                guard !isReservedDataKey(key) else { throw s.fail("RESERVED:\(path).\(key)") }
                n += key.utf8.count + range.count - 2
            } else if key == "title" || key == "body" {
                n += range.count - 2
            } else if key == "data" || key == "notification" {
                guard kind == .object else { throw s.fail("TYPE:\(path).\(key)") }
                n += try measure(UnsafeBufferPointer(rebasing: object[range]), path: "\(path).\(key)")
            }
        }
        return n
    }

    /// `from`, `message_type`, `gcm`, and keys starting `google` or `gcm.notification.` (fcm-protocol.md §2.3).
    public static func isReservedDataKey(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key == "gcm" || key.hasPrefix("google") || key.hasPrefix("gcm.notification.")
    }

    static func checkSize(_ counted: Int, _ target: FCMTarget) throws(JobRejection) {
        let limit = target.isFanOut ? fanOutPayloadLimit : payloadLimit
        guard counted <= limit else {
            throw JobRejection(
                APNSReason.payloadTooLarge,
                "the message's data and notification text take \(counted) bytes, over FCM's \(limit) for \(target.isFanOut ? "a topic or condition" : "a token")"
            )
        }
    }

    /// The scanner's coded failures as the job's dead letter.
    static func rejection(_ error: JSONSyntaxError, in what: String) -> JobRejection {
        let m = error.message
        func after(_ prefix: String) -> String? { m.hasPrefix(prefix) ? String(m.dropFirst(prefix.count)) : nil }
        if let key = after("TARGET:") {
            return JobRejection(
                JobRejection.unknownField, "\(what).\(key): the job names the target (token, tokens, topic or condition), not the message")
        }
        if let key = after("FIELD:") {
            return JobRejection(
                JobRejection.unknownField, "\(what).\(key) is not a field of an FCM message (data, notification, android, apns, webpush, fcm_options)"
            )
        }
        if let key = after("TYPE:") { return JobRejection(JobRejection.wrongType, "\(key) must be an object") }
        if let key = after("DATATYPE:") { return JobRejection(JobRejection.wrongType, "\(key) must be a string (FCM's data values are strings)") }
        if let key = after("RESERVED:") {
            return JobRejection(JobRejection.reservedDataKey, "\(key) is a key FCM reserves (from, message_type, gcm, google…, gcm.notification.…)")
        }
        return JobRejection(JobRejection.malformedJSON, "\(what) is not valid JSON: \(error)")
    }
}

func isJSONSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 }

extension JobRejection {
    public static let reservedDataKey = "ReservedDataKey"
}
