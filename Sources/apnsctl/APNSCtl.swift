import APNSAdmin
import APNSCore
import Configuration
import Dashboard
import FoundationEssentials
import Glibc
import IOLoop
import QueueContract
import RedisClient
import Telemetry

// apnsctl: operate an apns-worker queue (enqueue, stats, dead letters, invalid tokens, config).
// The commands live in APNSAdmin; this file parses arguments and wires them up. Everything runs
// inside `main()` so that no state is a global.

let help: [String: String] = [
    "": """
    usage: apnsctl [--config FILE] [--redis HOST:PORT|/SOCKET] [--db N] [--queue NAME] [--shards N] [--json] COMMAND ...
           apnsctl --version

    commands:
      enqueue         add one job from flags, or JSON lines from --file FILE (or - for stdin)
      stats           queue depth, in flight, scheduled and retries, dead letters, results/s, workers, per app
      queues          each queue the configuration serves (queues), its share, and its figures
      dead list       list dead letters (--reason, --app, --older-than, --newer-than, --limit)
      dead show ID    one dead letter with its attempts and original job
      dead requeue    put dead letters back on the queue: ID, or filters or --all with --yes (--dry-run lists them)
      dead purge      delete dead letters: ID, or filters or --all with --yes (--dry-run lists them)
      tokens invalid  read the invalid-token feed (--app, --since ID, --limit)
      channels create make a broadcast channel for an app (--app, --storage none|most-recent)
      channels list   an app's broadcast channels (--app)
      channels show ID    one channel's storage policy
      channels delete ID  delete a channel (its queued broadcasts then end in the channel feed)
      channels invalid    read the invalid-channel feed (--app, --since ID, --limit)
      check-config    validate the configuration and credentials (needs --config)
      web             serve the dashboard and its JSON API (--listen 127.0.0.1:8088, --auth-file FILE, --read-only)

    A queue of N shards (--shards, or the configuration's shards) is read and summed over all of
    them; a shard's record ids end in @SHARD. Of a configuration's several queues, --queue picks
    one (the first by default). Redis and the queue come from --config (a worker configuration), APNSW_* variables, then flags.
    The Redis password is read from the configuration, APNSW_REDIS_PASSWORD or the file
    APNSW_REDIS_PASSWORD_FILE names, never from a flag.
    The channels commands (but channels invalid) talk to Apple's channel-management API with the
    app's credentials from --config, not to Redis.
    Exit codes: 0 done, 1 nothing matched or invalid input or failed checks or APNs refused, 2 usage
    (an unknown flag, a wide requeue or purge without --yes), 3 Redis error, 4 APNs out of reach.
    Every command takes --help.
    """,
    "enqueue": """
    usage: apnsctl enqueue --token HEX [--token HEX ...] [--app NAME] [--id ID] [--push-type T] [--priority N]
                           [--topic T] [--collapse-id C] [--idempotency-key K] [--expiration S] [--send-at S]
                           (--payload JSON | --title T --body B [--badge N] [--sound S] | --template NAME [--locale L] [--data JSON])
           apnsctl enqueue --file FILE|-  [--progress]     JSON lines, one job each
    Every job is checked with the worker's parser first; one bad line enqueues nothing.
    """,
    "stats": "usage: apnsctl stats [--json]",
    "dead": "usage: apnsctl dead list|show|requeue|purge ... (see apnsctl --help)",
    "dead list": "usage: apnsctl dead list [--reason R] [--app A] [--older-than 2h] [--newer-than 15m] [--limit 100] [--json]",
    "dead show": "usage: apnsctl dead show ID [--json]",
    "dead requeue":
        "usage: apnsctl dead requeue (ID ... | (--all | --reason R | --app A | --older-than D | --newer-than D) (--yes | --dry-run)) [--edit | --replace FILE|-]\n  --edit opens each job in $EDITOR before requeueing; an emptied file skips it.",
    "dead purge": "usage: apnsctl dead purge (ID ... | (--all | --reason R | --app A | --older-than D | --newer-than D) (--yes | --dry-run))",
    "tokens": "usage: apnsctl tokens invalid [--app A] [--since ID] [--limit 1000] [--json]",
    "tokens invalid": "usage: apnsctl tokens invalid [--app A] [--since ID] [--limit 1000] [--json]",
    "check-config": "usage: apnsctl --config FILE check-config [--online] [--json]",
    "web": """
    usage: apnsctl web [--listen HOST:PORT] [--auth-file FILE] [--read-only]
    Serves the dashboard (pages and /api/...) for the queue, default on 127.0.0.1:8088.
    Changing data (requeue, purge) needs the secret: --auth-file FILE, APNSW_WEB_TOKEN_FILE or
    APNSW_WEB_TOKEN, at least 16 characters. Without one, or with --read-only, it only shows.
    Listening beyond 127.0.0.0/8 needs the secret, and then reading needs it too. See docs/dashboard.md.
    """,
    "channels": "usage: apnsctl --config FILE channels create|list|show|delete|invalid ... (see apnsctl --help)",
    "channels create": "usage: apnsctl --config FILE channels create [--app A] [--storage none|most-recent] [--json]",
    "channels list": "usage: apnsctl --config FILE channels list [--app A] [--json]",
    "channels show": "usage: apnsctl --config FILE channels show ID [--app A] [--json]",
    "channels delete": "usage: apnsctl --config FILE channels delete ID [--app A] [--json]",
    "channels invalid": "usage: apnsctl channels invalid [--app A] [--since ID] [--limit 1000] [--json]",
]

