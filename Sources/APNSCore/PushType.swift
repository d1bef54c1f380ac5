import Buffers

/// `apns-push-type` values with their topic suffix and priority rules (apns-protocol.md §2.2).
public struct PushType: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    /// Appended to the bundle id to form `apns-topic`.
    public let topicSuffix: String
    /// Which of `all` this is: compared and hashed instead of the strings, since every push
    /// type is one of the list (a job's is checked several times on the way to APNs).
    private let code: UInt8
    public var description: String { rawValue }

    public static let alert = PushType(rawValue: "alert", topicSuffix: "", code: 0)
    public static let background = PushType(rawValue: "background", topicSuffix: "", code: 1)
    public static let voip = PushType(rawValue: "voip", topicSuffix: ".voip", code: 2)
    public static let complication = PushType(rawValue: "complication", topicSuffix: ".complication", code: 3)
    public static let fileprovider = PushType(rawValue: "fileprovider", topicSuffix: ".pushkit.fileprovider", code: 4)
    public static let liveactivity = PushType(rawValue: "liveactivity", topicSuffix: ".push-type.liveactivity", code: 5)
    public static let location = PushType(rawValue: "location", topicSuffix: ".location-query", code: 6)
    public static let mdm = PushType(rawValue: "mdm", topicSuffix: "", code: 7)
    public static let pushtotalk = PushType(rawValue: "pushtotalk", topicSuffix: ".voip-ptt", code: 8)
    public static let widgets = PushType(rawValue: "widgets", topicSuffix: ".push-type.widgets", code: 9)
    public static let controls = PushType(rawValue: "controls", topicSuffix: ".push-type.controls", code: 10)

    public static let all: [PushType] = [
        .alert, .background, .voip, .complication, .fileprovider, .liveactivity,
        .location, .mdm, .pushtotalk, .widgets, .controls,
    ]

    public init?(_ name: String) {
        guard let known = PushType.all.first(where: { $0.rawValue == name }) else { return nil }
        self = known
    }

    private init(rawValue: String, topicSuffix: String, code: UInt8) {
        self.rawValue = rawValue
        self.topicSuffix = topicSuffix
        self.code = code
    }

    public static func == (a: PushType, b: PushType) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The payload limit of apns-protocol.md §4.1.
    public var maxPayloadBytes: Int { self == .voip ? 5120 : 4096 }

    /// Priorities this push type accepts; background must not be 10, push-to-talk must be 10.
    public func allows(_ priority: Priority) -> Bool {
        switch self {
        case .background: return priority != .immediate
        case .pushtotalk: return priority == .immediate
        case .liveactivity: return priority != .low
        default: return true
        }
    }

    /// The priority used when a job gives none.
    public var defaultPriority: Priority { self == .background ? .conserve : .immediate }

    /// The topic for a bundle id. MDM topics are the certificate's UID and take no suffix.
    public func topic(forBundle bundle: String) -> String { topicSuffix.isEmpty ? bundle : bundle + topicSuffix }

    /// Whether `topic` has the suffix this push type requires.
    public func matches(topic: String) -> Bool {
        if self == .mdm { return true }
        return topic.withUTF8Bytes { t in
            if topicSuffix.isEmpty {
                // A plain bundle topic must not carry another push type's suffix.
                return Self.suffixes.bytes.withUnsafeBufferPointer { all in
                    !Self.suffixes.ranges.contains { Self.endsWith(t, UnsafeBufferPointer(rebasing: all[$0])) }
                }
            }
            return topicSuffix.withUTF8Bytes { s in Self.endsWith(t, s) && t.count > s.count }
        }
    }

    /// Whether `topic` is `bundle` itself or one of its push-type topics (`<bundle>.voip`, …,
    /// apns-protocol.md §2.2): what a topic key for `bundle` serves. `<bundle>.clip` (an App Clip
    /// or an extension) is a bundle of its own, not one of these.
    public static func isTopic(_ topic: String, ofBundle bundle: String) -> Bool {
        let t = topic.utf8, b = bundle.utf8
        guard t.count >= b.count, t.starts(with: b) else { return false }
        let rest = t.dropFirst(b.count)
        return rest.isEmpty || all.contains { !$0.topicSuffix.isEmpty && rest.elementsEqual($0.topicSuffix.utf8) }
    }

    /// Every push type's topic suffix, end to end, and the range of each: the check of a plain
    /// topic reads them in place, without copying each push type's strings.
    private static let suffixes: (bytes: [UInt8], ranges: [Range<Int>]) = {
        var bytes: [UInt8] = [], ranges: [Range<Int>] = []
        for type in all where !type.topicSuffix.isEmpty {
            let start = bytes.count
            bytes.append(contentsOf: type.topicSuffix.utf8)
            ranges.append(start..<bytes.count)
        }
        return (bytes, ranges)
    }()

    /// By UTF-8 bytes: the suffixes are ASCII and start with a dot, so this agrees with
    /// `hasSuffix`, which compares characters.
    private static func endsWith(_ text: UnsafeBufferPointer<UInt8>, _ suffix: UnsafeBufferPointer<UInt8>) -> Bool {
        text.count >= suffix.count && UnsafeBufferPointer(rebasing: text[(text.count - suffix.count)...]).elementsEqual(suffix)
    }
}

/// `apns-priority`: 10 immediate, 5 power-aware, 1 power-first.
public struct Priority: Hashable, Sendable {
    public let value: Int
    public static let immediate = Priority(checked: 10)
    public static let conserve = Priority(checked: 5)
    public static let low = Priority(checked: 1)

    public init?(_ value: Int64) {
        guard value == 10 || value == 5 || value == 1 else { return nil }
        self.value = Int(value)
    }
    private init(checked: Int) { value = checked }
}
