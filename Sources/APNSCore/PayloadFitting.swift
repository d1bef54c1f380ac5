/// Makes a payload agree with its push type, and fits it into the size limit.
enum PayloadFitting {
    /// The `aps` keys of a payload (one pass; nothing is decoded but key names).
    static func apsKeys(_ payload: ArraySlice<UInt8>) -> [String]? {
        payload.withContiguousStorageIfAvailable { buf -> [String]? in
            var s = JSONScanner(buf)
            var keys: [String]?
            do {
                try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                    if key == "aps", try s.peek() == UInt8(ascii: "{") {
                        var found: [String] = []
                        try s.forEachMember { (k, s) throws(JSONSyntaxError) in
                            found.append(k)
                            try s.skipValue()
                        }
                        keys = found
                    } else {
                        try s.skipValue()
                    }
                }
            } catch {
                return nil
            }
            return keys
        } ?? nil
    }

    /// Push types whose payload has rules (apns-protocol.md §2.2, §4.2).
    /// Borrows the payload: most push types have no rules, and a raw job's payload is part of
    /// the buffer its batch shares.
    static func checkAgreement(_ payload: UnsafeRawBufferPointer, pushType: PushType, broadcast: Bool = false) throws(JobRejection) {
        let required: Set<String>
        switch pushType {
        case .background: required = ["content-available"]
        case .liveactivity: required = ["event", "timestamp"]
        case .widgets, .controls: required = ["content-changed"]
        default: return
        }
        let keys = Set(apsKeys(ArraySlice(payload)) ?? [])
        if let missing = required.subtracting(keys).sorted().first {
            throw JobRejection(JobRejection.badPayloadForPushType, "a \(pushType) push needs aps.\(missing)")
        }
        if pushType == .background, let extra = keys.subtracting(required).sorted().first {
            throw JobRejection(JobRejection.badPayloadForPushType, "a background push carries content-available only; remove aps.\(extra)")
        }
        if pushType == .liveactivity { try LiveActivityRules.check(payload, broadcast: broadcast) }
    }

    /// Shortens the alert body (aps.alert.body, or a string aps.alert) so the payload fits in
    /// `limit` bytes, cutting at a character boundary and ending with "…". Nil if it cannot.
    static func truncateBody(_ payload: [UInt8], limit: Int) -> [UInt8]? {
        guard payload.count > limit, let range = bodyRange(payload) else { return nil }
        let body = payload.withUnsafeBufferPointer { buf -> String? in
            var s = JSONScanner(UnsafeBufferPointer(rebasing: buf[range]))
            return try? s.readString()
        }
        guard let body else { return nil }
        let budget = range.count - (payload.count - limit)
        let characters = Array(body)
        // The longest prefix whose escaped form plus the ellipsis fits the budget.
        var low = 0, high = characters.count
        func escapedCount(_ n: Int) -> Int {
            var out: [UInt8] = []
            JSONWriter.appendEscaped(String(characters[0..<n]) + "…", to: &out)
            return out.count
        }
        guard escapedCount(0) <= budget else { return nil }
        while low < high {
            let mid = (low + high + 1) / 2
            if escapedCount(mid) <= budget { low = mid } else { high = mid - 1 }
        }
        var replacement: [UInt8] = []
        JSONWriter.appendEscaped(String(characters[0..<low]) + "…", to: &replacement)
        return Array(payload[..<range.lowerBound]) + replacement + Array(payload[range.upperBound...])
    }

    /// The byte range of the alert body's JSON string.
    static func bodyRange(_ payload: [UInt8]) -> Range<Int>? {
        payload.withUnsafeBufferPointer { buf -> Range<Int>? in
            var s = JSONScanner(buf)
            var found: Range<Int>?
            func into(_ name: String, _ s: inout JSONScanner, _ body: (inout JSONScanner) throws(JSONSyntaxError) -> Void) throws(JSONSyntaxError) {
                try s.forEachMember { (key, s) throws(JSONSyntaxError) in
                    if key == name { try body(&s) } else { try s.skipValue() }
                }
            }
            do {
                try into("aps", &s) { (s) throws(JSONSyntaxError) in
                    guard try s.peek() == UInt8(ascii: "{") else { try s.skipValue(); return }
                    try into("alert", &s) { (s) throws(JSONSyntaxError) in
                        let c = try s.peek()
                        if c == UInt8(ascii: "\"") {
                            found = try s.skipValue().range
                        } else if c == UInt8(ascii: "{") {
                            try into("body", &s) { (s) throws(JSONSyntaxError) in
                                let (kind, r) = try s.skipValue()
                                if kind == .string { found = r }
                            }
                        } else {
                            try s.skipValue()
                        }
                    }
                }
            } catch {
                return nil
            }
            return found
        }
    }
}
