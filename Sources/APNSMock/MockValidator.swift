import APNSCore
import Foundation
import Synchronization
import TLS

/// Apple's checks, in Apple's order: authentication first, then the request itself
/// (issue #2; apns-protocol.md §2, §5, §6, §8 with the "stricter double" column).
final class MockValidator {
    struct VerifiedKey {
        let keyID: String
        let teamID: String
        let topics: Set<String>
        let publicKey: ES256PublicKey
        let environment: String?
        let isTopicKey: Bool
        let related: String?
    }

    private let keys: [String: VerifiedKey]
    let disabledBroadcasts: Set<String>
    private let tokenMaxAge: Int64
    private let environment: String
    private let tokenUpdateWindow: Int64
    private let now: () -> Int64
    /// Keys revoked at run time (`MockServer.revoke`): their JWTs get 403 InvalidProviderToken.
    private let revoked = Mutex<Set<String>>([])
    private let anyRevoked = Atomic<Bool>(false)

    func setRevoked(_ keyID: String, _ isRevoked: Bool) {
        let any = revoked.withLock { set in
            if isRevoked { set.insert(keyID) } else { set.remove(keyID) }
            return !set.isEmpty
        }
        anyRevoked.store(any, ordering: .releasing)
    }

    init(configuration: MockConfiguration, now: @escaping () -> Int64) throws {
        var keys: [String: VerifiedKey] = [:]
        for key in configuration.keys {
            let pem = try readFile(key.publicKey)
            keys[key.keyID] = VerifiedKey(
                keyID: key.keyID, teamID: key.teamID, topics: Set(key.topics),
                publicKey: try ES256PublicKey(pem: pem), environment: key.environment, isTopicKey: key.scope == "topic",
                related: key.related)
        }
        self.keys = keys
        disabledBroadcasts = Set(configuration.broadcastDisabled)
        environment = configuration.environment
        tokenMaxAge = Int64(configuration.tokenMaxAgeSeconds)
        tokenUpdateWindow = Int64(configuration.tokenUpdateWindowSeconds)
        self.now = now
    }

    /// Per-connection authentication state: the pinned team and the last verified JWT.
    struct ConnectionAuth {
        var certificateUID: String?
        var pinnedTeam: String?
        /// The key of the connection's first verified JWT: later ones must be related to it.
        var pinnedKey: String?
        /// The last `authorization` value verified here, whole, and its claims.
        var lastAuthorization: [UInt8]?
        var lastClaims: JWTClaims?
        /// When this connection's JWT last changed (the first one is not a change).
        var lastTokenChange: Int64?
        /// The last topic as text, and the last one the verified key was found to cover: a
        /// connection's requests mostly repeat both.
        var lastTopic: (bytes: [UInt8], text: String)?
        var coveredTopic: String?

        /// The request's `apns-topic`, as text made once per topic.
        mutating func topic(of request: MockRequest) -> String? {
            if let last = lastTopic, request.value("apns-topic", is: last.bytes) { return last.text }
            guard let text = request.value("apns-topic") else { return nil }
            lastTopic = (Array(text.utf8), text)
            return text
        }
    }

    func decide(_ request: MockRequest, auth: inout ConnectionAuth) -> MockDecision {
        let topic = auth.topic(of: request)
        var keyID: String?
        if let uid = auth.certificateUID {
            // Certificate mode: the topic defaults to the subject, and may carry .voip/.complication.
            if let topic, topic != uid, topic != uid + ".voip", topic != uid + ".complication" {
                return .reject(400, .badTopic)
            }
        } else {
            switch authenticate(request, topic: topic, auth: &auth) {
            case .failure(let decision): return decision
            case .success(let kid): keyID = kid
            }
        }
        var decision = checkRequest(request, topic: topic ?? auth.certificateUID)
        decision.keyID = keyID
        return decision
    }

    enum AuthResult { case success(String), failure(MockDecision) }

