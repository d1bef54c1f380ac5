/// A job's `notification` fields as an FCM message for Android (fcm-protocol.md §2.3-2.4, §8):
/// title, body and image in `notification`; `data`; channel, sound, click action, icon, color
/// and tag in `android.notification`; the job's priority, expiration (as `ttl`) and collapse id.
extension FCMMessage {
    public struct Options: Sendable {
        /// The job's `priority`: 10 is `high`, 5 (or 1) `normal`; nil: FCM's default.
        public var priority: Int?
        /// The job's `expiration` (UNIX seconds; 0: now or never); nil: FCM's default of 4 weeks.
        public var expiration: Int64?
        public var collapseID: String?
        public var nowSeconds: Int64
        public var validateOnly = false

        public init(priority: Int?, expiration: Int64?, collapseID: String?, nowSeconds: Int64) {
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.nowSeconds = nowSeconds
        }
    }

    static let notificationFields: Set<String> = ["title", "body", "image"]
    static let androidFields: Set<String> = ["channel_id", "sound", "click_action", "icon", "color", "tag"]
    public static let structuredFieldNames = (notificationFields.union(androidFields).union(["data", "alert"])).sorted()

    public static func request(notification object: UnsafeBufferPointer<UInt8>, target: FCMTarget, options: Options) throws(JobRejection) -> [UInt8] {
        var common: [(String, Range<Int>)] = []
        var android: [(String, Range<Int>)] = []
        var data: Range<Int>?
        var counted = 0
        var s = JSONScanner(object)
        do {
            try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                if key == "alert" {
                    try alert(&s, object, into: &common, counted: &counted)
                    return
                }
                let (kind, range) = try s.skipValue()
                if key == "data" {
                    guard kind == .object else { throw s.fail("TYPE:notification.data") }
                    counted += try measure(UnsafeBufferPointer(rebasing: object[range]), .data, path: "notification.data")
                    data = range
                } else if notificationFields.contains(key) || androidFields.contains(key) {
                    guard kind == .string else { throw s.fail("STRING:notification.\(key)") }
                    if key == "title" || key == "body" { counted += range.count - 2 }
                    if notificationFields.contains(key) { common.append((key, range)) } else { android.append((key, range)) }
                } else {
                    throw s.fail("NOTIFICATION:\(key)")
                }
            }
            try s.expectEnd()
        } catch {
            if let key = error.message.dropPrefix("STRING:") { throw JobRejection(JobRejection.wrongType, "\(key) must be a string") }
            if let key = error.message.dropPrefix("NOTIFICATION:") {
                throw JobRejection(
                    JobRejection.unknownField,
                    "notification.\(key) is not a field of an FCM notification (\(structuredFieldNames.joined(separator: ", ")))")
            }
            throw rejection(error, in: "notification")
        }
        try checkSize(counted, target)
        let ttl = try ttlSeconds(options)
        var w = JSONWriter(capacity: object.count + 160)
        w.beginObject()
        if options.validateOnly { w.field("validate_only", true) }
        w.key("message")
        w.beginObject()
        w.field(target.field.name, target.field.value)
        if !common.isEmpty {
            w.key("notification")
            w.beginObject()
            for (key, range) in common { w.key(key); w.raw(object[range]) }
            w.endObject()
        }
        if let data { w.key("data"); w.raw(object[data]) }
        if options.priority != nil || ttl != nil || options.collapseID != nil || !android.isEmpty {
            w.key("android")
            w.beginObject()
            if let p = options.priority { w.field("priority", p >= 10 ? "high" : "normal") }
            if let ttl { w.field("ttl", "\(ttl)s") }
            w.fieldIfPresent("collapse_key", options.collapseID)
            if !android.isEmpty {
                w.key("notification")
                w.beginObject()
                for (key, range) in android { w.key(key); w.raw(object[range]) }
                w.endObject()
            }
            w.endObject()
        }
        w.endObject()
        w.endObject()
        return w.bytes
    }

    /// `alert` as APNs jobs write it: a string (the body) or `{title, body}`.
    private static func alert(
        _ s: inout JSONScanner, _ object: UnsafeBufferPointer<UInt8>, into common: inout [(String, Range<Int>)], counted: inout Int
    ) throws(JSONSyntaxError) {
        if try s.peek() == UInt8(ascii: "\"") {
            let (_, range) = try s.skipValue()
            common.append(("body", range))
            counted += range.count - 2
            return
        }
        try s.forEachMember { (key, s) throws(JSONSyntaxError) in
            let (kind, range) = try s.skipValue()
            guard key == "title" || key == "body" else { throw s.fail("NOTIFICATION:alert.\(key)") }
            guard kind == .string else { throw s.fail("STRING:notification.alert.\(key)") }
            common.append((key, range))
            counted += range.count - 2
        }
    }

    /// `android.ttl` from the job's expiration: the seconds left, at most 4 weeks.
    static func ttlSeconds(_ options: Options) throws(JobRejection) -> Int64? {
        guard let expiration = options.expiration else { return nil }
        if expiration == 0 { return 0 }
        return min(maxTTLSeconds, max(0, expiration - options.nowSeconds))
    }
}

extension String {
    func dropPrefix(_ prefix: String) -> String? { hasPrefix(prefix) ? String(dropFirst(prefix.count)) : nil }
}
