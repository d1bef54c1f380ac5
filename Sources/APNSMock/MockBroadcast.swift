import APNSCore
import Foundation
import Synchronization

/// The channels the mock's apps have (apns-protocol.md §3.2): made, read and deleted on the
/// management listener, sent to on the push one. A deleted id is never handed out again.
final class MockChannels: Sendable {
    private let byBundle = Mutex<[String: [String: ChannelStorage]]>([:])
    let limit: Int

    init(limit: Int) { self.limit = limit }

    /// A new channel's id, or nil when the app has `limit` already.
    func create(bundle: String, storage: ChannelStorage) -> String? {
        byBundle.withLock { all in
            guard all[bundle, default: [:]].count < limit else { return nil }
            var id: String
            repeat {
                var rng = SystemRandomNumberGenerator()
                id = Data((0..<16).map { _ in UInt8.random(in: 0...255, using: &rng) }).base64EncodedString()
            } while all.values.contains { $0[id] != nil }
            all[bundle, default: [:]][id] = storage
            return id
        }
    }

    func storage(bundle: String, id: String) -> ChannelStorage? { byBundle.withLock { $0[bundle]?[id] } }
    func delete(bundle: String, id: String) -> Bool { byBundle.withLock { $0[bundle]?.removeValue(forKey: id) != nil } }
    func all(bundle: String) -> [String] { byBundle.withLock { ($0[bundle] ?? [:]).keys.sorted() } }
}

/// Apple's checks of a broadcast and of a channel-management request, auth first (A-BCAST, A-CHAN, A-BERR).
extension MockValidator {
    static let broadcastPrefix = "/4/broadcasts/apps/"

    /// `POST /4/broadcasts/apps/<bundle>`.
    func decideBroadcast(_ request: MockRequest, path: String, auth: inout ConnectionAuth, channels: MockChannels) -> MockDecision {
        var decision = broadcast(request, path: path, auth: &auth, channels: channels)
        decision.idHeader = .requestID
        return decision
    }

    private func broadcast(_ request: MockRequest, path: String, auth: inout ConnectionAuth, channels: MockChannels) -> MockDecision {
        if request.hasDuplicateNames { return .reject(400, .duplicateHeaders) }
        guard request.value(":method", is: "POST") else { return .reject(405, .methodNotAllowed) }
        let bundle = String(path.dropFirst(Self.broadcastPrefix.count))
        guard !bundle.isEmpty, !bundle.contains("/") else { return .reject(404, .badPath) }
        if let refused = authorize(request, bundle: bundle, auth: &auth) { return refused }
        if request.value("apns-topic") != nil { return .reject(400, .topicDisallowed) }
        if disabledBroadcasts.contains(bundle) { return .reject(400, .featureNotEnabled) }
        guard let pushType = request.value("apns-push-type") else { return .reject(400, .missingPushType) }
        guard pushType == PushType.liveactivity.rawValue else { return .reject(400, .invalidPushType) }
        guard let channel = request.value("apns-channel-id") else { return .reject(400, .missingChannelId) }
        guard BroadcastRules.isChannelID(channel) else { return .reject(400, .badChannelId) }
        guard let storage = channels.storage(bundle: bundle, id: channel) else { return .reject(400, .channelNotRegistered) }
        if let text = request.value("apns-priority") {
            guard let value = Int64(text), Priority(value) != nil else { return .reject(400, .badPriority) }
        }
        guard let text = request.value("apns-expiration"), let expiration = Int64(text), expiration >= 0 else {
            return .reject(400, .badExpirationDate)
        }
        if storage == .none, expiration != 0 { return .reject(400, .badExpirationDate) }
        if let id = request.value("apns-request-id"), !UUIDText.isValid(id) { return .reject(400, .badMessageId) }
        if request.bodyCount == 0 { return .reject(400, .payloadEmpty) }
        if request.bodyCount > BroadcastRules.maxPayloadBytes { return .reject(413, .payloadTooLarge) }
        let event = request.withBody { Self.apsEvent(UnsafeRawBufferPointer($0)) }
        // A broadcast updates or ends an activity; it cannot start one (A-LA).
        guard event == "update" || event == "end" else { return .reject(400, .badRequestPayload) }
        return .accepted
    }