    /// `notCovered`: the reason when the key does not serve the topic (a broadcast's is TopicMismatch).
    func authenticate(
        _ request: MockRequest, topic: String?, auth: inout ConnectionAuth, notCovered: APNSReason = .invalidProviderToken
    ) -> AuthResult {
        let claims: JWTClaims
        if let cached = auth.lastClaims, request.value("authorization", is: auth.lastAuthorization) {
            claims = cached  // verified on this connection already; compared as bytes, with no String made
        } else {
            guard let header = request.value("authorization"), header.hasPrefix("bearer "), header.utf8.count > 7 else {
                return .failure(.reject(403, .missingProviderToken))
            }
            let token = String(header.dropFirst(7))
            if auth.lastAuthorization != nil {
                // A new JWT on a live connection: at most one change per window (apns-protocol.md §6.1).
                if let last = auth.lastTokenChange, now() - last < tokenUpdateWindow {
                    return .failure(.reject(429, .tooManyProviderTokenUpdates))
                }
                auth.lastTokenChange = now()
            }
            guard let decoded = JWTClaims.decode(token), let key = keys[decoded.claims.keyID],
                key.teamID == decoded.claims.teamID,
                key.publicKey.verify(signature: decoded.signature, message: Array(decoded.signingInput.utf8))
            else {
                return .failure(.reject(403, .invalidProviderToken))
            }
            claims = decoded.claims
            auth.lastAuthorization = Array(header.utf8)
            auth.lastClaims = claims
            auth.coveredTopic = nil
        }
        if anyRevoked.load(ordering: .acquiring), revoked.withLock({ $0.contains(claims.keyID) }) {
            return .failure(.reject(403, .invalidProviderToken))
        }
        if let pinned = auth.pinnedTeam, pinned != claims.teamID {
            return .failure(.reject(403, .invalidProviderToken))
        }
        auth.pinnedTeam = claims.teamID
        if let refused = checkScope(claims.keyID, auth: &auth) { return .failure(refused) }
        if now() - claims.issuedAt > tokenMaxAge {
            return .failure(.reject(403, .expiredProviderToken))
        }
        guard let topic else { return .failure(.reject(400, .missingTopic)) }
        if topic != auth.coveredTopic {
            let key = keys[claims.keyID]!
            // A team key serves its team's bundles and what lies under them; a topic key its
            // bundles and their push-type topics only (apns-protocol.md §6.1).
            let serves: (String) -> Bool = key.isTopicKey ? { PushType.isTopic(topic, ofBundle: $0) } : { topic == $0 || topic.hasPrefix($0 + ".") }
            guard key.topics.contains(where: serves) else {
                return .failure(.reject(403, notCovered))
            }
            auth.coveredTopic = topic
        }
        return .success(claims.keyID)
    }

    /// A key for the other environment, or one unrelated to the connection's first key, is
    /// refused (apns-protocol.md §6.1): a connection never mixes a team key with a topic key, nor
    /// two topic keys that are not related.
    private func checkScope(_ keyID: String, auth: inout ConnectionAuth) -> MockDecision? {
        if auth.pinnedKey == keyID { return nil }  // checked when it was pinned
        let key = keys[keyID]!
        if let env = key.environment, env != environment { return .reject(403, .badEnvironmentKeyIdInToken) }
        guard let first = auth.pinnedKey, let pinned = keys[first] else {
            auth.pinnedKey = keyID
            return nil
        }
        let related = pinned.isTopicKey && key.isTopicKey && (pinned.related == keyID || key.related == first)
        let bothTeamKeys = !pinned.isTopicKey && !key.isTopicKey
        return related || bothTeamKeys ? nil : .reject(403, .unrelatedKeyIdInToken)
    }

    private func checkRequest(_ request: MockRequest, topic: String?) -> MockDecision {
        if request.hasDuplicateNames { return .reject(400, .duplicateHeaders) }
        guard request.value(":method", is: "POST") else { return .reject(405, .methodNotAllowed) }
        let tokenError: MockDecision? = request.withPathToken { token in
            guard let token else { return .reject(404, .badPath) }
            if token.isEmpty { return .reject(400, .missingDeviceToken) }
            return token.count == 64 && DeviceToken(utf8: token) != nil ? nil : .reject(400, .badDeviceToken)
        }
        if let tokenError { return tokenError }
        guard let topic else { return .reject(400, .missingTopic) }
        var pushType = PushType.alert
        if let name = request.value("apns-push-type") {
            guard let known = PushType(name) else { return .reject(400, .invalidPushType) }
            pushType = known
        }
        guard pushType.matches(topic: topic) else { return .reject(400, .badTopic) }
        var priority = Priority.immediate  // APNs reads a missing apns-priority as 10
        if let text = request.value("apns-priority") {
            guard let value = Int64(text), let p = Priority(value) else { return .reject(400, .badPriority) }
            priority = p
        }
        guard pushType.allows(priority) else { return .reject(400, .badPriority) }
        if let text = request.value("apns-expiration") {
            guard let value = Int64(text), value >= 0 else { return .reject(400, .badExpirationDate) }
        }
        if let collapse = request.value("apns-collapse-id"), collapse.utf8.count > RequestRules.maxCollapseIDBytes {
            return .reject(400, .badCollapseId)
        }
        if let id = request.value("apns-id"), !UUIDText.isValid(id) {
            return .reject(400, .badMessageId)
        }
        if request.bodyCount == 0 { return .reject(400, .payloadEmpty) }
        if request.bodyCount > pushType.maxPayloadBytes { return .reject(413, .payloadTooLarge) }
        let isObject: Bool = request.withBody { (try? JSONScanner.validateObject($0)) != nil }
        // Apple's device-push table has no reason for a non-JSON body; its broadcast table does.
        if !isObject { return .reject(400, APNSReason("BadRequestPayload")) }
        return .accepted
    }
}

func readFile(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw MockError("cannot read \(path)")
    }
    return [UInt8](data)
}

struct MockError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
