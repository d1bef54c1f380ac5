/// The checks APNs makes on a request, with the reason APNs gives (apns-protocol.md §2, §10.7).
///
/// The worker runs them before sending, because every 4xx slows a connection; the mock runs
/// the same rules on what it receives.
public enum RequestRules {
    public static let maxCollapseIDBytes = 64

    /// The header rules; for a raw payload also its size (rendered payloads are checked by the renderer).
    public static func check(job: Job) throws(JobRejection) {
        try checkHeaders(
            pushType: job.pushType, priority: job.effectivePriority, topic: job.topic,
            expiration: job.expiration, collapseID: job.collapseID, apnsID: job.apnsID, broadcast: job.isBroadcast)
        if job.content == .raw { try checkPayload(job.payloadCount, limit: job.maxPayloadBytes, of: job.limitName) }
    }

    public static func checkPayload(_ size: Int, pushType: PushType) throws(JobRejection) {
        try checkPayload(size, limit: pushType.maxPayloadBytes, of: pushType.rawValue)
    }

    /// `name`: what the limit is of, for the error (a push type, or a broadcast).
    public static func checkPayload(_ size: Int, limit: Int, of name: String) throws(JobRejection) {
        if size > limit { throw JobRejection(.payloadTooLarge, "payload is \(size) bytes; the limit for \(name) is \(limit)") }
        if size <= 2 { throw JobRejection(.payloadEmpty, "the payload object is empty") }
    }

    public static func checkHeaders(
        pushType: PushType, priority: Priority, topic: String?, expiration: Int64?,
        collapseID: String?, apnsID: String?, broadcast: Bool = false
    ) throws(JobRejection) {
        if let topic {
            guard !topic.isEmpty, topic.utf8.count <= 255 else {
                throw JobRejection(.badTopic, "topic must be a bundle id")
            }
            if let flaw = headerValueFlaw(topic) { throw JobRejection(.badTopic, "topic holds \(flaw)") }
            if topic.utf8.contains(0x20) { throw JobRejection(.badTopic, "topic holds a space, which no bundle id has") }
            guard pushType.matches(topic: topic) else {
                throw JobRejection(
                    .badTopic, "topic \"\(topic)\" does not fit push type \(pushType) (expected the suffix \"\(pushType.topicSuffix)\")")
            }
        }
        // A broadcast takes 10, 5 or 1 (apns-protocol.md §3.1), where a device's Live Activity push takes 10 or 5.
        guard broadcast || pushType.allows(priority) else {
            throw JobRejection(.badPriority, "priority \(priority.value) is not allowed for push type \(pushType)")
        }
        if let expiration, expiration < 0 || expiration > 0xFFFF_FFFF {
            throw JobRejection(.badExpirationDate, "expiration must be UNIX seconds (0 = deliver once), got \(expiration)")
        }
        if let collapseID, collapseID.utf8.count > maxCollapseIDBytes {
            throw JobRejection(.badCollapseId, "collapse_id is \(collapseID.utf8.count) bytes; the limit is \(maxCollapseIDBytes)")
        }
        if let collapseID, let flaw = headerValueFlaw(collapseID) { throw JobRejection(.badCollapseId, "collapse_id holds \(flaw)") }
        if let apnsID, !UUIDText.isValid(apnsID) {
            throw JobRejection(.badMessageId, "apns_id must be a UUID such as 123e4567-e89b-12d3-a456-4266554400a0")
        }
    }

    /// What keeps `value` from being sent as a header value, or nil. RFC 9113 §8.2.1 forbids NUL,
    /// CR and LF and spaces at either end; a strict server resets a stream for any control
    /// character, and one that drops the connection takes every other stream on it along.
    public static func headerValueFlaw(_ value: String) -> String? {
        for b in value.utf8 where b < 0x20 || b == 0x7F {
            return "the control character U+\(String(b, radix: 16, uppercase: true).leftPadded(to: 4)), which HTTP/2 headers cannot carry"
        }
        if value.utf8.first == 0x20 || value.utf8.last == 0x20 { return "a space at its start or end, which HTTP/2 headers cannot carry" }
        return nil
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