extension Array where Element == String {
    /// The first two elements, the second empty if there is none.
    fileprivate var pair: (String, String) { (first ?? "", count > 1 ? self[1] : "") }
}

@main
struct APNSCtl {
    static func main() {
        func parseArguments() -> (words: [String], options: [String: [String]]) {
            var words: [String] = []
            var options: [String: [String]] = [:]
            var args = Array(CommandLine.arguments.dropFirst())
            while !args.isEmpty {
                let arg = args.removeFirst()
                if arg.hasPrefix("--") {
                    let name = String(arg.dropFirst(2))
                    if CommandLineSpec.booleans.contains(name) { options[name, default: []].append("true"); continue }
                    guard !args.isEmpty else { FileStream.standardError.write("apnsctl: --\(name) needs a value\n"); exit(2) }
                    options[name, default: []].append(args.removeFirst())
                } else {
                    words.append(arg)
                }
            }
            return (words, options)
        }
        let (words, options) = parseArguments()
        func option(_ name: String) -> String? { options[name]?.last }
        func flag(_ name: String) -> Bool { options[name] != nil }
        func fail(_ message: String, code: Int32) -> Never {
            FileStream.standardError.write("apnsctl: \(message)\n")
            exit(code)
        }

        let commandKey = words.prefix(2).joined(separator: " ")
        if flag("version") {
            print(BuildInfo.line("apnsctl"))
            exit(0)
        }
        if flag("help") || words.isEmpty {
            print(help[commandKey] ?? help[words.first ?? ""] ?? help[""]!)
            exit(words.isEmpty && !flag("help") ? 2 : 0)
        }
        // A flag the command does not take is refused before anything is touched.
        guard let command = CommandLineSpec.command(words) else {
            fail("unknown command \"\(words.joined(separator: " "))\"\n\(help[""]!)", code: 2)
        }
        do { try CommandLineSpec.check(command: command.name, flags: options.keys, rest: command.rest) } catch {
            fail("\(error.description)\n\(help[command.name] ?? help[""]!)", code: 2)
        }

        // Where Redis is: the configuration, then the environment, then flags.
        var config: WorkerConfiguration?
        var endpoint = RedisEndpoint()
        var queue = "default"
        var shards = 1
        let environment = ProcessInfo.processInfo.environment
        if let path = option("config") ?? environment["APNSW_CONFIG"] {
            do {
                config = try WorkerConfiguration.load(path: path)
                endpoint = config!.redis
                queue = config!.queue
                shards = config!.shards
            } catch {
                if words.first == "check-config" {
                    // A deployment pipeline that asked for JSON gets JSON, the settings file's failure a check in it.
                    if flag("json") {
                        let check: [String: String] = ["level": "error", "message": "settings file \(path): \(error)"]
                        print(AdminContext.encode(["ok": false, "errors": 1, "warnings": 0, "checks": [check]] as [String: Any]))
                    } else {
                        print("error: \(error)")
                    }
                    exit(1)
                }
                fail("configuration: \(error)", code: 2)
            }
        } else {
            do {
                try endpoint.apply(environment: environment)
                try endpoint.validateTLS()
                try endpoint.validateSentinel()
            } catch { fail("\(error)", code: 2) }
            queue = environment["APNSW_QUEUE"] ?? queue
            shards = environment["APNSW_SHARDS"].flatMap { Int($0) } ?? shards
        }
        if let r = option("redis") {
            if r.hasPrefix("/") {
                endpoint.socket = r
            } else {
                let parts = r.split(separator: ":")
                endpoint.host = String(parts[0])
                if parts.count > 1 { endpoint.port = Int(parts[1]) ?? endpoint.port }
                endpoint.socket = nil
            }
        }
        if let db = option("db") { endpoint.database = Int(db) ?? 0 }
        if let q = option("queue") {
            queue = q
            if let served = config?.servedQueues.first(where: { $0.name == q }) { shards = served.shards }
        }
        if let n = option("shards") {
            guard let count = Int(n), (1...256).contains(count) else { fail("--shards takes a number in 1...256, not \(n)", code: 2) }
            shards = count
        }

        if words.first == "check-config" {
            guard let config else { fail("check-config needs --config FILE", code: 2) }
            var lines: [String] = []
            let (errors, warnings) = QueueCommands.checkConfig(config, online: flag("online")) { line in
                if flag("json") { lines.append(line) } else { print(line) }
            }
            if flag("json") {
                let checks = lines.map { line -> [String: String] in
                    let (level, message) = line.split(separator: ":", maxSplits: 1).map(String.init).pair
                    return ["level": level, "message": String(message.drop(while: \.isWhitespace))]
                }
                print(AdminContext.encode(["ok": errors == 0, "errors": errors, "warnings": warnings, "checks": checks] as [String: Any]))
            } else {
                print("\(errors) error(s), \(warnings) warning(s)")
            }
            exit(errors > 0 ? 1 : 0)
        }

        if words.first == "channels", words.dropFirst().first != "invalid" {
            let say: (String) -> Void = { print($0) }
            do {
                try ChannelCommands.run(
                    words[1], id: words.dropFirst(2).first, app: option("app"), storage: option("storage"), config: config, json: flag("json"),
                    say: say)
            } catch {
                fail(error.description, code: error.exitCode)
            }
            exit(0)
        }

        if words.first == "web" { serveDashboard(options: options, config: config, endpoint: endpoint, queue: queue, shards: shards) }

        let redis: BlockingRedisConnection
        do { redis = try BlockingRedisConnection(endpoint.routed(toKey: QueueKeys(queue: queue).jobs), timeoutMs: 10_000) } catch {
            fail("\(error)", code: 3)
        }
        let ctx = AdminContext(
            redis: redis, keys: QueueKeys(queue: queue), shards: shards, json: flag("json"), configuration: config, cluster: endpoint)

        func filter(ids: ArraySlice<String>) throws -> DeadLetterFilter {
            for id in ids where !DeadLetterFilter.isValidID(id) {
                throw AdminError.invalid("\"\(id)\" is not a dead-letter id (an id reads like 1764650000000-0: see apnsctl dead list)")
            }
            var f = DeadLetterFilter()
            f.ids = Array(ids)
            f.all = flag("all")
            f.reason = option("reason")
            f.app = option("app")
            f.olderThanMs = try option("older-than").map(parseDuration)
            f.newerThanMs = try option("newer-than").map(parseDuration)
            return f
        }

        let confirmation: Confirmation = flag("dry-run") ? .dryRun : flag("yes") ? .yes : .missing

        func progressBar(_ done: Int, _ total: Int) {
            let width = 30
            let filled = total == 0 ? width : done * width / total
            let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
            FileStream.standardError.write("\r[\(bar)] \(done)/\(total)\(done == total ? "\n" : "")")
        }

        do {
            switch (words.first, words.dropFirst().first) {
            case ("enqueue"?, _):
                if option("file") != nil, options["token"] != nil {
                    throw AdminError.usage("enqueue takes --file or --token, not both\n\(help["enqueue"]!)")
                }
                let jobs: [[UInt8]]
                if let file = option("file") { jobs = try JobInput.readLines(file) } else { jobs = [try JobInput.fromFlags(options)] }
                let showProgress = flag("progress") || (jobs.count >= 1000 && isatty(2) == 1)
                let n = try QueueCommands.enqueue(
                    ctx, jobs: jobs, knownApps: config?.apps.map(\.name), progress: showProgress ? { progressBar($0, $1) } : nil)
                ctx.say(
                    ctx.json
                        ? AdminContext.encode(["enqueued": n, "queue": queue])
                        : "enqueued \(n) job(s) onto \(shards > 1 ? "the \(shards) shards of queue \(queue)" : ctx.keys.jobs)")
            case ("stats"?, _):
                QueueCommands.printStats(ctx, try QueueCommands.stats(ctx))
            case ("queues"?, _):
                let served = config?.servedQueues ?? [ServedQueue(name: queue, shards: shards)]
                let rows = try QueueList.read(served) { q in
                    guard q.name != queue else { return ctx }
                    let keys = QueueKeys(queue: q.name)
                    let r = try BlockingRedisConnection(endpoint.routed(toKey: keys.jobs), timeoutMs: 10_000)
                    return AdminContext(redis: r, keys: keys, shards: q.shards, json: ctx.json, configuration: config, cluster: endpoint)
                }
                QueueList.print(rows, json: ctx.json) { ctx.say($0) }
            case ("dead"?, "list"?):
                let n = try DeadLetterCommands.list(ctx, try filter(ids: []), limit: Int(option("limit") ?? "100") ?? 100)
                if n == 0 { throw AdminError.notFound("no dead letters match") }
            case ("dead"?, "show"?):
                guard let id = words.dropFirst(2).first else { throw AdminError.usage(help["dead show"]!) }
                try DeadLetterCommands.show(ctx, id: try filter(ids: [id]).ids[0])
            case ("dead"?, "requeue"?):
                let editing = flag("edit") || option("replace") != nil
                let replacement = option("replace")
                let editor: (([UInt8]) throws -> [UInt8]?)? = editing ? { job in try JobInput.edit(job, replacement: replacement) } : nil
                _ = try DeadLetterCommands.requeue(ctx, try filter(ids: words.dropFirst(2)), confirmation: confirmation, edit: editor)
            case ("dead"?, "purge"?):
                _ = try DeadLetterCommands.purge(ctx, try filter(ids: words.dropFirst(2)), confirmation: confirmation)
            case ("tokens"?, "invalid"?):
                if let since = option("since"), !DeadLetterFilter.isValidID(since) {
                    throw AdminError.invalid("--since \"\(since)\" is not a stream id (an id reads like 1764650000000-0)")
                }
                let n = try QueueCommands.invalidTokens(
                    ctx, app: option("app"), after: option("since"), limit: Int(option("limit") ?? "1000") ?? 1000)
                if n == 0 { throw AdminError.notFound("no invalid tokens match") }
            case ("channels"?, "invalid"?):
                if let since = option("since"), !DeadLetterFilter.isValidID(since) {
                    throw AdminError.invalid("--since \"\(since)\" is not a stream id (an id reads like 1764650000000-0)")
                }
                let n = try QueueCommands.invalidChannels(
                    ctx, app: option("app"), after: option("since"), limit: Int(option("limit") ?? "1000") ?? 1000)
                if n == 0 { throw AdminError.notFound("no invalid channels match") }
            default:
                throw AdminError.usage("unknown command \"\(words.joined(separator: " "))\"\n\(help[""]!)")
            }
        } catch let error as AdminError {
            fail(error.description, code: error.exitCode)
        } catch let error as RedisError {
            fail("\(error)", code: 3)
        } catch {
            fail("\(error)", code: 1)
        }
    }
}

