/// What a channel keeps for devices that come online later (apns-protocol.md §3.2): nothing, or
/// the latest message for up to 8 hours. Its raw value is `message-storage-policy`.
public enum ChannelStorage: Int, Sendable, CaseIterable {
    case none = 0
    case mostRecent = 1

    /// The job's and apnsctl's name for it.
    public var name: String { self == .none ? "none" : "most-recent" }
    public init?(name: String) {
        guard let found = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = found
    }
}

/// The rules of a broadcast push, `POST /4/broadcasts/apps/<bundle id>` (apns-protocol.md §3.1):
/// a Live Activity update or end to a channel, 5 KB at most, no topic and no collapse id, and
/// `apns-expiration` 0 on a channel that stores nothing.
public enum BroadcastRules {
    public static let maxPayloadBytes = 5120
    /// Sent when the job gives none: 0 suits every channel, where a time suits only one that stores.
    public static let defaultExpiration: Int64 = 0

    /// The checks a broadcast job's fields get, with the reason APNs would give.
    static func check(
        channel: String, pushType: String?, topic: String?, collapseID: String?, expiration: Int64?, storage: ChannelStorage?
    ) throws(JobRejection) {
        guard isChannelID(channel) else {
            throw JobRejection(.badChannelId, "channel must be a channel id as channel creation gave it: base64")
        }
        if let pushType, pushType != PushType.liveactivity.rawValue {
            throw JobRejection(.invalidPushType, "a broadcast is a liveactivity push, not \(pushType)")
        }
        if topic != nil {
            throw JobRejection(.topicDisallowed, "a broadcast names no topic: it goes to the app's bundle id")
        }
        if collapseID != nil {
            throw JobRejection(.badRequestParams, "a broadcast takes no collapse_id")
        }
        if storage == ChannelStorage.none, let expiration, expiration != 0 {
            throw JobRejection(
                .badExpirationDate, "a channel that stores no messages takes expiration 0 (or none), not \(expiration)")
        }
    }

    /// A channel id as APNs hands them out: base64, of no length Apple promises.
    public static func isChannelID(_ id: String) -> Bool {
        guard !id.isEmpty, id.utf8.count % 4 == 0, id.utf8.count <= 1024 else { return false }
        let body = Array(id.utf8)
        let padding = body.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return false }
        return body.dropLast(padding).allSatisfy { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == UInt8(ascii: "+") || b == UInt8(ascii: "/")
        }
    }
}
