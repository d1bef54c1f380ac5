import APNSCore

/// The mock FCM's checks of a `SendMessageRequest` body (fcm-protocol.md §7, checks 6-14):
/// known fields in either spelling, one target, data of strings without reserved keys, a valid
/// TTL, priority and color, and the size limits.
enum MockFCMMessage {
    enum Checked {
        case valid(FCMTarget, validateOnly: Bool, package: String?)
        case invalid(String, field: String?)
    }

    static let messageFields: Set<String> = [
        "token", "topic", "condition", "fid", "name", "data", "notification", "android", "apns", "webpush", "fcm_options", "fcmOptions",
    ]
    static let androidFields: Set<String> = [
        "collapse_key", "collapseKey", "priority", "ttl", "restricted_package_name", "restrictedPackageName", "data", "notification",
        "fcm_options", "fcmOptions", "direct_boot_ok", "directBootOk", "bandwidth_constrained_ok", "restricted_satellite_ok",
    ]
    static let notificationFields: Set<String> = ["title", "body", "image"]

    static func check(_ body: [UInt8]) -> Checked {
        guard let json = try? JSONValue.parse(body), case .object(let top) = json else {
            return .invalid("Invalid JSON payload received. Expected an object.", field: nil)
        }
        for key in top.keys where !["message", "validate_only", "validateOnly"].contains(key) {
            return .invalid("Invalid JSON payload received. Unknown name \"\(key)\": Cannot find field.", field: key)
        }
        guard case .object(let message)? = top["message"] else { return .invalid("Message is required", field: "message") }
        for key in message.keys where !messageFields.contains(key) {
            return .invalid("Invalid JSON payload received. Unknown name \"\(key)\" at 'message': Cannot find field.", field: "message.\(key)")
        }
        let targets = ["token", "topic", "condition", "fid"].filter { message[$0] != nil }
        guard targets.count == 1, let targetText = message[targets[0]]?.string else {
            return .invalid("Exactly one of token, topic, condition or fid must be given", field: "message")
        }
        let target: FCMTarget =
            switch targets[0] {
            case "topic": .topic(targetText)
            case "condition": .condition(targetText)
            default: .token(targetText)
            }
        if case .topic(let t) = target, t.hasPrefix("/topics/") || t.isEmpty || !t.allSatisfy(isTopicCharacter) {
            return .invalid("Invalid topic name", field: "message.topic")
        }
        var counted = 0
        if let failure = checkData(message["data"], path: "message.data", counted: &counted) { return failure }
        if let notification = message["notification"] {
            guard case .object(let n) = notification else { return .invalid("notification must be an object", field: "message.notification") }
            for (key, value) in n {
                guard notificationFields.contains(key), let text = value.string else {
                    return .invalid("Invalid value at 'message.notification.\(key)'", field: "message.notification.\(key)")
                }
                if key != "image" { counted += text.utf8.count }
            }
        }
        if let android = message["android"] {
            guard case .object(let a) = android else { return .invalid("android must be an object", field: "message.android") }
            for key in a.keys where !androidFields.contains(key) {
                return .invalid(
                    "Invalid JSON payload received. Unknown name \"\(key)\" at 'message.android': Cannot find field.", field: "message.android.\(key)"
                )
            }
            if let failure = checkData(a["data"], path: "message.android.data", counted: &counted) { return failure }
            if let ttl = a["ttl"], !isValidTTL(ttl) { return .invalid("Invalid TTL", field: "message.android.ttl") }
            if let p = a["priority"], !["normal", "high", "NORMAL", "HIGH"].contains(p.string ?? "") {
                return .invalid("Invalid value at 'message.android.priority'", field: "message.android.priority")
            }
            if case .object(let n)? = a["notification"], let color = n["color"],
                !(color.string.map { $0.count == 7 && $0.hasPrefix("#") && $0.dropFirst().allSatisfy(\.isHexDigit) } ?? false)
            {
                return .invalid("Invalid color", field: "message.android.notification.color")
            }
        }
        if let failure = checkAPNs(message) { return failure }
        let limit = target.isFanOut ? 2048 : 4096
        guard counted <= limit else { return .invalid("Message is too big", field: nil) }
        let validateOnly = (top["validate_only"] ?? top["validateOnly"]) == .bool(true)
        let package = (message["android"]?["restricted_package_name"] ?? message["android"]?["restrictedPackageName"])?.string
        return .valid(target, validateOnly: validateOnly, package: package)
    }

    /// `apns` (check 14): header values are strings, and a data-only message (no notification,
    /// no alert in `apns.payload`) may only ask Apple for priority 5.
    private static func checkAPNs(_ message: [String: JSONValue]) -> Checked? {
        guard let apns = message["apns"] else { return nil }
        guard case .object(let a) = apns else { return .invalid("apns must be an object", field: "message.apns") }
        guard let headers = a["headers"] else { return nil }
        guard case .object(let h) = headers else { return .invalid("apns.headers must be a map of strings", field: "message.apns.headers") }
        for (key, value) in h where value.string == nil {
            return .invalid("Invalid value at 'message.apns.headers[\(key)]' (TYPE_STRING)", field: "message.apns.headers.\(key)")
        }
        let alert = a["payload"]?["aps"]?["alert"] != nil
        if message["notification"] == nil, !alert, h["apns-priority"]?.string == "10" {
            return .invalid("Data-only messages to iOS must use apns-priority 5", field: "message.apns.headers.apns-priority")
        }
        return nil
    }

    private static func checkData(_ data: JSONValue?, path: String, counted: inout Int) -> Checked? {
        guard let data else { return nil }
        guard case .object(let d) = data else { return .invalid("\(path) must be a map of strings", field: path) }
        for (key, value) in d {
            guard let text = value.string else { return .invalid("Invalid value at '\(path)[\(key)]' (TYPE_STRING)", field: "\(path).\(key)") }
            guard !FCMMessage.isReservedDataKey(key) else { return .invalid("Invalid data payload key: \(key)", field: "\(path).\(key)") }
            counted += key.utf8.count + text.utf8.count
        }
        return nil
    }

    /// `^\d+(\.\d{1,9})?s$`, at most 4 weeks.
    static func isValidTTL(_ value: JSONValue) -> Bool {
        guard let text = value.string, text.hasSuffix("s") else { return false }
        let number = text.dropLast().split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(number.count), !number[0].isEmpty, number[0].allSatisfy(\.isASCII), number[0].allSatisfy(\.isNumber),
            number.count == 1 || (1...9).contains(number[1].count) && number[1].allSatisfy { $0.isASCII && $0.isNumber },
            let seconds = Int64(number[0])
        else { return false }
        return seconds <= FCMMessage.maxTTLSeconds
    }

    static func isTopicCharacter(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber || "-_.~%".contains(c)) }

    /// The mock's rule for a registration token: 8 to 4096 of letters, digits and `-_:.`.
    static func isTokenShaped(_ token: String) -> Bool {
        (8...4096).contains(token.utf8.count) && token.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_:.".contains($0)) }
    }
}
