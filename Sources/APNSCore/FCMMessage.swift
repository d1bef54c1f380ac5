import Buffers

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

    /// A job's `payload` object, its target filled in. Keys are read in place (no String per
    /// key): this runs for every send of an FCM app.
    public static func request(payload: UnsafeBufferPointer<UInt8>, target: FCMTarget, validateOnly: Bool = false) throws(JobRejection) -> [UInt8] {
        var s = JSONScanner(payload)
        var counted = 0
        do {
            guard try s.peek() == UInt8(ascii: "{") else {
                throw JobRejection(JobRejection.wrongType, "payload must be an FCM message object for an FCM app")
            }
            try s.forEachMember(lendingKeys: { (key, s) throws(JSONSyntaxError) in
                let (kind, range) = try s.skipValue()
                let field = MessageField(key)
                switch field {
                case .target: throw s.fail("TARGET:" + String(decoding: key, as: UTF8.self))
                case .unknown: throw s.fail("FIELD:" + String(decoding: key, as: UTF8.self))
                case .other: break
                case .data, .notification, .android:
                    guard kind == .object else { throw s.fail("TYPE:payload." + String(decoding: key, as: UTF8.self)) }
                    counted += try measure(UnsafeBufferPointer(rebasing: payload[range]), field == .data ? .data : .container, path: field.path)
                }
            })
            try s.expectEnd()
        } catch let error as JSONSyntaxError {
            throw rejection(error, in: "payload")
        } catch let error as JobRejection {
            throw error
        } catch {
            throw JobRejection(JobRejection.malformedJSON, "payload: \(error)")
        }
        try checkSize(counted, target)
        var w = JSONWriter(capacity: payload.count + 96)
        w.beginObject()
        if validateOnly { w.field("validate_only", true) }
        w.key("message")
        w.beginObject()
        w.field(target.field.name, target.field.value)
        // The payload's members follow the target: `{"token":"…"` + `,` + the object's inside.
        let inside = payload.firstIndex(of: UInt8(ascii: "{"))! + 1
        let last = payload.lastIndex { !isJSONSpace($0) }!  // the object's closing brace
        let members = UnsafeBufferPointer(rebasing: payload[inside..<last])
        if members.contains(where: { !isJSONSpace($0) }) { w.bytes.append(UInt8(ascii: ",")) }
        w.bytes.append(contentsOf: members)
        w.endObject()
        w.endObject()
        return w.bytes
    }

    /// A message object's field, by its key's bytes.
    enum MessageField: Equatable {
        case target, data, notification, android, other, unknown

        init(_ key: UnsafeBufferPointer<UInt8>) {
            if key.equals("data") {
                self = .data
            } else if key.equals("notification") {
                self = .notification
            } else if key.equals("android") {
                self = .android
            } else if key.equals("apns") || key.equals("webpush") || key.equals("fcm_options") || key.equals("fcmOptions") {
                self = .other
            } else if key.equals("token") || key.equals("topic") || key.equals("condition") || key.equals("fid") || key.equals("name") {
                self = .target
            } else {
                self = .unknown
            }
        }

        var path: String {
            switch self {
            case .data: "payload.data"
            case .notification: "payload.notification"
            default: "payload.android"
            }
        }
    }

    enum Measured { case data, container }

    /// Counts the bytes of `data` keys and values, and of title and body, inside `object`
    /// (a `data` map, or a `notification` or `android` object), checking `data` as Google does.
    /// `path` names the object in errors.
    static func measure(_ object: UnsafeBufferPointer<UInt8>, _ what: Measured, path: @autoclosure () -> String) throws(JSONSyntaxError) -> Int {
        var s = JSONScanner(object)
        var n = 0
        try s.forEachMember(lendingKeys: { (key, s) throws(JSONSyntaxError) in
            let (kind, range) = try s.skipValue()
            switch what {
            case .data:
                guard kind == .string else { throw s.fail("DATATYPE:\(path()).\(String(decoding: key, as: UTF8.self))") }
                guard !isReservedDataKey(key) else { throw s.fail("RESERVED:\(path()).\(String(decoding: key, as: UTF8.self))") }
                n += key.count + range.count - 2
            case .container:
                if key.equals("title") || key.equals("body") {
                    n += range.count - 2
                } else if key.equals("data") || key.equals("notification") {
                    let inner = "\(path()).\(String(decoding: key, as: UTF8.self))"
                    guard kind == .object else { throw s.fail("TYPE:" + inner) }
                    n += try measure(UnsafeBufferPointer(rebasing: object[range]), key.equals("data") ? .data : .container, path: inner)
                }
            }
        })
        return n
    }

    /// `from`, `message_type`, `gcm`, and keys starting `google` or `gcm.notification.` (fcm-protocol.md §2.3).
    public static func isReservedDataKey(_ key: String) -> Bool {
        key.withUTF8Bytes { isReservedDataKey($0) }
    }

    static func isReservedDataKey(_ key: UnsafeBufferPointer<UInt8>) -> Bool {
        key.equals("from") || key.equals("message_type") || key.equals("gcm") || key.starts(with: "google".utf8)
            || key.starts(with: "gcm.notification.".utf8)
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
