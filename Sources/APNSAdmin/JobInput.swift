import APNSCore
import FoundationEssentials
import Glibc
import IOLoop

/// Jobs as an operator gives them to `apnsctl`: flags, JSON lines, or an edited dead letter.
public enum JobInput {
    /// One job from flags (`--token`, `--title`, …), written with the job schema's field names.
    public static func fromFlags(_ options: [String: [String]]) throws -> [UInt8] {
        func option(_ name: String) -> String? { options[name]?.last }
        guard let tokens = options["token"], !tokens.isEmpty else { throw AdminError.usage("enqueue needs --token (or --file)") }
        guard ["payload", "template", "title", "body", "badge", "sound"].contains(where: { options[$0] != nil }) else {
            throw AdminError.usage("enqueue needs content: --payload JSON, --title and --body, or --template NAME")
        }
        var w = JSONWriter()
        w.beginObject()
        w.field("v", 1)
        w.field("id", option("id") ?? UUIDText.random())
        if tokens.count == 1 { w.field("token", tokens[0]) } else { w.key("tokens"); w.beginArray(); for t in tokens { w.string(t) }; w.endArray() }
        for (flagName, field) in [
            ("app", "app"), ("push-type", "push_type"), ("topic", "topic"), ("collapse-id", "collapse_id"),
            ("idempotency-key", "idempotency_key"),
        ] {
            w.fieldIfPresent(field, option(flagName))
        }
        for (flagName, field) in [("priority", "priority"), ("expiration", "expiration"), ("send-at", "send_at")] {
            if let v = option(flagName) {
                guard let n = Int64(v) else { throw AdminError.usage("--\(flagName) takes a whole number") }
                w.field(field, n)
            }
        }
        if let payload = option("payload") {
            w.key("payload"); w.raw(Array(payload.utf8))
        } else if let template = option("template") {
            w.key("template"); w.beginObject(); w.field("name", template); w.fieldIfPresent("locale", option("locale"))
            if let data = option("data") { w.key("data"); w.raw(Array(data.utf8)) }
            w.endObject()
        } else {
            w.key("notification"); w.beginObject()
            w.key("alert"); w.beginObject(); w.fieldIfPresent("title", option("title")); w.fieldIfPresent("body", option("body")); w.endObject()
            if let badge = option("badge") { guard let n = Int(badge) else { throw AdminError.usage("--badge takes a number") }; w.field("badge", n) }
            w.fieldIfPresent("sound", option("sound"))
            w.endObject()
        }
        w.endObject()
        return w.bytes
    }

    /// Non-blank lines of a file, or of standard input for "-".
    public static func readLines(_ path: String) throws -> [[UInt8]] {
        let data: [UInt8]
        if path == "-" {
            do { data = try FileStream.standardInput.readToEnd() } catch { throw AdminError.usage("cannot read standard input: \(error)") }
        } else {
            guard let d = FileManager.default.contents(atPath: path) else { throw AdminError.usage("cannot read \(path)") }
            data = [UInt8](d)
        }
        return data.split(separator: 0x0A).map { Array($0) }.filter { !$0.allSatisfy { $0 == 0x20 || $0 == 0x0D } }
    }

    /// The job to requeue: the first line of `replacement`, or the job as edited in $EDITOR
    /// (an emptied file skips it). An edited job must pass the worker's parser.
    public static func edit(_ job: [UInt8], replacement: String?) throws -> [UInt8]? {
        if let replacement { return try readLines(replacement).first }
        let directory = ProcessInfo.processInfo.environment["TMPDIR"].map { $0.hasSuffix("/") ? $0 : $0 + "/" } ?? "/tmp/"
        let path = directory + "apnsctl-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).json"
        try Data(job).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let editor = ProcessInfo.processInfo.environment["EDITOR"] ?? "vi"
        _ = try Spawn.run(["/bin/sh", "-c", "\(editor) \"$1\"", "sh", path])
        guard let first = try readLines(path).first else { return nil }
        do { _ = try Job.parse(first) } catch { throw AdminError.invalid("the edited job is invalid: \(error)") }
        return first
    }
}
