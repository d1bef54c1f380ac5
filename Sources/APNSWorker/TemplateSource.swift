import APNSCore
import Configuration
import FoundationEssentials
import RedisClient
import Telemetry

/// A fetcher's templates: files from `templates_dir`, overridden by the queue's
/// templates hash in Redis, which is re-read at most once a second so that templates can be
/// changed while workers run.
final class TemplateSource {
    private(set) var library = TemplateLibrary()
    private var files: [String: [UInt8]] = [:]
    private var fromRedis: Set<String> = []
    private var readAt: UInt64 = 0
    private let key: String
    private let logger: Logger

    init(directory: String?, redisKey: String, logger: Logger) throws {
        key = redisKey
        self.logger = logger
        guard let directory else { return }
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory,
            let listed = try? FileManager.default.contentsOfDirectory(atPath: directory)
        else {
            throw ConfigurationError("templates_dir \(directory) is not a directory this worker can read")
        }
        let names = listed.filter { $0.hasSuffix(".json") }.sorted()
        for name in names {
            let path = URL(fileURLWithPath: directory).appendingPathComponent(name).path
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            let templateKey = String(name.dropLast(".json".count))
            do {
                try library.set(templateKey, source: [UInt8](data))
                files[templateKey] = [UInt8](data)
            } catch {
                throw ConfigurationError("template \(path): \(error.detail)")
            }
        }
        logger.info("loaded templates", ["directory": .string(directory), "count": .int(files.count)])
    }

    /// The command that reads the Redis hash, if the last read is more than a second old.
    func readIfStale(nowMs: UInt64) -> RedisArgs? {
        guard nowMs - readAt >= 1000 else { return nil }
        readAt = nowMs
        return RedisArgs(["HGETALL", key])
    }

    /// Takes the hash as HGETALL answered it (read flat: the array, then name and source pairs).
    func apply(_ reply: RedisFlatReply) {
        guard reply.count > 0, reply.isArray(0) else { return }
        var seen: Set<String> = []
        var i = 1
        while i + 1 < reply.count {
            if let name = reply.bytes(i).map({ String(decoding: $0, as: UTF8.self) }), let source = reply.bytes(i + 1) {
                seen.insert(name)
                do {
                    try library.set(name, source: source)
                } catch {
                    logger.warning("ignoring a template from Redis", ["template": .string(name), "error": .string(error.detail)])
                }
            }
            i += 2
        }
        for gone in fromRedis.subtracting(seen) {
            if let file = files[gone] { try? library.set(gone, source: file) } else { library.remove(gone) }
        }
        fromRedis = seen
    }
}
