import APNSCore
import APNSTransport
import APNSWorker
import Configuration

/// `apnsctl channels …`: an app's broadcast channels, through Apple's channel-management API
/// with the app's credentials (apns-protocol.md §3.2).
public enum ChannelCommands {
    /// `channels create|list|show|delete`.
    public static func run(
        _ command: String, id: String?, app name: String?, storage: String?, config: WorkerConfiguration?, json: Bool, say: (String) -> Void
    ) throws(AdminError) {
        let app = try app(config, named: name)
        let client: ChannelClient
        do { client = try ChannelClient(app: APNSApp(app)) } catch { throw .usage("app \(app.name): \(error)") }
        switch command {
        case "create":
            let policy = storage ?? "none"
            guard let storage = ChannelStorage(name: policy) else { throw .usage("--storage is none or most-recent, not \(policy)") }
            try create(client, storage: storage, json: json, say: say)
        case "list":
            if try list(client, json: json, say: say) == 0, !json { say("(no channels)") }
        case "show": try show(client, id: id ?? "", json: json, say: say)
        default: try delete(client, id: id ?? "", json: json, say: say)
        }
    }

    /// The app a command acts for: `--app`, else the only app, else the one named `default`.
    public static func app(_ config: WorkerConfiguration?, named name: String?) throws(AdminError) -> AppConfiguration {
        guard let config else { throw .usage("channels commands need the app's credentials: give --config FILE (or APNSW_CONFIG)") }
        let known = config.apps.map(\.name).joined(separator: ", ")
        if let name {
            guard let app = config.apps.first(where: { $0.name == name }) else { throw .invalid("no app named \"\(name)\" (known: \(known))") }
            return app
        }
        if config.apps.count == 1 { return config.apps[0] }
        guard let app = config.apps.first(where: { $0.name == "default" }) else {
            throw .usage("the configuration has several apps (\(known)): say which with --app")
        }
        return app
    }

    public static func create(_ client: ChannelClient, storage: ChannelStorage, json: Bool, say: (String) -> Void) throws(AdminError) {
        let answer = try ask(client, "create a channel") { try $0.create(storage: storage) }
        guard answer.status == 201, let id = answer.channelID else { throw refusal(answer, client, doing: "create a channel") }
        let row = ["channel": id, "app": client.app.name, "storage": storage.name, "request_id": answer.requestID ?? ""]
        if json { say(AdminContext.encode(row)) } else { say("created channel \(id) for app \(client.app.name) (storage \(storage.name))") }
    }

    public static func list(_ client: ChannelClient, json: Bool, say: (String) -> Void) throws(AdminError) -> Int {
        let answer = try ask(client, "list channels") { try $0.list() }
        guard answer.status == 200 else { throw refusal(answer, client, doing: "list channels") }
        guard case .object(let body)? = try? JSONValue.parse(answer.body), case .array(let items)? = body["channels"] else {
            throw .invalid("APNs answered the channel list with a body that is not {\"channels\": […]}")
        }
        let ids = items.compactMap(\.string)
        AdminContext.table(["channel"], ids.map { [$0] }, jsonRows: ids.map { ["channel": $0, "app": client.app.name] }, json: json, say: say)
        return ids.count
    }

    public static func show(_ client: ChannelClient, id: String, json: Bool, say: (String) -> Void) throws(AdminError) {
        try checkID(id)
        let answer = try ask(client, "read channel \(id)") { try $0.read(id) }
        guard answer.status == 200 else { throw refusal(answer, client, doing: "read channel \(id)") }
        guard case .object(let body)? = try? JSONValue.parse(answer.body) else {
            throw .invalid("APNs answered channel \(id) with a body that is not JSON")
        }
        let policy: Int? = if case .integer(let p)? = body["message-storage-policy"] { Int(p) } else { nil }
        let storage = policy.flatMap(ChannelStorage.init(rawValue:))?.name ?? policy.map(String.init) ?? "?"
        let pushType = body["push-type"]?.string ?? "?"
        AdminContext.table(
            ["channel", "app", "storage", "push_type"], [[id, client.app.name, storage, pushType]],
            jsonRows: [["channel": id, "app": client.app.name, "storage": storage, "push_type": pushType]], json: json, say: say)
    }

    public static func delete(_ client: ChannelClient, id: String, json: Bool, say: (String) -> Void) throws(AdminError) {
        try checkID(id)
        let answer = try ask(client, "delete channel \(id)") { try $0.delete(id) }
        guard answer.status == 204 || answer.status == 200 else { throw refusal(answer, client, doing: "delete channel \(id)") }
        if json { say(AdminContext.encode(["deleted": id, "app": client.app.name])) } else { say("deleted channel \(id) of app \(client.app.name)") }
    }

    private static func checkID(_ id: String) throws(AdminError) {
        guard BroadcastRules.isChannelID(id) else { throw .invalid("\"\(id)\" is not a channel id (base64, as channels create printed it)") }
    }

    private static func ask(
        _ client: ChannelClient, _ doing: String, _ call: (ChannelClient) throws -> ChannelClient.Answer
    ) throws(AdminError)
        -> ChannelClient.Answer
    {
        do { return try call(client) } catch { throw .unreachable("cannot \(doing) for app \(client.app.name): \(error)") }
    }

    /// What to tell an operator about a refusal, by Apple's reason.
    private static func refusal(_ answer: ChannelClient.Answer, _ client: ChannelClient, doing: String) -> AdminError {
        let reason = answer.reason ?? "HTTP\(answer.status)"
        let app = client.app.name
        let why: String
        switch APNSReason(reason) {
        case .cannotCreateChannelConfig:
            why =
                "app \(app) has as many channels as APNs allows (10,000 per app and environment): delete some (apnsctl channels list, channels delete ID)"
        case .channelNotRegistered: why = "APNs has no such channel for app \(app) in this environment (deleted, or never made)"
        case .featureNotEnabled: why = "broadcast push is not enabled for \(client.app.bundleID): turn it on for the App ID at developer.apple.com"
        case .topicMismatch: why = "the credentials of app \(app) do not cover \(client.app.bundleID)"
        default: why = APNSReason(reason).isKnown ? APNSReason(reason).info.meaning : "APNs answered \(answer.status)"
        }
        return .invalid("cannot \(doing): \(answer.status) \(reason): \(why)")
    }
}