    /// `/1/apps/<bundle>/channels` (create, read, delete) and `/1/apps/<bundle>/all-channels` (list).
    func decideManagement(_ request: MockRequest, auth: inout ConnectionAuth, channels: MockChannels) -> MockDecision {
        var decision = management(request, auth: &auth, channels: channels)
        decision.idHeader = .requestID
        return decision
    }

    private func management(_ request: MockRequest, auth: inout ConnectionAuth, channels: MockChannels) -> MockDecision {
        if request.hasDuplicateNames { return .reject(400, .duplicateHeaders) }
        let parts = (request.value(":path") ?? "").split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "1", parts[2] == "apps", !parts[3].isEmpty,
            parts[4] == "channels" || parts[4] == "all-channels"
        else { return .reject(404, .badPath) }
        let bundle = String(parts[3])
        if let refused = authorize(request, bundle: bundle, auth: &auth) { return refused }
        if disabledBroadcasts.contains(bundle) { return .reject(400, .featureNotEnabled) }
        let method = request.value(":method") ?? ""
        if parts[4] == "all-channels" {
            guard method == "GET" else { return .reject(405, .methodNotAllowed) }
            var w = JSONWriter(capacity: 64)
            w.beginObject()
            w.key("channels")
            w.beginArray()
            for id in channels.all(bundle: bundle) { w.string(id) }
            w.endArray()
            w.endObject()
            return MockDecision(status: 200, body: w.bytes)
        }
        if method == "POST" { return create(request, bundle: bundle, channels: channels) }
        guard method == "GET" || method == "DELETE" else { return .reject(405, .methodNotAllowed) }
        guard let id = request.value("apns-channel-id") else { return .reject(400, .missingChannelId) }
        guard BroadcastRules.isChannelID(id) else { return .reject(400, .badChannelId) }
        if method == "DELETE" { return channels.delete(bundle: bundle, id: id) ? MockDecision(status: 204) : .reject(400, .channelNotRegistered) }
        guard let storage = channels.storage(bundle: bundle, id: id) else { return .reject(400, .channelNotRegistered) }
        var w = JSONWriter(capacity: 64)
        w.beginObject()
        w.field("message-storage-policy", storage.rawValue)
        w.field("push-type", "LiveActivity")
        w.endObject()
        return MockDecision(status: 200, body: w.bytes)
    }

    /// `{"message-storage-policy": 0 or 1, "push-type": "LiveActivity"}`.
    private func create(_ request: MockRequest, bundle: String, channels: MockChannels) -> MockDecision {
        guard let object = request.withBody({ try? JSONValue.parse(Array($0)) }), case .object(let fields) = object else {
            return .reject(400, .badRequestPayload)
        }
        if fields.contains(where: { $0.key != "message-storage-policy" && $0.key != "push-type" }) { return .reject(400, .badRequestParams) }
        guard case .integer(let policy)? = fields["message-storage-policy"], let storage = ChannelStorage(rawValue: Int(policy)) else {
            return .reject(400, .missingChannelQueueSize)
        }
        guard case .string(let type)? = fields["push-type"] else { return .reject(400, .missingPushType) }
        guard type == "LiveActivity" else { return .reject(400, .invalidPushType) }
        guard let id = channels.create(bundle: bundle, storage: storage) else { return .reject(400, .cannotCreateChannelConfig) }
        var decision = MockDecision(status: 201)
        decision.channelID = id
        return decision
    }

    /// A credential may act for `bundle`: a JWT of a key for its topic, or a certificate for it.
    private func authorize(_ request: MockRequest, bundle: String, auth: inout ConnectionAuth) -> MockDecision? {
        if let uid = auth.certificateUID { return uid == bundle ? nil : .reject(403, .topicMismatch) }
        if case .failure(let refused) = authenticate(request, topic: bundle, auth: &auth, notCovered: .topicMismatch) { return refused }
        return nil
    }

    /// `aps.event` of a JSON payload, nil if there is none.
    static func apsEvent(_ payload: UnsafeRawBufferPointer) -> String? {
        guard let value = try? JSONValue.parse(Array(payload.bindMemory(to: UInt8.self))), case .object(let top) = value,
            case .object(let aps)? = top["aps"], case .string(let event)? = aps["event"]
        else { return nil }
        return event
    }
}