/// `apnsctl web`: the dashboard over the same Redis and queue settings as the other commands.
func serveDashboard(options: [String: [String]], config: WorkerConfiguration?, endpoint: RedisEndpoint, queue: String, shards: Int) -> Never {
    let settings: WebCommand.Settings
    do {
        settings = try WebCommand.Settings.parse(
            listen: options["listen"]?.last, authFile: options["auth-file"]?.last, readOnly: options["read-only"] != nil,
            environment: ProcessInfo.processInfo.environment)
    } catch {
        FileStream.standardError.write("apnsctl: \(error.description)\n")
        exit(2)
    }
    let keys = QueueKeys(queue: queue)
    let data = DashboardData(readOnly: settings.readOnly, configuredApps: config?.apps.map(\.name) ?? []) {
        let redis = try BlockingRedisConnection(endpoint.routed(toKey: keys.jobs), timeoutMs: 5000)
        return AdminContext(redis: redis, keys: keys, shards: shards, json: true, configuration: config, cluster: endpoint, output: { _ in })
    }
    if let served = config?.servedQueues, served.count > 1 {
        data.queues = served
        data.openQueue = { q in
            let keys = QueueKeys(queue: q.name)
            let redis = try BlockingRedisConnection(endpoint.routed(toKey: keys.jobs), timeoutMs: 5000)
            return AdminContext(redis: redis, keys: keys, shards: q.shards, json: true, configuration: config, cluster: endpoint, output: { _ in })
        }
    }
    // Each app's channels, asked of APNs with its credentials (only with --config).
    var lister: (@Sendable (String) throws -> [String])?
    if let config {
        lister = { @Sendable (app: String) throws -> [String] in
            var lines: [String] = []
            try ChannelCommands.run("list", id: nil, app: app, storage: nil, config: config, json: true) { lines.append($0) }
            guard let first = lines.first, let rows = (try? JSONValue.parse(Array(first.utf8)))?.array else { return [] }
            return rows.compactMap { $0["channel"]?.string }
        }
    }
    do { try WebCommand.run(settings, data: data, queue: queue, channelLister: lister) } catch {
        FileStream.standardError.write("apnsctl: cannot serve the dashboard on \(settings.host):\(settings.port): \(error)\n")
        exit(2)
    }
}
