/// What a Live Activity push's `aps` must hold (apns-protocol.md §4.2, Apple's "Starting and
/// updating Live Activities with ActivityKit push notifications"): an `event` of start, update or
/// end; and a push-to-start (`start`) its `attributes-type`, `attributes`, `content-state` and
/// `alert`, with `input-push-token: 1` or an `input-push-channel` id if it asks for either.
/// Checked on the bytes sent, so raw and structured jobs alike.
enum LiveActivityRules {
    /// `broadcast`: a channel's push, which can update or end an activity but not start one.
    static func check(_ payload: UnsafeRawBufferPointer, broadcast: Bool = false) throws(JobRejection) {
        guard let aps = members(payload) else { return }  // not an object: the other checks say so
        func fail(_ detail: String) -> JobRejection { JobRejection(JobRejection.badPayloadForPushType, detail) }
        guard let event = aps["event"], event.kind == .string, let name = text(payload, event.range),
            StructuredPayload.events.contains(name)
        else {
            throw fail("a liveactivity push's aps.event is \"start\", \"update\" or \"end\"")
        }
        guard name == "start" else { return }
        if broadcast { throw fail("a broadcast updates or ends a Live Activity (aps.event \"update\" or \"end\"); it cannot start one") }
        guard let type = aps["attributes-type"], type.kind == .string, text(payload, type.range)?.isEmpty == false else {
            throw fail("a push-to-start needs aps.attributes-type: the name of its ActivityAttributes type")
        }
        guard aps["attributes"]?.kind == .object else { throw fail("a push-to-start needs aps.attributes, an object of the static attributes") }
        guard aps["content-state"]?.kind == .object else { throw fail("a push-to-start needs aps.content-state, the activity's first state") }
        guard let alert = aps["alert"]?.kind, alert == .object || alert == .string else {
            throw fail("a push-to-start needs aps.alert, which the device shows as the activity starts")
        }
        if let token = aps["input-push-token"], token.kind != .number || text(payload, token.range) != "1" {
            throw fail("aps.input-push-token asks for an update token with the number 1, and nothing else")
        }
        if let channel = aps["input-push-channel"] {
            guard channel.kind == .string, let id = text(payload, channel.range), BroadcastRules.isChannelID(id) else {
                throw fail("aps.input-push-channel is a broadcast channel id: base64, as channel creation gave it")
            }
        }
    }

    /// The `aps` members: each key's value kind and byte range. Nil if the payload is not an
    /// object with an `aps` object.
    private static func members(_ payload: UnsafeRawBufferPointer) -> [String: (kind: JSONKind, range: Range<Int>)]? {
        var s = JSONScanner(payload.bindMemory(to: UInt8.self))
        var found: [String: (kind: JSONKind, range: Range<Int>)]?
        do {
            try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                guard key == "aps", try s.peek() == UInt8(ascii: "{") else {
                    _ = try s.skipValue()
                    return
                }
                var aps: [String: (kind: JSONKind, range: Range<Int>)] = [:]
                try s.forEachMember { (k, s) throws(JSONSyntaxError) in aps[k] = try s.skipValue() }
                found = aps
            }
        } catch {
            return nil
        }
        return found
    }

    /// A string value's text, or a number's digits, at `range`.
    private static func text(_ payload: UnsafeRawBufferPointer, _ range: Range<Int>) -> String? {
        let bytes = payload.bindMemory(to: UInt8.self)
        var s = JSONScanner(UnsafeBufferPointer(rebasing: bytes[range]))
        if bytes[range.lowerBound] == UInt8(ascii: "\"") { return try? s.readString() }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }
}
