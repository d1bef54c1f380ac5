/// Renders a job's `notification` fields into an APNs payload (apns-protocol.md §4.2-4.4).
///
/// Field values are checked for type and copied as the producer's JSON text, so strings keep
/// their exact escaping and nothing is decoded and re-encoded.
enum StructuredPayload {
    /// job field → (aps key, expected kind)
    private static let apsFields: [String: (String, JSONKind)] = [
        "badge": ("badge", .number), "thread_id": ("thread-id", .string), "category": ("category", .string),
        "target_content_id": ("target-content-id", .string), "interruption_level": ("interruption-level", .string),
        "relevance_score": ("relevance-score", .number), "filter_criteria": ("filter-criteria", .string),
        "event": ("event", .string), "content_state": ("content-state", .object), "timestamp": ("timestamp", .number),
        "stale_date": ("stale-date", .number), "dismissal_date": ("dismissal-date", .number),
        "attributes_type": ("attributes-type", .string), "attributes": ("attributes", .object),
        "input_push_channel": ("input-push-channel", .string),
    ]
    /// Flags written as the number 1 when true.
    private static let flagFields: [String: String] = [
        "content_available": "content-available", "mutable_content": "mutable-content", "input_push_token": "input-push-token",
    ]
    private static let alertFields: [String: (String, JSONKind)] = [
        "title": ("title", .string), "subtitle": ("subtitle", .string), "body": ("body", .string),
        "launch_image": ("launch-image", .string), "title_loc_key": ("title-loc-key", .string),
        "title_loc_args": ("title-loc-args", .array), "subtitle_loc_key": ("subtitle-loc-key", .string),
        "subtitle_loc_args": ("subtitle-loc-args", .array), "loc_key": ("loc-key", .string), "loc_args": ("loc-args", .array),
    ]
    static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]
    static let events: Set<String> = ["start", "update", "end"]

    static var fieldNames: [String] {
        (Array(apsFields.keys) + Array(flagFields.keys) + ["alert", "sound", "content_changed", "data"]).sorted()
    }

    static func render(_ raw: ArraySlice<UInt8>, _ range: Range<Int>, pushType: PushType) throws(JobRejection) -> [UInt8] {
        var w = JSONWriter(capacity: 512)
        var data: Range<Int>?
        var apsStart = 0
        do {
            try raw.withUnsafeBufferPointer { (all) throws(RenderError) in
                let buf = UnsafeBufferPointer(rebasing: all[range])
                var s = JSONScanner(buf)
                w.beginObject()
                w.key("aps")
                w.beginObject()
                apsStart = w.bytes.count
                if pushType == .widgets || pushType == .controls { w.key("content-changed"); w.bool(true) }
                try eachField(&s) { (key, s) throws(RenderError) in
                    if let (apsKey, kind) = apsFields[key] {
                        let v = try value(&s, key, kind)
                        try checkEnum(key, buf, v)
                        w.key(apsKey)
                        w.raw(buf[v])
                    } else if let apsKey = flagFields[key] {
                        if try wrap({ () throws(JSONSyntaxError) in try s.peek() }) == UInt8(ascii: "t") { w.key(apsKey); w.int(1) }
                        _ = try value(&s, key, .bool)
                    } else if key == "content_changed" {
                        _ = try value(&s, key, .bool)
                    } else if key == "alert" {
                        try alert(&s, buf, &w)
                    } else if key == "sound" {
                        try sound(&s, buf, &w)
                    } else if key == "data" {
                        let v = try value(&s, key, .object)
                        data = (v.lowerBound + range.lowerBound)..<(v.upperBound + range.lowerBound)
                    } else {
                        throw RenderError(
                            JobRejection.unknownField, "unknown notification field \"\(key)\" (known: \(fieldNames.joined(separator: ", ")))")
                    }
                }
                w.endObject()
            }
        } catch {
            throw JobRejection(error.reason, error.detail)
        }
        if pushType == .mdm, w.bytes.count == apsStart + 1 {
            // MDM pushes carry no aps dictionary, only {"mdm": "<PushMagic>"} (from `data`).
            w = JSONWriter(capacity: 128)
            w.beginObject()
        }
        if let data { try customData(raw, data, &w) }
        w.endObject()
        return w.bytes
    }

    /// Custom keys go beside `aps`, never inside it.
    private static func customData(_ raw: ArraySlice<UInt8>, _ range: Range<Int>, _ w: inout JSONWriter) throws(JobRejection) {
        do {
            try raw.withUnsafeBufferPointer { (all) throws(RenderError) in
                let buf = UnsafeBufferPointer(rebasing: all[range])
                var s = JSONScanner(buf)
                try eachField(&s) { (key, s) throws(RenderError) in
                    guard key != "aps" else { throw RenderError(JobRejection.wrongType, "notification.data must not contain \"aps\"") }
                    let v = try wrap { () throws(JSONSyntaxError) in try s.skipValue().range }
                    w.key(key)
                    w.raw(buf[v])
                }
            }
        } catch {
            throw JobRejection(error.reason, error.detail)
        }
    }

    private static func alert(_ s: inout JSONScanner, _ buf: UnsafeBufferPointer<UInt8>, _ w: inout JSONWriter) throws(RenderError) {
        w.key("alert")
        if try wrap({ () throws(JSONSyntaxError) in try s.peek() }) == UInt8(ascii: "\"") {
            w.raw(buf[try value(&s, "alert", .string)])
            return
        }
        guard try wrap({ () throws(JSONSyntaxError) in try s.peek() }) == UInt8(ascii: "{") else {
            throw RenderError(JobRejection.wrongType, "notification.alert must be a string or an object")
        }
        w.beginObject()
        try eachField(&s) { (key, s) throws(RenderError) in
            guard let (apsKey, kind) = alertFields[key] else {
                throw RenderError(
                    JobRejection.unknownField,
                    "unknown notification.alert field \"\(key)\" (known: \(alertFields.keys.sorted().joined(separator: ", ")))")
            }
            let v = try value(&s, "alert.\(key)", kind)
            w.key(apsKey)
            w.raw(buf[v])
        }
        w.endObject()
    }

    /// A sound name, or the critical-alert dictionary `{"critical":1,"name":…,"volume":0-1}`.
    private static func sound(_ s: inout JSONScanner, _ buf: UnsafeBufferPointer<UInt8>, _ w: inout JSONWriter) throws(RenderError) {
        w.key("sound")
        let first = try wrap { () throws(JSONSyntaxError) in try s.peek() }
        if first == UInt8(ascii: "\"") {
            w.raw(buf[try value(&s, "sound", .string)])
            return
        }
        guard first == UInt8(ascii: "{") else { throw RenderError(JobRejection.wrongType, "notification.sound must be a string or an object") }
        w.beginObject()
        try eachField(&s) { (key, s) throws(RenderError) in
            switch key {
            case "critical":
                let on = try wrap { () throws(JSONSyntaxError) in try s.peek() } == UInt8(ascii: "t")
                _ = try value(&s, "sound.critical", .bool)
                w.key("critical"); w.int(on ? 1 : 0)
            case "name":
                w.key("name"); w.raw(buf[try value(&s, "sound.name", .string)])
            case "volume":
                let v = try value(&s, "sound.volume", .number)
                guard let volume = Double(String(decoding: buf[v], as: UTF8.self)), (0...1).contains(volume) else {
                    throw RenderError(JobRejection.wrongType, "notification.sound.volume must be between 0 and 1")
                }
                w.key("volume"); w.raw(buf[v])
            default:
                throw RenderError(JobRejection.unknownField, "unknown notification.sound field \"\(key)\" (known: critical, name, volume)")
            }
        }
        w.endObject()
    }

    private static func checkEnum(_ key: String, _ buf: UnsafeBufferPointer<UInt8>, _ v: Range<Int>) throws(RenderError) {
        let allowed: Set<String>
        switch key {
        case "interruption_level": allowed = interruptionLevels
        case "event": allowed = events
        default: return
        }
        let text = String(decoding: buf[(v.lowerBound + 1)..<(v.upperBound - 1)], as: UTF8.self)
        guard allowed.contains(text) else {
            throw RenderError(
                JobRejection.wrongType, "notification.\(key) must be one of \(allowed.sorted().joined(separator: ", ")), got \"\(text)\"")
        }
    }

    /// Checks the next value's kind and returns its byte range.
    private static func value(_ s: inout JSONScanner, _ key: String, _ kind: JSONKind) throws(RenderError) -> Range<Int> {
        let (found, range) = try wrap { () throws(JSONSyntaxError) in try s.skipValue() }
        guard found == kind else {
            throw RenderError(JobRejection.wrongType, "notification.\(key) must be \(kind.withArticle), not \(found.withArticle)")
        }
        return range
    }

    static func eachField(_ s: inout JSONScanner, _ body: (String, inout JSONScanner) throws(RenderError) -> Void) throws(RenderError) {
        try wrap { () throws(JSONSyntaxError) in try s.expect(UInt8(ascii: "{")) }
        if try wrap({ () throws(JSONSyntaxError) in try s.consume(UInt8(ascii: "}")) }) { return }
        repeat {
            let key = try wrap { () throws(JSONSyntaxError) in try s.readString() }
            try wrap { () throws(JSONSyntaxError) in try s.expect(UInt8(ascii: ":")) }
            try body(key, &s)
        } while try wrap({ () throws(JSONSyntaxError) in try s.consume(UInt8(ascii: ",")) })
        try wrap { () throws(JSONSyntaxError) in try s.expect(UInt8(ascii: "}")) }
    }

    static func wrap<T>(_ body: () throws(JSONSyntaxError) -> T) throws(RenderError) -> T {
        do { return try body() } catch { throw RenderError(JobRejection.malformedJSON, "notification: \(error)") }
    }
}

/// A rendering failure, carried out of byte-buffer closures as one typed error.
struct RenderError: Error {
    let reason: String
    let detail: String
    init(_ reason: String, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}
